"""A store's schema version as an operator sees it, read without migrating or starting anything:
whether this build would upgrade it at start, or refuse it."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from shared.adapters.schema import postgres, sqlite
from shared.adapters.schema.runner import SchemaTooNew


@dataclass(frozen=True)
class SchemaStatus:
    version: int  # 0: no database yet, or one from before schema versions
    latest: int  # the version this build migrates to

    def line(self) -> str:
        if self.version > self.latest:
            return str(SchemaTooNew(self.version, self.latest))
        if self.version == self.latest:
            return f"store schema version {self.version} (current)"
        return f"store schema version {self.version}; this build migrates it to {self.latest} at start"


def sqlite_status(path: Path) -> SchemaStatus:
    """The status of the SQLite store at `path` (a missing file reads as version 0)."""
    if not path.exists():
        return SchemaStatus(0, sqlite.LATEST)
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return SchemaStatus(sqlite.current_version(conn), sqlite.LATEST)
    finally:
        conn.close()


def postgres_status(url: str, connect_timeout: int = 30) -> SchemaStatus:
    """The status of the PostgreSQL store at `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout) as conn:
        return SchemaStatus(postgres.current_version(conn), postgres.LATEST)


def store_schema_status(store: str, sqlite_path: Path, postgres_url: str) -> SchemaStatus:
    """The status of the store a deployment is configured with (`store` as VIBE_STORE says)."""
    return postgres_status(postgres_url) if store == "postgres" else sqlite_status(sqlite_path)
