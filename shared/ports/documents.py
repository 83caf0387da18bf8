"""The store of record's document side: documents, their sidecar rows and vectors, and the
change log the indexes follow; one narrow port per consumer, and `DocumentStore`, their union,
which every store adapter implements."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from shared.model import DocKey, DocVectors, SemanticStatus, SidecarEntry, StoredDoc


@dataclass(frozen=True)
class Change:
    """One entry of the store's change log, which the indexes follow (the store is the
    system of record; the lexical and vector indexes can be rebuilt from it)."""

    seq: int
    key: DocKey
    op: str  # "doc" (document written), "delete", "vector" (vector ready), "unvector"
    space: str | None = None


RowCursor = tuple[str, str, str, str]  # a sidecar row's key (tenant, collection, doc_id, space)
GonePage = tuple[list[tuple[DocKey, str]], RowCursor | None]  # rows (key, space), and where the next page starts
CodeCursor = tuple[str, str, str]  # a vector's or cold entry's key (tenant, content_hash, space)
ColdRow = tuple[str, str, str, str]  # a cold entry removed: (tenant, content_hash, space, cold ref)


@runtime_checkable
class DocumentReader(Protocol):
    """What a read needs of the store: documents, their sidecar rows in a space and their vectors."""

    def get_doc(self, key: DocKey) -> StoredDoc | None: ...

    def get_docs(self, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]: ...

    def sidecar(self, key: DocKey, space: str) -> SidecarEntry | None: ...

    def sidecars(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, SidecarEntry]: ...

    def ready_among(self, keys: Sequence[DocKey], space: str) -> set[DocKey]:
        """Those of `keys` whose sidecar in `space` is ready (their vector is searchable): what
        fusion asks of its ~200 lexical candidates on every ranking, without reading a row for
        the others."""

    def vector_for_hash(self, tenant: str, content_hash: str, space: str) -> DocVectors | None:
        """Vectors are kept per tenant even for equal content: sharing them would let one
        tenant learn, from timing, what another tenant stores."""

    def vectors_for(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, DocVectors]: ...


@runtime_checkable
class DocumentWriter(Protocol):
    """What writes documents and embedding results: the writer, the embedding handler and the touch."""

    def put_docs(self, docs: Sequence[StoredDoc], sidecar: Sequence[SidecarEntry]) -> None:
        """Write documents and their sidecar rows in one transaction (all or nothing)."""

    def delete_doc(self, key: DocKey) -> bool: ...

    def set_status(
        self,
        keys: Sequence[DocKey],
        space: str,
        status: SemanticStatus,
        reason: str | None = None,
        only_from: Sequence[SemanticStatus] | None = None,
    ) -> list[DocKey]:
        """Move sidecar rows to `status`; with `only_from`, only rows currently in one of
        those states move. Returns the keys that moved."""

    def record_failure(self, key: DocKey, space: str, reason: str, final: bool) -> None: ...

    def commit_vectors(
        self, entries: Sequence[tuple[SidecarEntry, Sequence[float] | DocVectors]], model_id: str,
        now: float | None = None,
    ) -> list[DocKey]:
        """Store vectors (by content hash) and mark the sidecars ready, in one transaction. An
        entry holds the document's passage vectors (`DocVectors`), or one vector for a document
        of one passage.
        Rows whose content hash no longer matches the document are left alone. Returns the
        keys that became ready. `now` stamps `last_embedded_at` (the caller's clock, so the
        lifecycle's idle bounds can be replayed on simulated time)."""

    def bind_space(self, space: str, model_id: str, dim: int) -> tuple[str, int]: ...

    def promoted(self) -> set[tuple[str, str]]:
        """Collections that embed on write (LifecycleStore.collection_modes, mode `eager`)."""


@runtime_checkable
class ChangeLog(Protocol):
    """What the index followers need: the change log, and the positions of the followers of SHARED
    indexes (OpenSearch, Qdrant server), which every API replica writes to: one position per index
    instance, kept in the store so that all replicas see it."""

    def changes_since(self, seq: int, limit: int = 1000, tenant: str | None = None) -> list[Change]:
        """The log after `seq`, in order; with `tenant`, only that tenant's changes."""
        ...

    def change_log_head(self, tenant: str | None = None) -> int:
        """The seq of the newest committed change (0: none): what a writer waits for a shared
        follower to reach before its write is visible everywhere. With `tenant`, the newest of
        that tenant's changes: a follower already past it has nothing that tenant's read needs."""
        ...

    def follower_position(self, name: str) -> int:
        """The change-log seq follower `name` has applied up to (0: nothing yet)."""

    def advance_follower_position(self, name: str, seq: int) -> None:
        """Record `seq` unless a higher one is recorded: a position never moves back."""

    def reset_follower_position(self, name: str) -> None:
        """Back to 0, so the index is rebuilt from the whole log (operators; under the lease)."""

    def follower_lease(self, name: str) -> AbstractContextManager[bool]:
        """Non-blocking cross-process lock for follower `name`: yields True to at most one
        holder at a time (on any store instance of the same database), False at once to the
        others; released when the block ends, also when it raises."""


@dataclass(frozen=True)
class VectorAudit:
    """A tenant's ready sidecar rows of one space held against their vectors of record: those
    with none (`missing`) and those whose vector has another dimension than the space's
    (`wrong_dim`), each with its oldest few keys as examples."""

    ready: int
    missing: int
    missing_examples: list[DocKey]
    wrong_dim: int
    wrong_dim_examples: list[DocKey]


@runtime_checkable
class StatusViews(Protocol):
    """What the admin views and metrics read: rows by status, coverage, queue figures."""

    def keys_in_status(
        self, space: str, statuses: Sequence[SemanticStatus], limit: int = 10_000, tenant: str | None = None
    ) -> list[SidecarEntry]:
        """Rows in these states, oldest first; with `tenant`, only that tenant's (admin views
        never read another tenant's rows)."""

    def collection_keys(self, tenant: str, collection: str | None) -> Iterable[DocKey]: ...

    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]: ...

    def queued_count(self, space: str, tenant: str) -> int: ...

    def oldest_queued(self, space: str, tenant: str) -> float | None: ...

    def vector_count(self, tenant: str, space: str) -> int: ...

    def vector_audit(self, tenant: str, space: str, dim: int | None, examples: int = 20) -> VectorAudit:
        """The audit in a fixed number of statements whatever the tenant's size (`dim` None:
        no dimension check); /semantic/mismatch answers from it."""

    def stuck_count(self, tenant: str, space: str, before: float) -> int:
        """The tenant's `queued` rows of `space` not updated since `before` (one count)."""


@runtime_checkable
class DocumentStore(DocumentReader, DocumentWriter, ChangeLog, StatusViews, Protocol):
    """Durable, transactional store: documents, sidecar state and vectors by content hash."""

    clock: Callable[[], float]
    """Stamps what the store times itself (status changes, embeddings without a caller's `now`,
    space bindings). `time.time` unless injected: the lifecycle replays on simulated time."""

    def close(self) -> None: ...
