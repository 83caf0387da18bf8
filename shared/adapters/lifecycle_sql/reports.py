"""Counts the admin views and metrics read: stored vectors and cold entries, sidecar states."""

from __future__ import annotations

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.model import SemanticStatus


class ReportsSql(SqlBase):
    """Storage and coverage counts."""

    def storage_report(self, tenant: str | None = None) -> dict[str, int]:
        where, args = ("WHERE tenant=?", (tenant,)) if tenant is not None else ("", ())
        v = self._read(f"SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(vec)), 0) AS b FROM vectors {where}", args)[0]
        c = self._read(f"SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM cold_vectors {where}", args)[0]
        return {"vectors": int(v["n"]), "vectorBytes": int(v["b"]), "cold": int(c["n"]), "coldBytes": int(c["b"])}

    def coverage_all(self, space: str) -> dict[str, int]:
        rows = self._read("SELECT status, CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END AS cold, COUNT(*) AS n "
                          "FROM sidecar WHERE space=? GROUP BY status, CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END",
                          (space,))
        out: dict[str, int] = {}
        for r in rows:
            name = "cold" if r["status"] == SemanticStatus.NONE.value and r["cold"] else r["status"]
            out[name] = out.get(name, 0) + int(r["n"])
        return out

    def count_in_status(self, tenant: str, space: str, status: SemanticStatus) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status=? AND tenant=?",
                          (space, status.value, tenant))
        return int(rows[0]["n"])

    def cold_by_space(self, tenant: str) -> dict[str, tuple[int, int]]:
        rows = self._read("SELECT space, COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM cold_vectors "
                          "WHERE tenant=? GROUP BY space", (tenant,))
        return {str(r["space"]): (int(r["n"]), int(r["b"])) for r in rows}
