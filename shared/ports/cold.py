"""The cold store: compressed vectors of evicted documents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class ColdStore(Protocol):
    """Compressed vectors by {tenant, space, content hash} (the cold store, FP16/INT8 to save space):
    packed in a table (SQLite in the cold dir, or PostgreSQL), or one file each. Holds no ACL
    and no text: what may be read is decided by the sidecar and the documents, never by the
    cold store."""

    def put(self, tenant: str, space: str, content_hash: str, vector: Sequence[float]) -> tuple[str, int]:
        """Store (idempotently) and return (reference, bytes written). A document of several
        passages is stored as its passage vectors end to end (`shared.model.flatten`); the
        reader splits them by its model's dimension."""

    def get(self, tenant: str, space: str, content_hash: str) -> list[float] | None:
        """The decoded vector; None when absent or unreadable (the caller then re-embeds)."""

    def delete(self, tenant: str, space: str, content_hash: str) -> None: ...

    def hashes(self, tenant: str, space: str, after: str, limit: int) -> list[str]:
        """A page of the content hashes the tenant's space holds: in ascending order, those after
        `after` ("" from the first), at most `limit`. What the orphan sweep checks against the
        store's cold entries (the store names tenants, the cold store only their digests)."""

    def close(self) -> None: ...
