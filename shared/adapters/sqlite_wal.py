"""One way to open a side database (citations, audit log, cold store) in the data dir, and one
way to write in a SQLite transaction that waits for other writers instead of failing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def open_wal(path: Path, schema: str, first: str = "") -> sqlite3.Connection:
    """Autocommit connection in WAL mode, shared across threads (callers hold a lock), with
    a busy timeout so several processes on one data dir wait instead of failing. `first` runs
    before WAL mode is set (pragmas such as auto_vacuum that only a new file takes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    if first:
        db.executescript(first)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema)
    return db


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A transaction on an autocommit connection (isolation_level=None), committed when the block
    ends and rolled back if it raises. IMMEDIATE takes the write lock at BEGIN: a deferred
    transaction that read first could not upgrade to writing once another writer committed
    (SQLITE_BUSY at once, not after the busy timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
