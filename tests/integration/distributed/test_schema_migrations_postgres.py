"""Schema versions of the distributed store (shared/adapters/schema/postgres.py) on a private
PostgreSQL: a new database and a database of the code before versions both end at the latest
version, replicas starting together apply each step once (the advisory lock), a failed step
leaves nothing behind, and a database a newer build migrated is refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from shared.adapters.keys_sql import SqlKeyStore
from shared.adapters.postgres_store import PostgresStore
from shared.adapters.schema import postgres as pg_schema
from shared.adapters.schema.runner import Migration, SchemaTooNew, latest
from shared.adapters.schema.status import postgres_status
from shared.model import doc_key
from tests.support.together import at_once

UNVERSIONED = Path(__file__).parents[2] / "support" / "schema_unversioned" / "postgres.sql"

# The tables and indexes of the public schema, to compare an upgraded database with a new one.
_OBJECTS = ("SELECT c.relkind::text AS kind, c.relname AS name FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')")


def _connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def _objects(url: str) -> set[tuple[str, str]]:
    with _connect(url) as conn:
        return {(r["kind"], r["name"]) for r in conn.execute(_OBJECTS)}


def test_a_new_database_ends_at_the_latest_version(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=3)
    assert store.migrated.applied == tuple(range(1, pg_schema.LATEST + 1))
    assert store.schema_version() == pg_schema.LATEST
    store.close()
    again = PostgresStore(postgres_url, pool_size=3)
    assert again.migrated.applied == ()
    again.close()
    assert postgres_status(postgres_url).line() == f"store schema version {pg_schema.LATEST} (current)"


def test_a_database_of_the_code_before_versions_is_upgraded_in_place(postgres: Any, postgres_url: str) -> None:
    with _connect(postgres_url) as conn:
        conn.execute(UNVERSIONED.read_text())
        conn.execute("INSERT INTO docs VALUES ('t1', 'c', 'd1', '{\"title\": \"kept\"}', '[]', NULL, '{}', 'h1', 1.0)")
        conn.execute("INSERT INTO api_keys VALUES ('k1', 't1', 'ops', '[]', '[]', '[\"read\"]', 'sh1', 2.0)")
        conn.execute("INSERT INTO promotions VALUES ('t1', 'c', 3.0)")
        conn.execute("CREATE INDEX cold_by_hash ON cold_vectors(tenant, content_hash)")
    assert postgres_status(postgres_url).version == 0

    store = PostgresStore(postgres_url, pool_size=3)
    assert store.schema_version() == pg_schema.LATEST
    doc = store.get_doc(doc_key("t1", "c", "d1"))
    assert doc is not None and doc.fields == {"title": "kept"}
    key = SqlKeyStore(store).key_by_id("k1")
    assert key is not None and key.scopes == ("read",)
    assert [(m.collection, m.mode) for m in store.collection_modes("t1")] == [("c", "eager")]
    store.close()

    fresh = postgres.create_database("schema_fresh_for_compare")
    PostgresStore(fresh, pool_size=3).close()
    assert _objects(postgres_url) == _objects(fresh)


def test_a_database_a_newer_build_migrated_is_refused_in_one_line(postgres_url: str) -> None:
    PostgresStore(postgres_url, pool_size=3).close()
    newer = pg_schema.LATEST + 1
    with _connect(postgres_url) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (%s, 'from the future', 0)", (newer,))
    with pytest.raises(SchemaTooNew) as refused:
        PostgresStore(postgres_url, pool_size=3)
    assert str(refused.value) == (f"store schema version {newer} is newer than this build ({pg_schema.LATEST}); "
                                  "upgrade vibe-semantic")


def test_a_failed_step_leaves_nothing_of_itself(postgres_url: str) -> None:
    with _connect(postgres_url) as conn:
        n = pg_schema.migrate(conn).version
        broken = (*pg_schema.MIGRATIONS,
                  Migration(n + 1, "half done", "CREATE TABLE half(v int); INSERT INTO nowhere VALUES (1);"))
        with pytest.raises(psycopg.errors.UndefinedTable):
            pg_schema.migrate(conn, migrations=broken)
        assert pg_schema.current_version(conn) == n
        assert conn.execute("SELECT to_regclass('half') IS NULL AS gone").fetchone() == {"gone": True}


def _slow_create(conn: Any) -> None:
    time.sleep(0.3)  # every replica reads the version before any commits: they race for this step
    conn.execute("CREATE TABLE once_only(v int)")  # not IF NOT EXISTS: a second run fails


RACE = (*pg_schema.MIGRATIONS,
        Migration(pg_schema.LATEST + 1, "slow", _slow_create),
        Migration(pg_schema.LATEST + 2, "count", "INSERT INTO once_only VALUES (1);"))


def _migrate_in_process(url: str, start: Any, out: Any) -> None:
    with _connect(url) as conn:
        start.wait()
        out.put(pg_schema.migrate(conn, migrations=RACE).applied)


def test_replicas_starting_together_apply_each_step_once(postgres_url: str) -> None:
    applied = sorted(v for steps in at_once(_migrate_in_process, (postgres_url,)) for v in steps)
    assert applied == list(range(1, latest(RACE) + 1))
    with _connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) AS n FROM once_only").fetchone() == {"n": 1}
