"""State the store no longer produces, for tests of what repairs it."""

from __future__ import annotations

from typing import Any

from shared.model import SidecarEntry


def leave_row_of_gone_document(store: Any, s: SidecarEntry) -> None:
    """A sidecar row whose document is gone, as a backfill racing a delete could leave one
    before `ensure_sidecars` read the document under a lock: written with the store's own
    statement helpers (SQLite or PostgreSQL), since no port method writes such a row any more."""
    with store._lc_tx() as conn:
        store._x(conn, "INSERT INTO sidecar (tenant, collection, doc_id, space, status, content_hash, reason, "
                       "attempts, updated_at, cold_ref) VALUES (?,?,?,?,?,?,?,0,?,?)",
                 (*s.key, s.space, s.status.value, s.content_hash, s.reason, s.updated_at, s.cold_ref))


def bind_space_globally(store: Any, info: Any) -> None:
    """A tenant's space as a migration recorded it while space names were global: its row, and
    its name bound to its model in `spaces` for every tenant and the operator alike."""
    store.bind_space(info.space, info.model_id, info.dim)
    store.put_tenant_space(info)
