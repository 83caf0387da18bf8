"""The `FollowUpStore` half of both stores of record (the touch policy's "auto" follow-up switch,
services/planner/touch_switch.py `FollowUpSwitch`), written once, as the lifecycle SQL
(shared/adapters/lifecycle_sql/) is: `?` placeholders (turned into `%s` for psycopg), `INSERT
... ON CONFLICT` and `DOUBLE PRECISION` in both dialects; each store supplies its transactions
and reads through the lifecycle hooks (`SqlBase`: `_lc_tx`, `_lc_rows`). Its own module so the
switch's table and SQL change apart from the lifecycle's.

A merge is one transaction that locks the row (PostgreSQL `FOR UPDATE`; SQLite writers are
serial, BEGIN IMMEDIATE), so replicas flushing at once both count."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.follow_up import SWITCH_STATES, FollowUpFlush, FollowUpRow, SwitchState, merged

_COLS = "tenant, collection, reads, mean, updated_at"


def _row(r: Mapping[str, Any]) -> FollowUpRow:
    return FollowUpRow(r["tenant"], r["collection"], int(r["reads"]), float(r["mean"]), float(r["updated_at"]))


class TouchSwitchSql(SqlBase):
    """Mixin: the store class provides the hooks (`SqlBase`: `_lc_tx`, `_lc_rows`, `_FOR_UPDATE`)."""

    def follow_up_row(self, tenant: str, collection: str) -> FollowUpRow | None:
        rows = self._lc_rows(self._sql(f"SELECT {_COLS} FROM touch_follow_up WHERE tenant=? AND collection=?"),
                             (tenant, collection))
        return _row(rows[0]) if rows else None

    def merge_follow_up(self, tenant: str, collection: str, flush: FollowUpFlush,
                        window: int) -> tuple[FollowUpRow | None, FollowUpRow]:
        now = self.clock()
        with self._lc_tx() as conn:
            # The row exists before it is locked: two first flushes of a collection then queue on
            # the row instead of both inserting.
            conn.execute(self._sql("INSERT INTO touch_follow_up VALUES (?, ?, 0, 0.0, ?) ON CONFLICT DO NOTHING"),
                         (tenant, collection, now))
            r = conn.execute(self._sql(f"SELECT {_COLS} FROM touch_follow_up WHERE tenant=? AND collection=?"
                                          f"{self._FOR_UPDATE}"), (tenant, collection)).fetchone()
            before = _row(r)
            reads, mean = merged((before.reads, before.mean), flush, window)
            conn.execute(self._sql("UPDATE touch_follow_up SET reads=?, mean=?, updated_at=? "
                                      "WHERE tenant=? AND collection=?"), (reads, mean, now, tenant, collection))
        # a row just made by this flush was no row before it
        return (before if before.reads else None), FollowUpRow(tenant, collection, reads, mean, now)

    def follow_up_rows(self, tenant: str, after: str = "", limit: int = 100) -> list[FollowUpRow]:
        """The tenant's rows by collection name, those after `after`, at most `limit`."""
        return [_row(r) for r in self._lc_rows(self._sql(
            f"SELECT {_COLS} FROM touch_follow_up WHERE tenant=? AND collection>? ORDER BY collection LIMIT ?"),
            (tenant, after, limit))]

    def follow_up_counts(self, after: int, below: float) -> dict[SwitchState, int]:
        """Rows per switch state over every tenant (shared.follow_up.switch_state)."""
        rows = self._lc_rows(self._sql(
            "SELECT COALESCE(SUM(CASE WHEN reads < ? THEN 1 ELSE 0 END), 0) AS unknown,"
            " COALESCE(SUM(CASE WHEN reads >= ? AND mean < ? THEN 1 ELSE 0 END), 0) AS agree,"
            " COALESCE(SUM(CASE WHEN reads >= ? AND mean >= ? THEN 1 ELSE 0 END), 0) AS disagree"
            " FROM touch_follow_up"), (after, after, below, after, below))
        return {s: int(rows[0][s]) if rows else 0 for s in SWITCH_STATES}
