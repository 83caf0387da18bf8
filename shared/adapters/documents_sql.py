"""The part of `DocumentStore` both stores of record answer with the same SQL: the change log's
reads, the follower positions' read, the status views (coverage, queue figures, vector count)
and a failed embedding's row. Written once, as the lifecycle SQL (shared/adapters/lifecycle_sql/)
is, through the same hooks (`SqlBase`: `_lc_tx`, `_lc_rows`, the `?` placeholders rewritten for
psycopg). What differs between the dialects (batched writes, vectors as BLOB or bytea, the
follower lease) stays in each store."""

from __future__ import annotations

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.adapters.store_reports import COLD_FLAG, coverage_report
from shared.model import DocKey, SemanticStatus
from shared.ports import Change, VectorAudit

# Each ready sidecar row of a tenant's space beside its vector of record (by content hash), in
# one pass over the rows (a primary-key probe of `vectors` each, inside the database): the
# view used to look up one vector per ready document from Python, 0.8 s at p50 and 9-44 s at
# p99 for ~3,300 documents under load.
_AUDIT_FROM = ("FROM sidecar s LEFT JOIN vectors v ON v.tenant=s.tenant AND v.content_hash=s.content_hash "
               "AND v.space=s.space WHERE s.tenant=? AND s.space=? AND s.status='ready'")


class DocumentsSql(SqlBase):
    """Mixin: the store class provides the hooks (`SqlBase`)."""

    def record_failure(self, key: DocKey, space: str, reason: str, final: bool) -> None:
        status = SemanticStatus.FAILED if final else SemanticStatus.QUEUED
        with self._lc_tx() as conn:
            self._x(conn, "UPDATE sidecar SET status=?, reason=?, attempts=attempts+1, updated_at=? "
                          "WHERE tenant=? AND collection=? AND doc_id=? AND space=?",
                    (status.value, reason, self.clock(), *key, space))

    def changes_since(self, seq: int, limit: int = 1000, tenant: str | None = None) -> list[Change]:
        if tenant is None:
            rows = self._read("SELECT * FROM changes WHERE seq>? ORDER BY seq LIMIT ?", (seq, limit))
        else:
            rows = self._read("SELECT * FROM changes WHERE tenant=? AND seq>? ORDER BY seq LIMIT ?",
                              (tenant, seq, limit))
        return [Change(r["seq"], DocKey(r["tenant"], r["collection"], r["doc_id"]), r["op"], r["space"])
                for r in rows]

    def change_log_head(self, tenant: str | None = None) -> int:
        if tenant is None:
            rows = self._read("SELECT COALESCE(MAX(seq), 0) AS head FROM changes")
        else:
            rows = self._read("SELECT COALESCE(MAX(seq), 0) AS head FROM changes WHERE tenant=?", (tenant,))
        return int(rows[0]["head"]) if rows else 0

    def follower_position(self, name: str) -> int:
        rows = self._read("SELECT seq FROM follower_positions WHERE name=?", (name,))
        return int(rows[0]["seq"]) if rows else 0

    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]:
        sql = f"SELECT status, reason, {COLD_FLAG} AS cold, COUNT(*) AS n FROM sidecar WHERE tenant=? AND space=?"
        args: list[object] = [tenant, space]
        if collection:
            sql, args = sql + " AND collection=?", [*args, collection]
        rows = self._read(sql + f" GROUP BY status, reason, {COLD_FLAG}", args)
        return coverage_report((r["status"], r["reason"], r["n"], bool(r["cold"])) for r in rows)

    def queued_count(self, space: str, tenant: str) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status='queued' AND tenant=?",
                          (space, tenant))
        return int(rows[0]["n"]) if rows else 0

    def oldest_queued(self, space: str, tenant: str) -> float | None:
        rows = self._read("SELECT MIN(updated_at) AS t FROM sidecar WHERE space=? AND status='queued' AND tenant=?",
                          (space, tenant))
        return rows[0]["t"] if rows and rows[0]["t"] is not None else None

    def vector_audit(self, tenant: str, space: str, dim: int | None, examples: int = 20) -> VectorAudit:
        wrong = "v.dim IS NOT NULL AND v.dim<>?" if dim is not None else "1=0"
        args: tuple[object, ...] = (*((dim,) if dim is not None else ()), tenant, space)
        head = self._read("SELECT COUNT(*) AS ready, COALESCE(SUM(CASE WHEN v.dim IS NULL THEN 1 ELSE 0 END), 0) "
                          f"AS missing, COALESCE(SUM(CASE WHEN {wrong} THEN 1 ELSE 0 END), 0) AS wrong "
                          + _AUDIT_FROM, args)[0]
        missing, wrong_n = int(head["missing"]), int(head["wrong"])
        return VectorAudit(int(head["ready"]), missing, self._audit_keys("v.dim IS NULL", (), tenant, space,
                                                                         examples if missing else 0),
                           wrong_n, self._audit_keys(wrong, args[:-2], tenant, space, examples if wrong_n else 0))

    def _audit_keys(self, cond: str, cond_args: tuple[object, ...], tenant: str, space: str,
                    limit: int) -> list[DocKey]:
        """The oldest `limit` rows the condition holds for (the examples an operator looks at)."""
        if limit <= 0:
            return []
        rows = self._read(f"SELECT s.collection, s.doc_id {_AUDIT_FROM} AND {cond} "
                          "ORDER BY s.updated_at, s.collection, s.doc_id LIMIT ?",
                          (tenant, space, *cond_args, limit))
        return [DocKey(tenant, r["collection"], r["doc_id"]) for r in rows]

    def stuck_count(self, tenant: str, space: str, before: float) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status='queued' AND tenant=? "
                          "AND updated_at<?", (space, tenant, before))
        return int(rows[0]["n"]) if rows else 0

    def vector_count(self, tenant: str, space: str) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM vectors WHERE tenant=? AND space=?", (tenant, space))
        return int(rows[0]["n"]) if rows else 0
