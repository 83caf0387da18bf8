"""Spaces per tenant: their records (state, model, retirement, migration scope), the
operator's space bindings, retention expiry and a space's removal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.model import DocKey, SpaceInfo


def _space(r: Mapping[str, Any]) -> SpaceInfo:
    # a space retired before retirements were recorded counts from its last activation
    retired = (r["retired_at"] or r["activated_at"] or r["created_at"]) if r["state"] in ("retired", "expiring") \
        else None
    return SpaceInfo(r["tenant"], r["space"], r["model_id"], int(r["dim"]), r["state"], float(r["created_at"]),
                     r["activated_at"], None if retired is None else float(retired), r["scope"] or "all")

_SPACES = ("SELECT s.*, r.retired_at, m.scope FROM tenant_spaces s LEFT JOIN space_retirements r "
           "ON r.tenant=s.tenant AND r.space=s.space LEFT JOIN space_scopes m ON m.tenant=s.tenant AND m.space=s.space")


class SpacesSql(SqlBase):
    """Tenant space records."""

    def tenant_spaces(self, tenant: str | None = None) -> list[SpaceInfo]:
        if tenant is None:
            return [_space(r) for r in self._read(f"{_SPACES} ORDER BY s.tenant, s.created_at")]
        return [_space(r) for r in self._read(f"{_SPACES} WHERE s.tenant=? ORDER BY s.created_at", (tenant,))]

    def space_binding(self, space: str) -> tuple[str, int] | None:
        rows = self._read("SELECT model_id, dim FROM spaces WHERE space=?", (space,))
        return (str(rows[0]["model_id"]), int(rows[0]["dim"])) if rows else None

    def tenant_space_binding(self, tenant: str, space: str) -> tuple[str, int] | None:
        rows = self._read("SELECT model_id, dim FROM tenant_spaces WHERE tenant=? AND space=?", (tenant, space))
        return (str(rows[0]["model_id"]), int(rows[0]["dim"])) if rows else None

    def release_space_binding(self, space: str, model_id: str, dim: int) -> bool:
        """While space names were global, a tenant's migration bound the name in `spaces` too, and
        that row then kept the operator from configuring the name (VIBE_SPACE) with another model.
        Such a row is told from the operator's own by the tenants who use the space without a row
        of their own: only the configured space serves them, so any of their sidecar rows in the
        space means the operator bound it, and it stays. Otherwise, when some tenant's space
        accounts for the binding, it goes (those tenants' spaces keep their model in their rows)."""
        with self._lc_tx() as conn:
            cur = self._x(conn, "DELETE FROM spaces WHERE space=? AND model_id=? AND dim=? AND EXISTS "
                                "(SELECT 1 FROM tenant_spaces t WHERE t.space=? AND t.model_id=? AND t.dim=?) "
                                "AND NOT EXISTS (SELECT 1 FROM sidecar s WHERE s.space=? AND NOT EXISTS "
                                "(SELECT 1 FROM tenant_spaces t WHERE t.tenant=s.tenant AND t.space=s.space))",
                          (space, model_id, dim, space, model_id, dim, space))
            return bool(cur.rowcount)

    def put_tenant_space(self, info: SpaceInfo) -> None:
        with self._lc_tx() as conn:
            self._put_space(conn, info)

    def _put_space(self, conn: Any, info: SpaceInfo) -> None:
        self._x(conn, "INSERT INTO tenant_spaces VALUES (?,?,?,?,?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                      "SET model_id=excluded.model_id, dim=excluded.dim, state=excluded.state, "
                      "activated_at=excluded.activated_at",
                (info.tenant, info.space, info.model_id, info.dim, info.state, info.created_at, info.activated_at))
        if info.state == "retired":
            # a retirement without a time keeps the one recorded (the retention runs from it)
            at = info.retired_at if info.retired_at is not None else self.clock()
            keep = "" if info.retired_at is not None else " WHERE false"
            self._x(conn, "INSERT INTO space_retirements VALUES (?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                          f"SET retired_at=excluded.retired_at{keep}", (info.tenant, info.space, at))
        else:
            self._x(conn, "DELETE FROM space_retirements WHERE tenant=? AND space=?", (info.tenant, info.space))
        # A migration's scope is the building space's alone: any other state forgets it.
        if info.state == "building" and info.scope != "all":
            self._x(conn, "INSERT INTO space_scopes VALUES (?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                          "SET scope=excluded.scope", (info.tenant, info.space, info.scope))
        else:
            self._x(conn, "DELETE FROM space_scopes WHERE tenant=? AND space=?", (info.tenant, info.space))

    def forget_tenant_space(self, tenant: str, space: str) -> None:
        with self._lc_tx() as conn:
            self._x(conn, "DELETE FROM tenant_spaces WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM space_retirements WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM space_scopes WHERE tenant=? AND space=?", (tenant, space))

    def claim_expiry(self, tenant: str, space: str, retired_before: float) -> bool:
        """A retired space whose retirement is older than `retired_before` becomes `expiring`,
        under its row lock and re-checked there: a re-activation committed meanwhile (or a newer
        retirement) wins and nothing is claimed. An `expiring` space is claimed already (an
        expiry interrupted by a crash resumes). Re-activation refuses an `expiring` space."""
        with self._lc_tx() as conn:
            row = self._x(conn, f"SELECT state, activated_at, created_at FROM tenant_spaces WHERE tenant=? AND space=?"
                                f"{self._FOR_UPDATE}", (tenant, space)).fetchone()
            if row is None or row["state"] not in ("retired", "expiring"):
                return False
            if row["state"] == "expiring":
                return True
            at = self._x(conn, "SELECT retired_at FROM space_retirements WHERE tenant=? AND space=?",
                         (tenant, space)).fetchone()
            retired = (at["retired_at"] if at else None) or row["activated_at"] or row["created_at"]
            if float(retired) > retired_before:
                return False
            self._x(conn, "UPDATE tenant_spaces SET state='expiring' WHERE tenant=? AND space=?", (tenant, space))
            return True

    def drop_space_vectors(self, tenant: str, space: str) -> int:
        """Sidecar rows, vectors and cold entries of one tenant's space; the change log drops the
        ready rows' points from the vector index."""
        with self._lc_tx() as conn:
            ready = [DocKey(tenant, r["collection"], r["doc_id"]) for r in self._x(
                conn, "SELECT collection, doc_id FROM sidecar WHERE tenant=? AND space=? AND status='ready' "
                      "ORDER BY collection, doc_id", (tenant, space)).fetchall()]
            n = int(self._x(conn, "DELETE FROM sidecar WHERE tenant=? AND space=?", (tenant, space)).rowcount or 0)
            self._x(conn, "DELETE FROM vectors WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM cold_vectors WHERE tenant=? AND space=?", (tenant, space))
            self._lc_log(conn, [(k, "unvector", space) for k in ready])
        return n
