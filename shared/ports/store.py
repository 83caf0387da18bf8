"""The store of record: every part, as every store adapter implements them."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from shared.ports.collection_store import CollectionStore
from shared.ports.documents import DocumentStore
from shared.ports.edges import EdgeStore
from shared.ports.follow_up import FollowUpStore
from shared.ports.lifecycle import LifecycleStore


@runtime_checkable
class StoreOfRecord(DocumentStore, LifecycleStore, FollowUpStore, CollectionStore, EdgeStore, Protocol):
    """Every part, as every store adapter implements them."""
