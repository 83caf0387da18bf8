"""The schema of the distributed store of record (PostgresStore): its migrations and their runner.

The schema lock is a transaction-scoped advisory lock, taken first in each step's transaction:
API replicas and Celery workers starting together wait for it, then read the version again.
DDL is transactional in PostgreSQL, so a step that fails leaves nothing of itself behind.

Why not Alembic: it needs SQLAlchemy, which nothing else here uses (the store speaks plain
psycopg), and what it would add over this runner (autogenerate from models, downgrades,
branches) has nothing to work on: there are no models, and steps are forward only. The same
runner serves SQLite, so both stores number their versions alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from shared.adapters.schema import audit, baseline, explain, ledger
from shared.adapters.schema.runner import Migrated, Migration, latest, scalar
from shared.adapters.schema.runner import migrate as run

if TYPE_CHECKING:  # the embedded profile reads versions without loading psycopg
    from psycopg import Connection

# pg_advisory_xact_lock key of schema changes. The value the code before versions took around its
# DDL, so a replica of that code starting beside a migrating one waits for it too.
SCHEMA_LOCK = 0x7669_6265_0001

# Version 1, this store's own tables (frozen, as baseline.py is).
# JSON fields are `json`, not `jsonb`: `json` keeps the text as written, so a document comes
# back with its keys in the writer's order, as from SqliteStore. Vectors are `bytea` (float32,
# little-endian): the store never computes on them (search is the vector index's job), so SQL
# arrays would buy nothing, while bytea is compact (4 bytes a dimension, no per-element header),
# byte-identical to the SQLite blob, and decodes with one numpy.frombuffer instead of a Python
# float per element.
TABLES_V1 = """
CREATE TABLE IF NOT EXISTS docs(
  tenant text NOT NULL, collection text NOT NULL, doc_id text NOT NULL,
  fields json NOT NULL, acl json NOT NULL, intent text, vibe json NOT NULL,
  content_hash text NOT NULL, updated_at double precision NOT NULL,
  PRIMARY KEY(tenant, collection, doc_id));
CREATE INDEX IF NOT EXISTS docs_by_hash ON docs(tenant, content_hash);
CREATE TABLE IF NOT EXISTS sidecar(
  tenant text NOT NULL, collection text NOT NULL, doc_id text NOT NULL, space text NOT NULL,
  status text NOT NULL, content_hash text NOT NULL, reason text, model_id text,
  last_embedded_at double precision, attempts integer NOT NULL DEFAULT 0,
  updated_at double precision NOT NULL, cold_ref text,
  PRIMARY KEY(tenant, collection, doc_id, space));
CREATE INDEX IF NOT EXISTS sidecar_by_status ON sidecar(space, status, updated_at);
CREATE TABLE IF NOT EXISTS vectors(
  tenant text NOT NULL, content_hash text NOT NULL, space text NOT NULL,
  model_id text NOT NULL, dim integer NOT NULL, vec bytea NOT NULL, created_at double precision NOT NULL,
  PRIMARY KEY(tenant, content_hash, space));
CREATE TABLE IF NOT EXISTS spaces(
  space text PRIMARY KEY, model_id text NOT NULL, dim integer NOT NULL, created_at double precision NOT NULL);
CREATE TABLE IF NOT EXISTS promotions(
  tenant text NOT NULL, collection text NOT NULL, promoted_at double precision NOT NULL,
  PRIMARY KEY(tenant, collection));
CREATE TABLE IF NOT EXISTS changes(
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, collection text NOT NULL,
  doc_id text NOT NULL, op text NOT NULL, space text);
CREATE TABLE IF NOT EXISTS follower_positions(name text PRIMARY KEY, seq bigint NOT NULL);
"""

# Append a step here, and the same version to sqlite.py (schema/__init__.py says how).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the schema as the code before versions made it; idempotent, so it adopts such a store",
              TABLES_V1 + baseline.SHARED),
    Migration(2, "provider_calls: the provider-call ledger, one row per call per document", """
CREATE TABLE IF NOT EXISTS provider_calls(
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, call_id text NOT NULL, tenant text NOT NULL,
  collection text NOT NULL, doc_id text, fields json, space text NOT NULL, provider text NOT NULL,
  model text NOT NULL, tokens bigint NOT NULL, purpose text NOT NULL, at double precision NOT NULL,
  day text NOT NULL, outcome text NOT NULL);
""" + ledger.INDEXES),
    Migration(3, "explain_records: explain records shared by every replica until they expire", """
CREATE TABLE IF NOT EXISTS explain_records(
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT NULL UNIQUE, tenant text NOT NULL,
  caller text NOT NULL, collection text NOT NULL, doc_id text NOT NULL, expires_at double precision NOT NULL,
  body text NOT NULL);
""" + explain.INDEXES),
    Migration(4, "collection_settings.rerank: a collection's reads rerank unless they say otherwise",
              "ALTER TABLE collection_settings ADD COLUMN rerank INTEGER;"),
    Migration(5, "graph edges: the edge documents found by either end (shared/adapters/edges_sql.py)", """
CREATE INDEX IF NOT EXISTS docs_edges_from ON docs(tenant, (fields->>'from'))
  WHERE collection='semantic.edges';
CREATE INDEX IF NOT EXISTS docs_edges_to ON docs(tenant, (fields->>'to'))
  WHERE collection='semantic.edges';
"""),
    Migration(6, "indexes of the admin reports: vectors by space, ready rows by hash, skipped and cold rows",
              audit.INDEXES),
)
LATEST = latest(MIGRATIONS)


class PostgresDialect:
    placeholder = "%s"

    def __init__(self, conn: Connection[Any]):
        self._conn = conn

    def version(self, conn: Any) -> int:
        # to_regclass follows the search_path, as the unqualified CREATE TABLE does
        if not scalar(conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()):
            return 0
        return int(scalar(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()))

    def locked(self) -> AbstractContextManager[Connection[Any]]:
        return self._locked()

    @contextmanager
    def _locked(self) -> Iterator[Connection[Any]]:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            yield self._conn

    def script(self, conn: Any, sql: str) -> None:
        conn.execute(sql)  # several statements in one execute: psycopg sends them as one query


def migrate(conn: Connection[Any], migrations: Sequence[Migration] = MIGRATIONS) -> Migrated:
    """Bring the database on `conn` (autocommit) to the latest version."""
    return run(PostgresDialect(conn), conn, migrations)


def current_version(conn: Connection[Any]) -> int:
    """The version of the database on `conn`, without migrating: 0 for one from before versions."""
    return PostgresDialect(conn).version(conn)
