"""One way to open a side database (citations, audit log, cold store) in the data dir."""

from __future__ import annotations

import sqlite3
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
