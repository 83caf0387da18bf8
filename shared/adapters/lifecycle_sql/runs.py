"""What the scheduler and the index followers record about themselves: the last tick and
its per-tenant changes, the sweeps' cursors, and the changes a follower could not apply."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.model import DocKey


class RunsSql(SqlBase):
    """Scheduler ticks, sweep cursors and follower dead letters."""

    def record_tick(self, at: float, changes: Mapping[str, Mapping[str, object]], failed: Sequence[str] = ()) -> None:
        """The last tick (any process's, scope `tick`, with the stages that failed) and, per tenant
        it changed something for, that tick's changes (scope `tenant:<name>`): GET /semantic/scheduler."""
        rows = [("tick", at, json.dumps({"failed": list(failed)} if failed else {})),
                *((f"tenant:{t}", at, json.dumps(c, sort_keys=True)) for t, c in sorted(changes.items()))]
        with self._lc_tx() as conn:
            for row in rows:
                self._x(conn, "INSERT INTO scheduler_runs VALUES (?,?,?) ON CONFLICT (scope) "
                              "DO UPDATE SET at=excluded.at, report=excluded.report", row)

    def last_ticks(self, tenant: str) -> tuple[float | None, tuple[float, dict[str, Any]] | None]:
        """(when the scheduler last ticked, (when and what it last changed for `tenant`) or None)."""
        rows = {r["scope"]: r for r in self._read("SELECT * FROM scheduler_runs WHERE scope IN (?, ?)",
                                                  ("tick", f"tenant:{tenant}"))}
        tick, mine = rows.get("tick"), rows.get(f"tenant:{tenant}")
        return (float(tick["at"]) if tick else None,
                (float(mine["at"]), json.loads(mine["report"])) if mine else None)

    def sweep_cursor(self, name: str) -> tuple[str, ...] | None:
        rows = self._read("SELECT cursor FROM sweep_cursors WHERE name=?", (name,))
        cursor = json.loads(rows[0]["cursor"]) if rows else None
        return None if cursor is None else tuple(str(x) for x in cursor)

    def set_sweep_cursor(self, name: str, cursor: Sequence[str] | None) -> None:
        stored = json.dumps(None if cursor is None else list(cursor))
        with self._lc_tx() as conn:
            self._x(conn, "INSERT INTO sweep_cursors VALUES (?,?) ON CONFLICT (name) "
                          "DO UPDATE SET cursor=excluded.cursor", (name, stored))

    def last_tick_failures(self) -> list[str]:
        rows = self._read("SELECT report FROM scheduler_runs WHERE scope=?", ("tick",))
        return [str(x) for x in json.loads(rows[0]["report"]).get("failed", [])] if rows else []

    def record_dead_letter(self, follower: str, seq: int, key: DocKey, op: str, error: str, at: float) -> None:
        with self._lc_tx() as conn:
            self._x(conn, "INSERT INTO dead_letters VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (follower, seq) DO UPDATE "
                          "SET error=excluded.error, at=excluded.at",
                    (follower, seq, key.tenant, key.collection, key.doc_id, op, error[:500], at))

    def dead_letters(self, tenant: str, limit: int = 200) -> list[dict[str, object]]:
        rows = self._read("SELECT follower, seq, collection, doc_id, op, error, at FROM dead_letters WHERE tenant=? "
                          "ORDER BY at DESC LIMIT ?", (tenant, limit))
        return [dict(r) for r in rows]
