"""Schema versions of the embedded store (shared/adapters/schema/): a new file and a file of the
code before versions both end at the latest version, later steps run once each however many
processes start together, a failed step leaves nothing behind, and a file a newer build
migrated is refused."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.keys_sql import SqlKeyStore
from shared.adapters.schema import postgres as pg_schema
from shared.adapters.schema import sqlite as sqlite_schema
from shared.adapters.schema.runner import Migration, SchemaTooNew, latest
from shared.adapters.schema.status import sqlite_status
from shared.adapters.sqlite_store import SqliteStore
from shared.model import doc_key
from tests.support.together import at_once

UNVERSIONED = Path(__file__).parents[1] / "support" / "schema_unversioned" / "sqlite.sql"


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, timeout=30)


def _objects(path: Path) -> set[tuple[str, str]]:
    """The tables and indexes of a file (SQLite's own, such as sqlite_sequence, aside)."""
    conn = _connect(path)
    try:
        rows = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    finally:
        conn.close()
    return {(str(t), str(n)) for t, n in rows}


def _history(path: Path) -> list[tuple[int, str]]:
    conn = _connect(path)
    try:
        rows = conn.execute("SELECT version, why FROM schema_migrations ORDER BY version").fetchall()
        return [(int(v), str(w)) for v, w in rows]
    finally:
        conn.close()


def test_a_new_file_ends_at_the_latest_version_and_a_second_start_applies_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "vibe.sqlite3")
    assert store.migrated.applied == tuple(range(1, sqlite_schema.LATEST + 1))
    assert store.schema_version() == store.migrated.version == sqlite_schema.LATEST
    store.close()
    assert _history(tmp_path / "vibe.sqlite3") == [(m.version, m.why) for m in sqlite_schema.MIGRATIONS]

    again = SqliteStore(tmp_path / "vibe.sqlite3")
    assert again.migrated.applied == () and again.schema_version() == sqlite_schema.LATEST
    again.close()


def _legacy_rows(path: Path) -> None:
    """Rows as the code before versions wrote them, and two leftovers of still older code that
    its start converted: a promoted collection, and an index since replaced."""
    conn = _connect(path)
    conn.executescript(UNVERSIONED.read_text())
    conn.execute("INSERT INTO docs VALUES ('t1', 'c', 'd1', ?, '[]', NULL, '{}', 'h1', 1.0)",
                 (json.dumps({"title": "kept"}),))
    conn.execute("INSERT INTO api_keys VALUES ('k1', 't1', 'ops', '[]', '[]', '[\"read\"]', 'sh1', 2.0)")
    conn.execute("INSERT INTO promotions VALUES ('t1', 'c', 3.0)")
    conn.execute("CREATE INDEX cold_by_hash ON cold_vectors(tenant, content_hash)")
    conn.close()


def test_a_file_of_the_code_before_versions_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    old, new = tmp_path / "old.sqlite3", tmp_path / "new.sqlite3"
    _legacy_rows(old)
    assert sqlite_status(old).version == 0

    store = SqliteStore(old)
    assert store.schema_version() == sqlite_schema.LATEST
    doc = store.get_doc(doc_key("t1", "c", "d1"))
    assert doc is not None and doc.fields == {"title": "kept"}
    key = SqlKeyStore(store).key_by_id("k1")
    assert key is not None and key.scopes == ("read",)
    assert [(m.collection, m.mode) for m in store.collection_modes("t1")] == [("c", "eager")]  # converted
    store.close()

    SqliteStore(new).close()
    assert _objects(old) == _objects(new)  # the same tables and indexes as a new file, cold_by_hash gone
    assert _history(old) == _history(new)


def test_a_file_a_newer_build_migrated_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "vibe.sqlite3"
    SqliteStore(path).close()
    newer = sqlite_schema.LATEST + 1
    conn = _connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)", (newer,))
    conn.close()

    with pytest.raises(SchemaTooNew) as refused:
        SqliteStore(path)
    expected = f"store schema version {newer} is newer than this build ({sqlite_schema.LATEST}); upgrade vibe-semantic"
    assert str(refused.value) == expected
    assert sqlite_status(path).line() == expected


def _steps(*more: Migration) -> tuple[Migration, ...]:
    return (*sqlite_schema.MIGRATIONS, *more)


def test_a_later_step_runs_once_and_the_start_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conn = _connect(tmp_path / "db")
    sqlite_schema.migrate(conn)
    n = sqlite_schema.LATEST
    later = _steps(Migration(n + 1, "a table", "CREATE TABLE extra(v INTEGER);"),
                   Migration(n + 2, "a row", "INSERT INTO extra VALUES (7);"))
    with caplog.at_level(logging.INFO, logger="vibe.store"):
        done = sqlite_schema.migrate(conn, migrations=later)
        again = sqlite_schema.migrate(conn, migrations=later)
    assert (done.version, done.applied, again.applied) == (n + 2, (n + 1, n + 2), ())
    assert f"store schema at version {n + 2} (applied migrations {n + 1}..{n + 2})" in caplog.messages
    assert f"store schema at version {n + 2} (no migration applied)" in caplog.messages
    assert conn.execute("SELECT v FROM extra").fetchall() == [(7,)]


def test_a_failed_step_leaves_nothing_of_itself(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db")
    n = sqlite_schema.migrate(conn).version
    broken = _steps(Migration(n + 1, "half done", "CREATE TABLE half(v INTEGER); INSERT INTO nowhere VALUES (1);"))
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        sqlite_schema.migrate(conn, migrations=broken)
    assert sqlite_schema.current_version(conn) == n
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name='half'").fetchone() == (0,)


def _slow_create(conn: Any) -> None:
    time.sleep(0.3)  # every process reads the version before any commits: they race for this step
    conn.execute("CREATE TABLE once_only(v INTEGER)")  # not IF NOT EXISTS: a second run fails


RACE = _steps(Migration(sqlite_schema.LATEST + 1, "slow", _slow_create),
              Migration(sqlite_schema.LATEST + 2, "count", "INSERT INTO once_only VALUES (1);"))


def _migrate_in_process(path: str, start: Any, out: Any) -> None:
    conn = _connect(Path(path))
    start.wait()
    out.put(sqlite_schema.migrate(conn, migrations=RACE).applied)


def test_processes_starting_together_apply_each_step_once(tmp_path: Path) -> None:
    path = tmp_path / "db"
    applied = sorted(v for steps in at_once(_migrate_in_process, (str(path),)) for v in steps)
    assert applied == list(range(1, latest(RACE) + 1))
    conn = _connect(path)
    assert conn.execute("SELECT COUNT(*) FROM once_only").fetchone() == (1,)


def test_both_stores_number_their_steps_alike() -> None:
    """A change of the schema is a change in both stores: one version means one schema."""
    assert [m.version for m in sqlite_schema.MIGRATIONS] == [m.version for m in pg_schema.MIGRATIONS]
    assert sqlite_schema.LATEST == pg_schema.LATEST == len(sqlite_schema.MIGRATIONS)
    for m in (*sqlite_schema.MIGRATIONS, *pg_schema.MIGRATIONS):
        assert m.why.strip() and "\n" not in m.why
    with pytest.raises(ValueError, match="numbered"):
        latest((Migration(1, "a", ""), Migration(3, "gap", "")))


def test_a_script_splits_where_sqlite_ends_a_statement() -> None:
    script = ("-- a comment; not a statement\nCREATE TABLE a(v TEXT DEFAULT ';');\n"
              "INSERT INTO a VALUES ('x;y'); DROP TABLE a;\n")
    assert [s.strip().splitlines()[-1] for s in sqlite_schema.statements(script)] == [
        "CREATE TABLE a(v TEXT DEFAULT ';');", "INSERT INTO a VALUES ('x;y');", "DROP TABLE a;"]
    with pytest.raises(ValueError, match="unterminated"):
        list(sqlite_schema.statements("CREATE TABLE a(v TEXT); DROP TABLE a"))


def test_status_reads_without_migrating(tmp_path: Path) -> None:
    path = tmp_path / "vibe.sqlite3"
    latest_version = sqlite_schema.LATEST
    assert sqlite_status(path).line() == f"store schema version 0; this build migrates it to {latest_version} at start"
    assert not path.exists()  # reading created nothing
    SqliteStore(path).close()
    assert sqlite_status(path).line() == f"store schema version {sqlite_schema.LATEST} (current)"
