"""The schema of the embedded store of record (SqliteStore): its migrations and their runner.

The schema lock is SQLite's write lock: each step is one BEGIN IMMEDIATE transaction, which
other processes on the data dir wait for (busy timeout) before they read the version again.
DDL is transactional in SQLite, so a step that fails leaves nothing of itself behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from shared.adapters.schema import audit, baseline, explain, ledger
from shared.adapters.schema.runner import Migrated, Migration, latest
from shared.adapters.schema.runner import migrate as run
from shared.adapters.sqlite_wal import immediate

# Version 1, this store's own tables (frozen, as baseline.py is).
TABLES_V1 = """
CREATE TABLE IF NOT EXISTS docs(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, doc_id TEXT NOT NULL,
  fields TEXT NOT NULL, acl TEXT NOT NULL, intent TEXT, vibe TEXT NOT NULL,
  content_hash TEXT NOT NULL, updated_at REAL NOT NULL,
  PRIMARY KEY(tenant, collection, doc_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sidecar(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, doc_id TEXT NOT NULL, space TEXT NOT NULL,
  status TEXT NOT NULL, content_hash TEXT NOT NULL, reason TEXT, model_id TEXT,
  last_embedded_at REAL, attempts INTEGER NOT NULL DEFAULT 0, updated_at REAL NOT NULL,
  cold_ref TEXT,
  PRIMARY KEY(tenant, collection, doc_id, space)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sidecar_by_status ON sidecar(space, status, updated_at);
CREATE TABLE IF NOT EXISTS vectors(
  tenant TEXT NOT NULL, content_hash TEXT NOT NULL, space TEXT NOT NULL,
  model_id TEXT NOT NULL, dim INTEGER NOT NULL, vec BLOB NOT NULL, created_at REAL NOT NULL,
  PRIMARY KEY(tenant, content_hash, space)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spaces(
  space TEXT PRIMARY KEY, model_id TEXT NOT NULL, dim INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS promotions(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, promoted_at REAL NOT NULL,
  PRIMARY KEY(tenant, collection)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, collection TEXT NOT NULL,
  doc_id TEXT NOT NULL, op TEXT NOT NULL, space TEXT);
CREATE TABLE IF NOT EXISTS follower_positions(name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
"""

# Append a step here, and the same version to postgres.py (schema/__init__.py says how).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the schema as the code before versions made it; idempotent, so it adopts such a store",
              TABLES_V1 + baseline.SHARED),
    Migration(2, "provider_calls: the provider-call ledger, one row per call per document", """
CREATE TABLE IF NOT EXISTS provider_calls(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, call_id TEXT NOT NULL, tenant TEXT NOT NULL, collection TEXT NOT NULL,
  doc_id TEXT, fields TEXT, space TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  tokens INTEGER NOT NULL, purpose TEXT NOT NULL, at REAL NOT NULL, day TEXT NOT NULL, outcome TEXT NOT NULL);
""" + ledger.INDEXES),
    Migration(3, "explain_records: explain records shared by every replica until they expire", """
CREATE TABLE IF NOT EXISTS explain_records(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, caller TEXT NOT NULL,
  collection TEXT NOT NULL, doc_id TEXT NOT NULL, expires_at REAL NOT NULL, body TEXT NOT NULL);
""" + explain.INDEXES),
    Migration(4, "collection_settings.rerank: a collection's reads rerank unless they say otherwise",
              "ALTER TABLE collection_settings ADD COLUMN rerank INTEGER;"),
    Migration(5, "graph edges: the edge documents found by either end (shared/adapters/edges_sql.py)", """
CREATE INDEX IF NOT EXISTS docs_edges_from ON docs(tenant, json_extract(fields, '$.from'))
  WHERE collection='semantic.edges';
CREATE INDEX IF NOT EXISTS docs_edges_to ON docs(tenant, json_extract(fields, '$.to'))
  WHERE collection='semantic.edges';
"""),
    Migration(6, "indexes of the admin reports: vectors by space, ready rows by hash, skipped and cold rows",
              audit.INDEXES),
)
LATEST = latest(MIGRATIONS)


def statements(script: str) -> Iterator[str]:
    """The statements of a script, one at a time: sqlite3 runs a script only by `executescript`,
    which commits first, so a script inside a step's transaction goes statement by statement.
    SQLite's own tokenizer (`complete_statement`) decides where one ends, so a `;` in a comment
    or a string does not cut a statement."""
    start = 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start:end + 1]):
            yield script[start:end + 1]
            start = end + 1
    rest = script[start:]
    if any(line.strip() and not line.strip().startswith("--") for line in rest.splitlines()):
        raise ValueError(f"unterminated statement in a migration: {rest.strip()[:80]!r}")


class SqliteDialect:
    placeholder = "?"

    def __init__(self, transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]):
        self._transaction = transaction

    def version(self, conn: Any) -> int:
        present = conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone()
        if not present[0]:
            return 0
        return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0])

    def locked(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._transaction()

    def script(self, conn: Any, sql: str) -> None:
        for statement in statements(sql):
            conn.execute(statement)


def migrate(conn: sqlite3.Connection, transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
            | None = None, migrations: Sequence[Migration] = MIGRATIONS) -> Migrated:
    """Bring the database on `conn` (autocommit, isolation_level=None) to the latest version.
    `transaction` opens a write transaction (default: BEGIN IMMEDIATE on `conn`); SqliteStore
    passes its own, which queues the process's writers fairly first."""
    return run(SqliteDialect(transaction or (lambda: immediate(conn))), conn, migrations)


def current_version(conn: sqlite3.Connection) -> int:
    """The version of the database on `conn`, without migrating: 0 for one from before versions."""
    return SqliteDialect(lambda: immediate(conn)).version(conn)
