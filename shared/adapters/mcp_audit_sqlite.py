"""Audit log of agent tool calls in SQLite (the audit record extract_key_info operators expect): who, which tool, the
parameters (sizes, ids and hashes, never material text), timing and outcome.

Also the `extract_key_info` material budget per API key per UTC day,
in the same file: one check-and-add transaction per charge (BEGIN IMMEDIATE), so concurrent
calls of one key, in threads or in processes sharing the data dir, cannot both pass a limit.
Processes with separate data dirs keep separate budgets."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from shared.adapters.sqlite_wal import open_wal
from shared.agent_ports import AuditRecord, BudgetExceeded

SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_calls(
  id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, tool TEXT NOT NULL, tenant TEXT NOT NULL,
  user TEXT NOT NULL, task TEXT, params TEXT NOT NULL, outcome TEXT NOT NULL, duration_ms REAL NOT NULL,
  result_count INTEGER, extra TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tool_calls_by_tenant ON tool_calls(tenant, id);
"""


class SqliteAuditLog:
    def __init__(self, path: Path):
        self._db = open_wal(path, SCHEMA)
        self._lock = threading.Lock()

    def record(self, rec: AuditRecord) -> None:
        row = (time.time(), rec.tool, rec.tenant, rec.user, rec.task, json.dumps(rec.params, sort_keys=True),
               rec.outcome, round(rec.duration_ms, 3), rec.result_count, json.dumps(rec.extra, sort_keys=True))
        with self._lock:
            self._db.execute("INSERT INTO tool_calls(ts, tool, tenant, user, task, params, outcome, duration_ms, "
                             "result_count, extra) VALUES (?,?,?,?,?,?,?,?,?,?)", row)

    def recent(self, tenant: str, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute("SELECT ts, tool, tenant, user, task, params, outcome, duration_ms, result_count, "
                                   "extra FROM tool_calls WHERE tenant=? ORDER BY id DESC LIMIT ?", (tenant, limit))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        for r in rows:
            r["params"], r["extra"] = json.loads(r["params"]), json.loads(r["extra"])
        return rows

    def close(self) -> None:
        with self._lock:
            self._db.close()


BUDGET_SCHEMA = """
CREATE TABLE IF NOT EXISTS material_usage(
  key TEXT NOT NULL, day TEXT NOT NULL, chars INTEGER NOT NULL, chunks INTEGER NOT NULL,
  PRIMARY KEY(key, day));
"""
KEEP_DAYS = 8


class SqliteMaterialBudget:
    def __init__(self, path: Path):
        self._db = open_wal(path, BUDGET_SCHEMA)
        self._lock = threading.Lock()

    def charge(self, key: str, day: str, chars: int, chunks: int, max_chars: int, max_chunks: int) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT chars, chunks FROM material_usage WHERE key=? AND day=?",
                                       (key, day)).fetchone()
                used_chars, used_chunks = row or (0, 0)
                if used_chars + chars > max_chars:
                    raise BudgetExceeded("materials_chars_per_day", max_chars, used_chars, chars)
                if used_chunks + chunks > max_chunks:
                    raise BudgetExceeded("material_chunks_per_day", max_chunks, used_chunks, chunks)
                self._db.execute("INSERT INTO material_usage(key, day, chars, chunks) VALUES (?,?,?,?) "
                                 "ON CONFLICT(key, day) DO UPDATE SET chars=chars+excluded.chars, "
                                 "chunks=chunks+excluded.chunks", (key, day, chars, chunks))
                if row is None:  # a key's first charge of a day: forget days nobody asks about any more
                    self._db.execute("DELETE FROM material_usage WHERE day < date(?, ?)", (day, f"-{KEEP_DAYS} days"))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def used(self, key: str, day: str) -> tuple[int, int]:
        with self._lock:
            row = self._db.execute("SELECT chars, chunks FROM material_usage WHERE key=? AND day=?",
                                   (key, day)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def close(self) -> None:
        with self._lock:
            self._db.close()


LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS task_use(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, last_used REAL NOT NULL,
  PRIMARY KEY(tenant, collection));
CREATE INDEX IF NOT EXISTS task_use_by_time ON task_use(last_used);
"""


class SqliteTaskLedger:
    """When each extract_key_info task collection was last used, so idle tasks can be purged."""

    def __init__(self, path: Path):
        self._db = open_wal(path, LEDGER_SCHEMA)
        self._lock = threading.Lock()

    def touch(self, tenant: str, collection: str, now: float) -> None:
        with self._lock:
            self._db.execute("INSERT INTO task_use VALUES (?,?,?) ON CONFLICT(tenant, collection) "
                             "DO UPDATE SET last_used=MAX(last_used, excluded.last_used)", (tenant, collection, now))

    def stale(self, before: float, limit: int = 100) -> list[tuple[str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT tenant, collection FROM task_use WHERE last_used < ? "
                                    "ORDER BY last_used LIMIT ?", (before, limit)).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def forget(self, tenant: str, collection: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM task_use WHERE tenant=? AND collection=?", (tenant, collection))

    def close(self) -> None:
        with self._lock:
            self._db.close()
