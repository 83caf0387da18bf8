"""Ports: the Protocols the core is written against. One adapter per engine
implements each; the contract suite in tests/contract/ runs against every adapter."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from shared.collection_settings import CollectionSettings
from shared.conditions import FieldCondition
from shared.explain_record import ExplainRecord
from shared.follow_up import FollowUpFlush, FollowUpRow, SwitchState
from shared.ledger import LedgerRow, UsageDelta
from shared.model import (
    BackfillTask,
    CollectionMode,
    CollectionUsage,
    DocKey,
    DocVectors,
    EmbedJob,
    Hit,
    SemanticStatus,
    SidecarEntry,
    SpaceInfo,
    StoredDoc,
    UsageBatch,
)


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


@dataclass(frozen=True)
class SearchFilter:
    """Tenant + collections + ACL (+ metadata conditions and an id allow-list), applied inside
    every engine query, before scoring: never as a post-filter on a top-k."""

    tenant: str
    collections: tuple[str, ...] | None  # None = every collection of the tenant
    acl: tuple[str, ...]  # the caller's readable ACL tokens
    where: tuple[FieldCondition, ...] = ()  # all must hold
    ids: tuple[DocKey, ...] | None = None  # None = any document; () = none
    # Certificates the caller holds. A document passes only if it requires none outside these
    # (doc certs ⊆ caller certs); the default, none held, admits only documents requiring none.
    certs: frozenset[str] = frozenset()

    def admits_certs(self, certs: Sequence[str]) -> bool:
        """The certificate part of the filter for one document (re-checks beside a query)."""
        return all(c in self.certs for c in certs)


@runtime_checkable
class DocumentStore(Protocol):
    """Durable, transactional store: documents, sidecar state and vectors by content hash."""

    clock: Callable[[], float]
    """Stamps what the store times itself (status changes, embeddings without a caller's `now`,
    space bindings). `time.time` unless injected: the lifecycle replays on simulated time."""

    def put_docs(self, docs: Sequence[StoredDoc], sidecar: Sequence[SidecarEntry]) -> None:
        """Write documents and their sidecar rows in one transaction (all or nothing)."""

    def get_doc(self, key: DocKey) -> StoredDoc | None: ...

    def get_docs(self, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]: ...

    def delete_doc(self, key: DocKey) -> bool: ...

    def sidecar(self, key: DocKey, space: str) -> SidecarEntry | None: ...

    def sidecars(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, SidecarEntry]: ...

    def ready_among(self, keys: Sequence[DocKey], space: str) -> set[DocKey]:
        """Those of `keys` whose sidecar in `space` is ready (their vector is searchable): what
        fusion asks of its ~200 lexical candidates on every ranking, without reading a row for
        the others."""

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

    def vector_for_hash(self, tenant: str, content_hash: str, space: str) -> DocVectors | None:
        """Vectors are kept per tenant even for equal content: sharing them would let one
        tenant learn, from timing, what another tenant stores."""

    def vectors_for(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, DocVectors]: ...

    def changes_since(self, seq: int, limit: int = 1000, tenant: str | None = None) -> list[Change]:
        """The log after `seq`, in order; with `tenant`, only that tenant's changes."""
        ...

    def change_log_head(self, tenant: str | None = None) -> int:
        """The seq of the newest committed change (0: none): what a writer waits for a shared
        follower to reach before its write is visible everywhere. With `tenant`, the newest of
        that tenant's changes: a follower already past it has nothing that tenant's read needs."""
        ...

    def keys_in_status(
        self, space: str, statuses: Sequence[SemanticStatus], limit: int = 10_000, tenant: str | None = None
    ) -> list[SidecarEntry]:
        """Rows in these states, oldest first; with `tenant`, only that tenant's (admin views
        never read another tenant's rows)."""

    def collection_keys(self, tenant: str, collection: str | None) -> Iterable[DocKey]: ...

    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]: ...

    def bind_space(self, space: str, model_id: str, dim: int) -> tuple[str, int]: ...

    def promoted(self) -> set[tuple[str, str]]:
        """Collections that embed on write (LifecycleStore.collection_modes, mode `eager`)."""

    def queued_count(self, space: str, tenant: str) -> int: ...

    def oldest_queued(self, space: str, tenant: str) -> float | None: ...

    def vector_count(self, tenant: str, space: str) -> int: ...

    # Positions of the followers of SHARED indexes (OpenSearch, Qdrant server), which every API
    # replica writes to: one position per index instance, kept here so that all replicas see it.

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

    def close(self) -> None: ...


class Candidates(Protocol):
    """A lexical search's hits, best first, whose documents are looked up as they are asked
    for: a first page needs the keys of its own hits only, while its scores (and so the
    statistics fusion standardises with) are every hit's."""

    @property
    def scores(self) -> Sequence[float]:
        """Every hit's score, best first (what `search` would return, without the keys)."""

    def keys(self, n: int) -> list[DocKey]:
        """The first `n` hits' keys (all of them when `n` is larger); looked up once each."""


class ResolvedCandidates:
    """Candidates whose keys came with the hits (an engine that returns ids with scores)."""

    def __init__(self, hits: Sequence[Hit]):
        self._hits = hits
        self.scores = [h.score for h in hits]

    def keys(self, n: int) -> list[DocKey]:
        return [h.key for h in self._hits[:n]]


@runtime_checkable
class LexicalIndex(Protocol):
    """BM25 with tenant and ACL filters inside the engine query; statistics per tenant."""

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        """Index documents and remove deleted ones; visible to searches when it returns."""

    def search(self, flt: SearchFilter, text: str, limit: int) -> list[Hit]: ...

    def candidates(self, flt: SearchFilter, text: str, limit: int) -> Candidates:
        """`search`'s hits with their keys looked up on demand, from the same snapshot of the
        index however much later they are asked for (same filter, same order, same scores)."""

    def highlights(self, flt: SearchFilter, text: str, docs: Sequence[StoredDoc]) -> dict[DocKey, list[str]]: ...

    def close(self) -> None: ...


@runtime_checkable
class Rebuildable(Protocol):
    """An index whose layout (fields, payload, analysis) carries a schema version. When the
    stored index was written by another version, its follower resets it and replays the change
    log from the store of record (shared/indexing.py `IndexFollower.ensure_schema`)."""

    def schema_outdated(self) -> bool:
        """True when documents exist in a layout other than this code's."""

    def reset_schema(self) -> None:
        """Drop every document and mark the index as the current version (then: replay)."""


@runtime_checkable
class VectorIndex(Protocol):
    """ANN with payload filters (tenant, collection, ACL) inside the query."""

    def upsert(self, space: str, items: Sequence[tuple[StoredDoc, Sequence[float] | DocVectors]]) -> None:
        """A point per document holding its passage vectors (or its one vector); a search scores
        a document by its best passage."""

    def delete(self, space: str, keys: Sequence[DocKey]) -> None: ...

    def search(
        self,
        space: str,
        flt: SearchFilter,
        vector: list[float],
        limit: int,
        only: Sequence[DocKey] | None = None,
    ) -> list[Hit]: ...

    def close(self) -> None: ...


@runtime_checkable
class Embedder(Protocol):
    """Text → vectors. Chosen at start-up; never swapped at call time."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in one batch; raises EmbedderError on provider failure."""

    def embed_query(self, text: str) -> list[float]: ...


class EmbedderError(Exception):
    """The provider failed. `retry_after` is set when the provider asked us to wait."""

    def __init__(self, message: str, retry_after: float | None = None, transient: bool = True):
        super().__init__(message)
        self.retry_after = retry_after
        self.transient = transient


@runtime_checkable
class JobQueue(Protocol):
    """Where embedding jobs go. `depth()` feeds /semantic/queueDepth and /metrics."""

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        """Enqueue jobs not already pending; returns how many were newly enqueued."""

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        """Jobs by lane; with `tenant`, only that tenant's (admin endpoints never show
        another tenant's activity)."""

    def on_done(self, callback: Callable[[list[DocKey]], None]) -> None:
        """Register a callback run after jobs complete (keys that changed state)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Budget(Protocol):
    """Per-tenant token bucket for embeds triggered by reads."""

    def take(self, tenant: str, wanted: int) -> int:
        """Take up to `wanted` tokens; returns how many were granted."""

    def available(self, tenant: str) -> int: ...

    def reachable(self) -> bool:
        """False while the budget's store cannot be asked (Redis away): a refusal then means
        "unknown", not "spent"."""


@runtime_checkable
class LifecycleStore(Protocol):
    """What the lifecycle keeps in the store of record, so that every API
    replica, worker and scheduler sees one truth: usage statistics, collection modes, pinned
    documents, evictions, provider usage, backfill tasks and per-tenant spaces. Both stores
    implement it with the same SQL (shared/adapters/lifecycle_sql.py)."""

    # usage statistics
    def record_usage(self, batch: UsageBatch, now: float, bucket_seconds: float, half_life: float) -> None: ...

    def collection_usage(self, since: float) -> list[CollectionUsage]:
        """Per collection: queries and hits in buckets newer than `since`, and the last query."""

    def prune_usage(self, before: float) -> int: ...

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

    def hot_docs(self, now: float, touches: float, half_life: float, limit: int,
                 refresh_before: float | None = None) -> list[DocKey]:
        """Documents whose decayed touches or co-occurrence reach `touches` and whose pin ends
        before `refresh_before` (default `now`: not pinned)."""

    def hot_docs_page(self, now: float, touches: float, half_life: float, after: DocKey | None, limit: int,
                      refresh_before: float | None = None) -> tuple[list[DocKey], DocKey | None]:
        """`hot_docs` among the next `limit` usage rows in key order after `after` (None: from
        the first), and the last key examined (None once the end is reached)."""
        ...

    def pin_docs(self, keys: Sequence[DocKey], until: float) -> int: ...

    def doc_usage(self, key: DocKey) -> dict[str, float | None] | None: ...

    def changes_pending(self, seq: int, tenant: str) -> int:
        """The tenant's change-log entries after `seq` (GET /semantic/lag: no other tenant's rows)."""

    def pinned_count(self, tenant: str, now: float) -> int:
        """Documents of the tenant kept embedded by a pin (GET /semantic/promotions)."""

    # collection modes (promotion)
    def collection_modes(self, tenant: str | None = None) -> list[CollectionMode]: ...

    def set_collection_mode(self, mode: CollectionMode, only_if_not_manual: bool = False) -> bool:
        """Record a decision; False when it changes nothing (or a manual decision stands)."""

    # eviction and pruning
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

    def storage_report(self, tenant: str | None = None) -> dict[str, int]:
        """Vectors and cold entries with their bytes (all tenants when None: metrics)."""

    def coverage_all(self, space: str) -> dict[str, int]:
        """Sidecar rows per visible state over every tenant (metrics only, no tenant labels)."""

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

    # provider usage and caps
    def charge_tokens(
        self, tenant: str, day: str, by_collection: dict[str, tuple[int, int]], calls: int, cap: int
    ) -> bool:
        """Add (documents, tokens) per collection for the day unless that would pass `cap`
        (0 = no cap); all or nothing. Returns whether it was charged."""

    def tokens_used(self, tenant: str, day: str) -> int: ...

    def usage_by_day(self, tenant: str, collection: str | None, days: int) -> list[dict[str, object]]: ...

    # backfill tasks
    def create_task(self, task: BackfillTask) -> None: ...

    def tasks(self, tenant: str | None = None, running_only: bool = False) -> list[BackfillTask]: ...

    def update_task(self, task_id: str, cursor: str, examined: int, queued: int, state: str, now: float) -> None: ...

    def keys_after(self, tenant: str, collection: str | None, cursor: str, limit: int) -> list[DocKey]:
        """Document keys in (collection, doc_id) order after `cursor` (collection + SEP + id)."""

    def count_docs(self, tenant: str, collection: str | None) -> int: ...

    def oldest_doc_at(self, tenant: str) -> float | None:
        """When the tenant's oldest document as it stands now was written (None: it has none),
        by an index, whatever the tenant's size: since when its first space has served at least."""

    # spaces per tenant
    def tenant_spaces(self, tenant: str | None = None) -> list[SpaceInfo]: ...

    def put_tenant_space(self, info: SpaceInfo) -> None: ...

    def space_binding(self, space: str) -> tuple[str, int] | None:
        """The (model id, dimension) a space was first bound to (DocumentStore.bind_space)."""

    def tenant_space_binding(self, tenant: str, space: str) -> tuple[str, int] | None:
        """The (model id, dimension) of the tenant's own space of that name (space names are
        per tenant; `space_binding` is the operator's configured spaces')."""

    def release_space_binding(self, space: str, model_id: str, dim: int) -> bool:
        """Forget the binding of `space` to (model id, dim) when only tenants' spaces of that name
        account for it (a binding written while space names were global); False otherwise."""

    def drop_space_vectors(self, tenant: str, space: str) -> int:
        """A space's vectors, sidecar rows and cold entries go (the change log drops their
        points); the caller deletes the cold files first (`cold_hashes`)."""

    def forget_tenant_space(self, tenant: str, space: str) -> None:
        """The tenant's space is gone (a retired space past its retention)."""

    def realign_space(self, tenant: str, space: str, now: float) -> int:
        """A retired space made current again: rows of content edited since lose their cold
        reference and go `stale`/`none` with the document's hash, `queued` rows go `none`,
        documents written since get a `none` row, `ready` rows are logged for the vector index
        again (current ACL). Returns the rows changed or added."""

    def migration_backlog(self, tenant: str, space: str, source: str, scope: str,
                          eager: Sequence[str] = ()) -> dict[str, int]:
        """What a migration into `space` still has to embed, by state there (`none`, `queued`,
        `stale`; a document without a row counts as `none`, an evicted one not at all): every document of the tenant for
        scope `all`, for `ready` those `ready`/`queued` in `source` or in an `eager` collection."""
        ...

    def switch_space(self, to: SpaceInfo, expect: str, retire: SpaceInfo | None, now: float,
                     fill_rows: bool = False, filled_since: float | None = None,
                     realigned_since: float | None = None) -> int | None:
        """A cut-over in one transaction: `to` is written if its row is in state `expect`,
        `retire` is written (retired), a space coming back from `retired` is realigned (with
        `realigned_since`, only as to documents written since then: `realign_space_rows` did
        the rest before), and with `fill_rows` a space made active gets a `none` row for every
        document that has none there (with `filled_since`, only among documents written since
        then: `fill_space_rows` did the rest before). Returns the rows realigned, None when `to`
        was not in state `expect`."""

    def fill_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                        now: float) -> tuple[int, tuple[str, str] | None]:
        """A `none` row in `space` for each of the next `limit` documents of the tenant after the
        key (collection, doc_id) `after` (None: from the first) that has none there, in a short
        transaction of its own; returns (rows written, the batch's last key, None when the end
        was reached)."""

    def realign_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                           now: float) -> tuple[int, tuple[str, str] | None]:
        """`realign_space` for the next `limit` documents of the tenant after the key `after`
        (and the rows between them), in a short transaction of its own; returns (rows changed or
        added, the batch's last key, None when the end was reached)."""

    def claim_expiry(self, tenant: str, space: str, retired_before: float) -> bool:
        """Mark a space retired before `retired_before` `expiring` (re-checked under its row
        lock); True when it is (or already was) claimed for removal."""

    def count_in_status(self, tenant: str, space: str, status: SemanticStatus) -> int: ...

    def cold_by_space(self, tenant: str) -> dict[str, tuple[int, int]]:
        """(cold entries, bytes) per space of the tenant."""

    def cold_hashes(self, tenant: str, space: str, limit: int) -> list[str]:
        """Content hashes with a cold entry in the tenant's space."""

    def forget_cold(self, tenant: str, space: str, hashes: Sequence[str]) -> int:
        """Remove those cold entries (their files are deleted already) and the rows' references."""

    # changes an index follower could not apply (quarantined)
    def record_dead_letter(self, follower: str, seq: int, key: DocKey, op: str, error: str, at: float) -> None: ...

    def dead_letters(self, tenant: str, limit: int = 200) -> list[dict[str, object]]: ...

    # generic cross-process lease (the scheduler's leader election)
    def lease(self, name: str) -> AbstractContextManager[bool]: ...


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


@runtime_checkable
class FollowUpStore(Protocol):
    """The touch policy's "auto" follow-up switch, durable and shared (services/planner/touch.py
    `FollowUpSwitch` keeps its hot state in memory and merges into these rows): per (tenant,
    collection) the streamed first reads observed and their running disagreement. Both stores
    implement it with the same SQL (shared/adapters/touch_switch_sql.py)."""

    def follow_up_row(self, tenant: str, collection: str) -> FollowUpRow | None: ...

    def merge_follow_up(self, tenant: str, collection: str, flush: FollowUpFlush,
                        window: int) -> tuple[FollowUpRow | None, FollowUpRow]:
        """Merge one process's observations into the row in one transaction
        (shared.follow_up.merged): the row before (None: there was none) and after."""

    def follow_up_rows(self, tenant: str, after: str = "", limit: int = 100) -> list[FollowUpRow]:
        """The tenant's rows in collection-name order, those after `after`, at most `limit`."""

    def follow_up_counts(self, after: int, below: float) -> dict[SwitchState, int]:
        """Rows per switch state, every tenant together (the metric has no tenant labels)."""


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


@runtime_checkable
class ProviderLedger(Protocol):
    """The provider-call ledger (shared/ledger.py): rows per call, read back by tenant only."""

    def record(self, rows: Sequence[LedgerRow], usage: Sequence[UsageDelta]) -> None:
        """A call's rows and the usage totals they settle, in one transaction."""

    def ledger_page(self, tenant: str, collection: str | None, doc_id: str | None, since: float | None,
                    after: int, limit: int) -> list[LedgerRow]:
        """The tenant's rows with `seq` > `after` (and `at` >= `since`), oldest first."""

    def oldest_ledger_at(self, tenant: str) -> float | None: ...

    def prune_ledger(self, before: float, limit: int) -> int:
        """Up to `limit` rows older than `before` go (any tenant); returns how many."""


@runtime_checkable
class ExplainStore(Protocol):
    """Explain records (shared/explain_record.py), shared by every replica until they expire."""

    def put_explains(self, records: Sequence[ExplainRecord], per_tenant: int) -> None:
        """One ranking's records in one write; a tenant past `per_tenant` rows loses its oldest."""

    def get_explain(self, explain_id: str, now: float) -> ExplainRecord | None:
        """The record, unless unknown or expired at `now` (callers check tenant and caller)."""

    def prune_explains(self, now: float, limit: int) -> int:
        """Up to `limit` records expired at `now` go (any tenant); returns how many."""

    def count_explains(self) -> int: ...


@runtime_checkable
class StoreOfRecord(DocumentStore, LifecycleStore, FollowUpStore, CollectionStore, Protocol):
    """Every part, as every store adapter implements them."""
