"""Audit log of agent tool calls in SQLite (seed 004 "Audit Call"): who, which tool, the
parameters (sizes, ids and hashes, never material text), timing and outcome."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from shared.adapters.sqlite_wal import open_wal
from shared.agent_ports import AuditRecord

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
