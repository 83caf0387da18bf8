"""What the lifecycle keeps in the store of record, one narrow port per concern (its scheduler's
runs, promotion, backfill tasks, eviction, sweeps, reports, dead letters; usage and spaces in
their own modules), and `LifecycleStore`, their union, which both stores implement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from shared.model import BackfillTask, CollectionMode, DocKey, SemanticStatus, SidecarEntry
from shared.ports.documents import CodeCursor, ColdRow, GonePage, RowCursor
from shared.ports.spaces import SpaceStore
from shared.ports.usage import ProviderUsage, UsageStore


@runtime_checkable
class SchedulerRuns(Protocol):
    """The scheduler's own state: its ticks, its sweeps' cursors and its leader lease."""

    def record_tick(self, at: float, changes: Mapping[str, Mapping[str, object]], failed: Sequence[str] = ()) -> None:
        """A scheduler tick at `at`, what it changed per tenant (JSON-able) and the stages of it
        that failed."""

    def last_ticks(self, tenant: str) -> tuple[float | None, tuple[float, dict[str, Any]] | None]:
        """When the scheduler last ticked, and when and what it last changed for `tenant`."""

    def last_tick_failures(self) -> list[str]:
        """The stages that failed in the last recorded tick (none: [])."""
        ...

    def sweep_cursor(self, name: str) -> tuple[str, ...] | None:
        """Where the scheduler's sweep `name` stopped (`set_sweep_cursor`); None: from the start."""
        ...

    def set_sweep_cursor(self, name: str, cursor: Sequence[str] | None) -> None:
        """Record where the sweep `name` goes on at its next tick, whichever process takes it
        (None: from the start)."""

    def lease(self, name: str) -> AbstractContextManager[bool]: ...


@runtime_checkable
class PromotionStore(Protocol):
    """Collection modes: which collections embed on write, and who decided."""

    def collection_modes(self, tenant: str | None = None) -> list[CollectionMode]: ...

    def set_collection_mode(self, mode: CollectionMode, only_if_not_manual: bool = False) -> bool:
        """Record a decision; False when it changes nothing (or a manual decision stands)."""


@runtime_checkable
class BackfillStore(Protocol):
    """Backfill tasks and the document walk they page through."""

    def create_task(self, task: BackfillTask) -> None: ...

    def tasks(self, tenant: str | None = None, running_only: bool = False) -> list[BackfillTask]: ...

    def update_task(self, task_id: str, cursor: str, examined: int, queued: int, state: str, now: float) -> None: ...

    def keys_after(self, tenant: str, collection: str | None, cursor: str, limit: int) -> list[DocKey]:
        """Document keys in (collection, doc_id) order after `cursor` (collection + SEP + id)."""

    def count_docs(self, tenant: str, collection: str | None) -> int: ...

    def oldest_doc_at(self, tenant: str) -> float | None:
        """When the tenant's oldest document as it stands now was written (None: it has none),
        by an index, whatever the tenant's size: since when its first space has served at least."""


@runtime_checkable
class EvictionStore(Protocol):
    """Eviction of idle vectors to the cold store, and the cold entries' bookkeeping."""

    def eviction_candidates(
        self, space: str, idle_before: float, now: float, limit: int,
        tenant: str | None = None, collection: str | None = None,
    ) -> list[SidecarEntry]:
        """`ready` rows of lazy collections, not pinned, unused (last use or embedding) before
        `idle_before`."""

    def eviction_page(self, spaces: Sequence[str], idle_before: float, now: float, after: RowCursor | None,
                      limit: int) -> tuple[list[SidecarEntry], RowCursor | None]:
        """Of the next `limit` sidecar rows in key order after `after` (None: from the first),
        those of `spaces` that `eviction_candidates` would give; and the last row examined (None
        once the end is reached)."""

    def evict(self, entries: Sequence[tuple[SidecarEntry, str, int]], codec: str, now: float) -> list[DocKey]:
        """(entry, cold ref, bytes): `ready` rows still holding that content move to `none` with
        the cold reference; their vectors go unless another ready row uses them; the change log
        tells the vector indexes to drop them. Returns the keys that moved."""

    def evict_retired(self, tenant: str, space: str, entries: Sequence[tuple[SidecarEntry, str, int]], codec: str,
                      now: float) -> list[DocKey] | None:
        """`evict` for the background move of a retired space, in one transaction with a check
        (under the space row's lock) that the space is still `retired`; None when it is not."""

    def cold_entry(self, tenant: str, content_hash: str, space: str) -> str | None:
        """The cold reference of an evicted vector, None if there is none."""

    def cold_referenced(self, tenant: str, space: str, hashes: Sequence[str]) -> set[str]:
        """Those of `hashes` with a cold entry in the tenant's space (`cold_entry`, many at once)."""

    def cold_hashes(self, tenant: str, space: str, limit: int) -> list[str]:
        """Content hashes with a cold entry in the tenant's space."""

    def forget_cold(self, tenant: str, space: str, hashes: Sequence[str]) -> int:
        """Remove those cold entries (their files are deleted already) and the rows' references."""


@runtime_checkable
class SweepStore(Protocol):
    """The scheduler's and reconciler's clean-ups, each by pages from a cursor."""

    def known_spaces(self) -> list[tuple[str, str]]:
        """Every (tenant, space) with a sidecar row, a cold entry or a space record, in order:
        where the cold store's orphan sweep looks (which reads them by `known_spaces_page`)."""

    def known_spaces_page(self, start: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """The first `limit` pairs of `known_spaces` from `start` on (`start` included when it is
        one; None: from the first), at a cost that follows `limit`, not the number of tenants."""

    def prune_orphan_vectors(self, after: CodeCursor | None, limit: int) -> tuple[int, CodeCursor | None]:
        """Of the next `limit` stored vectors in key order after `after` (None: from the first),
        delete those whose content no document of the tenant has any more; returns (vectors
        removed, where the next page starts: None once the end is reached)."""

    def prune_orphan_cold(self, after: CodeCursor | None, limit: int) -> tuple[list[ColdRow], CodeCursor | None]:
        """`prune_orphan_vectors` for the cold entries: returns those removed and where the next
        page starts."""

    def prune_cold_copies(self, after: CodeCursor | None, limit: int) -> tuple[list[ColdRow], CodeCursor | None]:
        """Of the next `limit` cold entries in key order after `after`, delete those whose vector
        is in the store again (rehydrated or re-embedded, or still used by another document of
        that content); returns those removed and where the next page starts (None: the end). An
        eviction writes the cold copy again, so keeping it only stores the vector twice."""

    def compact_changes(self, after: int | None, limit: int) -> tuple[dict[str, int], int | None]:
        """Of the next `limit` change-log entries after seq `after` (None: from the first),
        delete those a later entry of the same key, op and space supersedes: a follower applies
        a key's current state, so only the latest entry of each can change what it does.
        Returns the entries removed per tenant and the last seq examined (None once the end is
        reached). The log's head is never removed (nothing supersedes it)."""

    def ensure_sidecars(self, entries: Sequence[SidecarEntry]) -> int:
        """Insert sidecar rows that do not exist yet (a new space), only for documents that
        still exist when the row is written; existing rows stay."""

    def requeue_budget_deferred(self, before: float) -> int:
        """Rows refused for `budget` before `before` (a past day) go back to `none`."""

    def repair_queued(self, space: str, keys: Sequence[DocKey], stuck_before: float,
                      now: float) -> dict[str, list[DocKey]]:
        """`queued` rows of `space`, unchanged since before `stuck_before`, that no job can
        finish (the reconciler's): a row of a document that is gone is deleted; a row of content
        its document no longer has takes the document's hash and goes `stale`. Returns the keys
        repaired by reason (`document_gone`, `content_changed`)."""

    def prune_gone_rows(self, after: RowCursor | None, limit: int) -> GonePage:
        """Of the next `limit` sidecar rows in key order after `after` (None: from the first),
        delete those whose document is gone, in any status, as its delete would have: in one
        transaction, each re-checked there so a document written meanwhile keeps its row, and a
        `ready` one's point logged out of the vector index. Returns the (key, space) rows
        deleted and the last row examined (None once the end is reached)."""


@runtime_checkable
class StorageReports(Protocol):
    """Counts the admin views and metrics read."""

    def storage_report(self, tenant: str | None = None) -> dict[str, int]:
        """Vectors and cold entries with their bytes (all tenants when None: metrics)."""

    def coverage_all(self, space: str) -> dict[str, int]:
        """Sidecar rows per visible state over every tenant (metrics only, no tenant labels)."""

    def count_in_status(self, tenant: str, space: str, status: SemanticStatus) -> int: ...

    def cold_by_space(self, tenant: str) -> dict[str, tuple[int, int]]:
        """(cold entries, bytes) per space of the tenant."""


@runtime_checkable
class DeadLetters(Protocol):
    """Changes an index follower could not apply (quarantined)."""

    def record_dead_letter(self, follower: str, seq: int, key: DocKey, op: str, error: str, at: float) -> None: ...

    def dead_letters(self, tenant: str, limit: int = 200) -> list[dict[str, object]]: ...


@runtime_checkable
class LifecycleStore(UsageStore, ProviderUsage, SchedulerRuns, PromotionStore, BackfillStore, EvictionStore,
                     SweepStore, StorageReports, SpaceStore, DeadLetters, Protocol):
    """What the lifecycle keeps in the store of record, so that every API
    replica, worker and scheduler sees one truth: usage statistics, collection modes, pinned
    documents, evictions, provider usage, backfill tasks and per-tenant spaces. Both stores
    implement it with the same SQL (shared/adapters/lifecycle_sql/)."""
