"""The provider-call ledger (shared/ledger.py) in both stores of record, with one SQL text: `?`
placeholders (turned into `%s` for psycopg by the store's `_sql`), `ON CONFLICT` in both
dialects. Like the key store it borrows the store's transactions and reads (`_lc_tx`,
`_lc_rows`) and opens no connection of its own; its table is made by migration 2.

`record` writes a call's rows and the usage totals they settle in one transaction, so the daily
cap (which sums `provider_usage`) never counts a token the ledger does not hold, nor the other
way round. A batch of rows is one `executemany`, not one statement per row's transaction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.keys_sql import SqlHooks
from shared.ledger import LedgerRow, UsageDelta
from shared.metrics import METRICS

_COLS = "call_id, tenant, collection, doc_id, fields, space, provider, model, tokens, purpose, at, day, outcome"
_UPSERT = ("INSERT INTO provider_usage (tenant, day, collection, calls, docs, tokens) VALUES (?,?,?,?,?,?) "
           "ON CONFLICT (tenant, day, collection) DO UPDATE SET calls=provider_usage.calls+excluded.calls, "
           "docs=provider_usage.docs+excluded.docs, tokens=provider_usage.tokens+excluded.tokens")


def _fields(raw: Any) -> tuple[str, ...] | None:
    if raw is None:
        return None
    value = json.loads(raw) if isinstance(raw, str) else raw  # psycopg decodes `json` itself
    return tuple(str(f) for f in value)


def _row(r: Mapping[str, Any]) -> LedgerRow:
    return LedgerRow(str(r["call_id"]), str(r["tenant"]), str(r["collection"]),
                     None if r["doc_id"] is None else str(r["doc_id"]), _fields(r["fields"]), str(r["space"]),
                     str(r["provider"]), str(r["model"]), int(r["tokens"]), str(r["purpose"]), float(r["at"]),
                     str(r["day"]), str(r["outcome"]), int(r["seq"]))


class SqlLedger:
    def __init__(self, store: SqlHooks):
        self._s = store

    def _rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._s._lc_rows(self._s._sql(sql), params)

    def record(self, rows: Sequence[LedgerRow], usage: Sequence[UsageDelta]) -> None:
        usage = [u for u in usage if u.calls or u.docs or u.tokens]
        if not rows and not usage:
            return
        with self._s._lc_tx() as conn:
            cur = conn.cursor() if hasattr(conn, "cursor") else conn
            if rows:
                cur.executemany(self._s._sql(f"INSERT INTO provider_calls ({_COLS}) "
                                             "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"),
                                [(r.call_id, r.tenant, r.collection, r.doc_id,
                                  None if r.fields is None else json.dumps(list(r.fields)), r.space, r.provider,
                                  r.model, r.tokens, r.purpose, r.at, r.day, r.outcome) for r in rows])
            if usage:
                cur.executemany(self._s._sql(_UPSERT), [(u.tenant, u.day, u.collection, u.calls, u.docs, u.tokens)
                                                        for u in sorted(usage, key=lambda u: (u.tenant, u.day,
                                                                                              u.collection))])
        METRICS.ledger_rows_written.inc(len(rows))

    def ledger_page(self, tenant: str, collection: str | None, doc_id: str | None, since: float | None,
                    after: int, limit: int) -> list[LedgerRow]:
        sql, args = f"SELECT seq, {_COLS} FROM provider_calls WHERE tenant = ? AND seq > ?", [tenant, after]
        if collection is not None:
            sql, args = sql + " AND collection = ?", [*args, collection]
        if doc_id is not None:
            sql, args = sql + " AND doc_id = ?", [*args, doc_id]
        if since is not None:
            sql, args = sql + " AND at >= ?", [*args, since]
        return [_row(r) for r in self._rows(sql + " ORDER BY seq LIMIT ?", (*args, limit))]

    def oldest_ledger_at(self, tenant: str) -> float | None:
        rows = self._rows("SELECT MIN(at) AS at FROM provider_calls WHERE tenant = ?", (tenant,))
        return None if not rows or rows[0]["at"] is None else float(rows[0]["at"])

    def prune_ledger(self, before: float, limit: int) -> int:
        # by the oldest rows' keys, so one sweep step holds the write lock for a bounded batch
        with self._s._lc_tx() as conn:
            cur = conn.execute(self._s._sql(
                "DELETE FROM provider_calls WHERE seq IN "
                "(SELECT seq FROM provider_calls WHERE at < ? ORDER BY at LIMIT ?)"), (before, limit))
            gone = int(cur.rowcount or 0)
        METRICS.ledger_rows_pruned.inc(gone)
        return gone
