"""Fixtures the reliability tests share with the distributed ones: a private redis-server."""

from tests.integration.distributed.conftest import redis_srv  # noqa: F401 - re-exported as a fixture
