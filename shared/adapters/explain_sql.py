"""Explain records (shared/explain_record.py) in both stores of record, with one SQL text (`?`
placeholders, turned into `%s` for psycopg by the store's `_sql`). Like the ledger it borrows
the store's transactions and reads and opens no connection of its own; its table is made by
migration 3.

A ranking's records are one `executemany` in one transaction. A tenant's cap is enforced on
write, but only every `CAP_EVERY` rows a process writes for that tenant: finding the cap's
boundary walks `per_tenant` index entries, too dear for every read's write, and a tenant can
overshoot by at most that many rows per process before its oldest go."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.keys_sql import SqlHooks
from shared.explain_record import ExplainRecord

CAP_EVERY = 512
ROWS_PER_STATEMENT = 200  # 1,400 parameters: far below either store's bound

_COLS = "id, tenant, caller, collection, doc_id, expires_at, body"


def _record(r: Mapping[str, Any]) -> ExplainRecord:
    return ExplainRecord(str(r["id"]), str(r["tenant"]), str(r["caller"]), str(r["collection"]), str(r["doc_id"]),
                         float(r["expires_at"]), str(r["body"]))


class SqlExplainStore:
    def __init__(self, store: SqlHooks, cap_every: int = CAP_EVERY):
        self._s = store
        self._cap_every = cap_every
        self._since_cap: dict[str, int] = {}  # rows written per tenant since its cap was last enforced
        self._lock = threading.Lock()
        self._postgres = store._sql("?") == "%s"  # the store's dialect, as its placeholder shows it

    def _rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._s._lc_rows(self._s._sql(sql), params)

    def put_explains(self, records: Sequence[ExplainRecord], per_tenant: int) -> None:
        if not records:
            return
        due = self._cap_due(records)
        with self._s._lc_tx() as conn:
            if self._postgres:
                # An explain record is a convenience: a database crash may lose the last moments'
                # records (their ids then answer 404), never the documents. Not waiting for the WAL
                # flush takes the commit off the read's path (~1 ms a ranking on a local server).
                conn.execute("SET LOCAL synchronous_commit TO OFF")
            # one multi-row INSERT per ROWS_PER_STATEMENT: psycopg's executemany is a round trip
            # per row (20 rows: ~1 ms on a local PostgreSQL, where one statement is a fraction)
            for i in range(0, len(records), ROWS_PER_STATEMENT):
                chunk = records[i:i + ROWS_PER_STATEMENT]
                values = ",".join(["(?,?,?,?,?,?,?)"] * len(chunk))
                conn.execute(self._s._sql(f"INSERT INTO explain_records ({_COLS}) VALUES {values}"),  # noqa: S608
                             [v for r in chunk for v in (r.id, r.tenant, r.caller, r.collection, r.doc_id,
                                                         r.expires_at, r.body)])
            for tenant in due:
                self._cap(conn, tenant, per_tenant)

    def _cap_due(self, records: Sequence[ExplainRecord]) -> list[str]:
        """The tenants of `records` whose cap is enforced with this write (the first write of a
        tenant in this process is one, so a small cap holds from the start)."""
        due = []
        with self._lock:
            for tenant in {r.tenant for r in records}:
                n = self._since_cap.get(tenant)
                added = sum(1 for r in records if r.tenant == tenant)
                if n is None or n + added >= self._cap_every:
                    self._since_cap[tenant] = 0
                    due.append(tenant)
                else:
                    self._since_cap[tenant] = n + added
            if len(self._since_cap) > 100_000:  # a bound on the bookkeeping itself
                self._since_cap.clear()
        return due

    def _cap(self, conn: Any, tenant: str, per_tenant: int) -> None:
        edge = conn.execute(self._s._sql(
            "SELECT seq FROM explain_records WHERE tenant = ? ORDER BY seq DESC LIMIT 1 OFFSET ?"),
            (tenant, per_tenant)).fetchone()
        if edge is not None:
            conn.execute(self._s._sql("DELETE FROM explain_records WHERE tenant = ? AND seq <= ?"),
                         (tenant, edge["seq"]))

    def get_explain(self, explain_id: str, now: float) -> ExplainRecord | None:
        rows = self._rows(f"SELECT {_COLS} FROM explain_records WHERE id = ? AND expires_at > ?", (explain_id, now))
        return _record(rows[0]) if rows else None

    def prune_explains(self, now: float, limit: int) -> int:
        # by the oldest rows' keys, so one sweep step holds the write lock for a bounded batch
        with self._s._lc_tx() as conn:
            cur = conn.execute(self._s._sql(
                "DELETE FROM explain_records WHERE seq IN "
                "(SELECT seq FROM explain_records WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)"), (now, limit))
            return int(cur.rowcount or 0)

    def count_explains(self) -> int:
        rows = self._rows("SELECT COUNT(*) AS n FROM explain_records")
        return int(rows[0]["n"]) if rows else 0
