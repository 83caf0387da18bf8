"""The per-tenant token bucket (services/api/ratelimit.py), on a fake clock."""

from __future__ import annotations

import pytest

from services.api.ratelimit import TokenBuckets
from shared.config import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_rate_per_tenant() -> None:
    clock = Clock()
    b = TokenBuckets(rate=2.0, burst=3, clock=clock)
    assert [b.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take("a") == pytest.approx(0.5)  # one token every 0.5 s
    assert b.take("b") == 0.0  # another tenant has its own bucket
    clock.now += 0.5
    assert b.take("a") == 0.0 and b.take("a") == pytest.approx(0.5)
    clock.now += 100
    assert [b.take("a") for _ in range(4)][-1] > 0  # refills to the burst, never beyond


def test_a_refused_request_spends_nothing() -> None:
    clock = Clock()
    b = TokenBuckets(rate=1.0, burst=1, clock=clock)
    assert b.take("a") == 0.0
    for _ in range(10):
        assert b.take("a") > 0
    clock.now += 1.0
    assert b.take("a") == 0.0


def test_defaults_are_generous() -> None:
    s = Settings()
    assert s.per_tenant_requests_per_second == 200 and s.per_tenant_request_burst >= 200
