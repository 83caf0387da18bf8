from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres_server import PostgresServer, find_bindir, postgres_server
from tests.support.server import Served, served


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One served instance (hash embedder) per test module."""
    with served(Path(tmp_path_factory.mktemp("srv")) / "data") as s:
        yield s


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One private PostgreSQL cluster for the whole run (startup costs ~2 s); tests take a fresh
    database each from `postgres_url`."""
    if find_bindir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb/postgres on PATH or in /usr/lib/postgresql/*/bin; "
                    "apt-get install -y postgresql)")
    with postgres_server() as srv:
        yield srv


_databases = itertools.count()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A fresh, empty database of the session's cluster: tests never see each other's rows."""
    return postgres.create_database(f"t{next(_databases)}")
