"""Per-collection settings, the tenant's collection list and a collection's removal."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from shared.collection_settings import CollectionSettings
from shared.ports.documents import ColdRow


@runtime_checkable
class CollectionStore(Protocol):
    """Per-collection settings, the tenant's collection list and a collection's removal by pages
    (shared/collection_settings.py). Both stores implement it with the same SQL
    (shared/adapters/collection_settings_sql.py)."""

    def collection_settings(self, tenant: str) -> dict[str, CollectionSettings]:
        """Every settings row of the tenant, by collection."""

    def put_collection_settings(self, row: CollectionSettings) -> None: ...

    def collection_names(self, tenant: str, after: str, limit: int) -> list[str]:
        """Collection names of the tenant after `after`, at most `limit`: those with documents,
        settings or a promotion state."""

    def collection_doc_count(self, tenant: str, collection: str) -> int: ...

    def delete_collection_page(self, tenant: str, collection: str, limit: int) -> tuple[int, list[ColdRow]]:
        """Up to `limit` documents of the collection and everything kept for them (sidecar,
        usage, vectors and cold entries no other document uses) go in one transaction, each
        logged as a `delete`; returns (keys removed, cold entries removed); 0 at the end."""

    def forget_collection(self, tenant: str, collection: str) -> None:
        """The per-collection rows (usage, promotion state, follow-up switch, settings) go."""
