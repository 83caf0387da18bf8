"""The part of `DocumentStore` both stores of record answer with the same SQL: the change log's
reads, the follower positions' read, the status views (coverage, queue figures, vector count)
and a failed embedding's row. Written once, as the lifecycle SQL (shared/adapters/lifecycle_sql/)
is, through the same hooks (`SqlBase`: `_lc_tx`, `_lc_rows`, the `?` placeholders rewritten for
psycopg). What differs between the dialects (batched writes, vectors as BLOB or bytea, the
follower lease) stays in each store."""

from __future__ import annotations

from shared.adapters.audit_sql import AuditSql
from shared.model import DocKey, SemanticStatus
from shared.ports import Change


class DocumentsSql(AuditSql):
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

    def queued_count(self, space: str, tenant: str) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status='queued' AND tenant=?",
                          (space, tenant))
        return int(rows[0]["n"]) if rows else 0

    def oldest_queued(self, space: str, tenant: str) -> float | None:
        rows = self._read("SELECT MIN(updated_at) AS t FROM sidecar WHERE space=? AND status='queued' AND tenant=?",
                          (space, tenant))
        return rows[0]["t"] if rows and rows[0]["t"] is not None else None

    def vector_count(self, tenant: str, space: str) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM vectors WHERE tenant=? AND space=?", (tenant, space))
        return int(rows[0]["n"]) if rows else 0
