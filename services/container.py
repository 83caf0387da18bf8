"""The `Container`: every port and service of one process, as the front doors (HTTP, MCP, the
workers, the CLI) receive them. It is a typed bag: the composition root (`services.wiring`)
builds its parts and hands it the few things only the root can make later (`RootHooks`), so no
front door needs to import the root. It sits below the front doors and above the planner and
the core services it holds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from services.core.documents import DocumentService
from services.core.handlers import EmbedHandler
from services.core.lifecycle import Lifecycle
from services.core.repair import reconcile_pass
from services.planner.planner import Planner
from shared.agent_ports import AuditLog, CitationRegistry, MaterialBudget, PreCallCheck, Reranker, TaskLedger
from shared.collection_settings import CollectionDirectory
from shared.config import Settings
from shared.follow_up import SWITCH_STATES, SwitchState
from shared.indexing import Followers
from shared.keys import KeyStore
from shared.metrics import METRICS
from shared.model import DocKey
from shared.model_specs import ModelSpec
from shared.ports import Embedder, JobQueue, LexicalIndex, ProviderLedger, StoreOfRecord, VectorIndex
from shared.spaces import SpaceDirectory

log = logging.getLogger("vibe.wiring")


class Signal:
    """Wakes read streams when jobs finish. Listeners are plain callables so the API can
    bridge into its event loop without this module knowing about asyncio."""

    def __init__(self) -> None:
        self._listeners: list[Any] = []

    def subscribe(self, fn: Any) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn: Any) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def fire(self, keys: list[DocKey]) -> None:
        for fn in list(self._listeners):
            fn(keys)


class SpaceModels(Protocol):
    """Each space's embedder, as the front doors ask for it (`wiring.SpaceEmbedders`)."""

    def __call__(self, space: str, tenant: str | None = None) -> Embedder: ...

    def if_ready(self, space: str, tenant: str | None = None) -> Embedder | None: ...

    def spec(self, model: str, dim: int | None = None) -> ModelSpec: ...

    def for_model(self, model: str, dim: int | None = None) -> Embedder: ...

    def prepare(self, model: str, dim: int | None = None) -> Embedder | None: ...


class Scheduler(Protocol):
    """The in-process scheduler thread (`services.worker.scheduler.SchedulerThread`)."""

    def start(self) -> None: ...

    def wake(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class AgentAdapters:
    citations: CitationRegistry
    audit: AuditLog
    budget: MaterialBudget
    tasks: TaskLedger
    precall: PreCallCheck
    reranker: Reranker | None  # None = off (VIBE_RERANK_URL unset)

    def close(self) -> None:
        for part in (self.citations, self.audit, self.budget, self.tasks, self.reranker):
            if part is not None:
                part.close()


@dataclass(frozen=True)
class RootHooks:
    """What the composition root makes on demand or around the process's life, handed to the
    container so its holders never import the root."""

    agent: Callable[[], AgentAdapters]  # the agent tools' adapters, opened on first use
    ledger: Callable[[], ProviderLedger]  # a view of the store, made per use
    collections: Callable[[], CollectionDirectory]
    before_start: Callable[[], object]  # before anything reads the cold store
    release_index_home: Callable[[], None]
    key_store: Callable[[], KeyStore]  # API-made keys, in the store of record


@dataclass
class Container:
    settings: Settings
    store: StoreOfRecord
    lexical: LexicalIndex
    vectors: VectorIndex
    embedder: Embedder
    follower: Followers
    queue: JobQueue
    planner: Planner
    docs: DocumentService
    handler: EmbedHandler
    lifecycle: Lifecycle
    scheduler: Scheduler
    spaces: SpaceDirectory
    embedders: SpaceModels
    index_home: Path
    hooks: RootHooks
    signal: Signal = field(default_factory=Signal)
    # False: `start` runs no scheduler thread at all, not even usage flushes and backfill steps
    # (tests and replays that drive `run_backfills`, `tick` and flushes themselves, on their clock).
    scheduler_thread: bool = True
    _agent: AgentAdapters | None = field(default=None, repr=False)
    _agent_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Per-collection settings (shared/collection_settings.py); made on first use when the root
    # handed none.
    collections: CollectionDirectory | None = field(default=None, repr=False)

    def ledger(self) -> ProviderLedger:
        """The provider-call ledger (GET /semantic/ledger): a view of the store, made per use."""
        return self.hooks.ledger()

    def key_store(self) -> KeyStore:
        return self.hooks.key_store()

    def agent(self) -> AgentAdapters:
        """The agent tools' adapters (MCP over stdio and HTTP), built on first use so the
        processes that serve no tools (workers, CLI commands) never open their stores."""
        with self._agent_lock:
            if self._agent is None:
                self._agent = self.hooks.agent()
            return self._agent

    def active_model(self, tenant: str) -> str:
        """The model id of the tenant's active space: the configured model until a migration
        is activated (what /semantic/usage and the MCP tools report)."""
        row = next((r for r in self.store.tenant_spaces(tenant) if r.state == "active"), None)
        return row.model_id if row is not None else self.embedder.model_id

    def collection_directory(self) -> CollectionDirectory:
        if self.collections is None:
            self.collections = self.hooks.collections()
        return self.collections

    def filterable_fields(self, tenant: str, collection: str) -> frozenset[str] | None:
        """The fields a collection's vector payload indexes may cover (None: not configured)."""
        return self.collection_directory().filterable_fields(tenant, collection)

    def close_agent(self) -> None:
        with self._agent_lock:
            agent, self._agent = self._agent, None
        if agent is not None:
            agent.close()

    def start(self) -> None:
        self.hooks.before_start()
        # catch_up, not sync: an index server that is away at start (or whose schema cannot be
        # checked yet) must not stop the process; the next sync retries and reads re-check pages.
        self.follower.catch_up()
        for f in self.follower.members:  # the serving process reports its indexes' lag
            METRICS.follower_lag.labels(follower=f.label).set_function(f.lag)
        for state in SWITCH_STATES:  # and the store's collections per "auto" follow-up state
            METRICS.follow_up_collections.labels(state=state).set_function(partial(self._follow_ups, state))
        self.queue.start()
        pending = self.requeue_pending()
        if self.scheduler_thread:
            self.scheduler.start()
        log.info("started", extra=pending)

    def _follow_ups(self, state: SwitchState) -> float:
        t = self.planner.cfg.touch
        try:
            return self.planner.follow_ups.counts(t.auto_after, t.auto_below)[state]
        except Exception:  # a store away must not fail the scrape (the other metrics still answer)
            log.warning("follow-up states unavailable", exc_info=True)
            return float("nan")

    def requeue_pending(self) -> dict[str, int]:
        """Sidecar rows left `queued` by a previous run are jobs nobody holds any more. Those no
        job can finish (document gone, content changed, a space the tenant does not read) are
        repaired first, as the reconciler does (services/core/repair.py): the embedded profile
        has no Celery reconciler, so re-enqueued they would stay `queued` across every restart or
        be embedded into a space nobody reads. While the process runs, the scheduler thread does
        the same for rows stuck past `VIBE_RECONCILE_STUCK_SECONDS` (`repair.reconcile_pass`)."""
        out = reconcile_pass(self.store, self.spaces, self.queue, 0.0, 1_000_000)
        return {"requeued": out["requeued"], "repaired": out["repaired"]}

    def stop(self) -> None:
        self.scheduler.stop()
        self.queue.stop()
        try:  # what this process learned of its collections' first reads outlives it
            self.planner.follow_ups.flush()
        except Exception:
            log.warning("follow-up observations not written", exc_info=True)
        self.follower.sync()
        self.vectors.close()
        self.lexical.close()
        if self.handler.cold is not None:
            self.handler.cold.close()
        self.store.close()
        self.hooks.release_index_home()
        self.close_agent()
