"""Citation registry in SQLite (SurfSense-compatible citation numbers): per (owner, conversation) find-or-create by a
stable source key, monotonic numbering from 1. It lives in the data dir so numbers survive a
restart; several processes may open it (WAL). A Redis registry for the distributed profile
is citations_redis.py.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from shared.adapters.sqlite_wal import open_wal
from shared.agent_ports import CitationEntry

SCHEMA = """
CREATE TABLE IF NOT EXISTS citation_counters(
  owner TEXT NOT NULL, conversation TEXT NOT NULL, next_n INTEGER NOT NULL,
  PRIMARY KEY(owner, conversation)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS citations(
  owner TEXT NOT NULL, conversation TEXT NOT NULL, n INTEGER NOT NULL, source_key TEXT NOT NULL,
  source_type TEXT NOT NULL, locator TEXT NOT NULL, display TEXT NOT NULL,
  PRIMARY KEY(owner, conversation, n), UNIQUE(owner, conversation, source_key)) WITHOUT ROWID;
"""


def source_key(source_type: str, locator: dict[str, Any]) -> str:
    """Stable across calls and processes: sorted-key JSON of the locator."""
    return source_type + ":" + json.dumps(locator, sort_keys=True, separators=(",", ":"))


class SqliteCitationRegistry:
    def __init__(self, path: Path):
        self._db = open_wal(path, SCHEMA)
        self._lock = threading.Lock()

    def register(self, owner: str, conversation: str, source_type: str, locator: dict[str, Any],
                 display: dict[str, Any]) -> int:
        key = source_key(source_type, locator)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # find-or-create is one critical section across processes
            try:
                n = self._find(owner, conversation, key)
                if n is None:
                    n = self._create(owner, conversation, key, source_type, locator, display)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return n

    def _find(self, owner: str, conversation: str, key: str) -> int | None:
        row = self._db.execute("SELECT n FROM citations WHERE owner=? AND conversation=? AND source_key=?",
                               (owner, conversation, key)).fetchone()
        return None if row is None else int(row[0])

    def _create(self, owner: str, conversation: str, key: str, source_type: str, locator: dict[str, Any],
                display: dict[str, Any]) -> int:
        row = self._db.execute("SELECT next_n FROM citation_counters WHERE owner=? AND conversation=?",
                               (owner, conversation)).fetchone()
        n = 1 if row is None else int(row[0])
        self._db.execute("INSERT OR REPLACE INTO citation_counters VALUES (?,?,?)", (owner, conversation, n + 1))
        self._db.execute("INSERT INTO citations VALUES (?,?,?,?,?,?,?)",
                         (owner, conversation, n, key, source_type, json.dumps(locator), json.dumps(display)))
        return n

    def resolve(self, owner: str, conversation: str, n: int) -> CitationEntry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT n, source_type, locator, display FROM citations WHERE owner=? AND conversation=? AND n=?",
                (owner, conversation, n)).fetchone()
        if row is None:
            return None
        return CitationEntry(int(row[0]), str(row[1]), json.loads(row[2]), json.loads(row[3]))

    def close(self) -> None:
        with self._lock:
            self._db.close()
