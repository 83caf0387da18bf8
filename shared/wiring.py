"""The one wiring module: reads `Settings`, builds every adapter and the core services.

Adapters are imported here and nowhere in the core. Distributed adapters (Celery, OpenSearch,
Qdrant server) are not built yet; choosing them fails at start-up with a clear message
rather than silently running something else.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from services.api.writes import DocumentService
from services.planner.explain import ExplainCache
from services.planner.planner import Planner, PlannerConfig
from services.worker.handlers import BatchOutcome, EmbedHandler
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.memory_budget import MemoryBudget
from shared.adapters.memory_queue import InProcessQueue
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.config import Settings
from shared.indexing import IndexFollower
from shared.model import DocKey, EmbedJob, SemanticStatus
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import Embedder

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


@dataclass
class Container:
    settings: Settings
    store: SqliteStore
    lexical: TantivyLexicalIndex
    vectors: EdgeVectorIndex
    embedder: Embedder
    follower: IndexFollower
    queue: InProcessQueue
    planner: Planner
    docs: DocumentService
    handler: EmbedHandler
    signal: Signal = field(default_factory=Signal)

    def start(self) -> None:
        self.follower.sync()
        self.queue.start()
        requeued = self.requeue_pending()
        log.info("started", extra={"requeued": requeued})

    def requeue_pending(self) -> int:
        """Sidecar rows left `queued` by a previous run are jobs nobody holds any more."""
        space = self.settings.space
        rows = self.store.keys_in_status(space, [SemanticStatus.QUEUED], limit=1_000_000)
        return self.queue.enqueue([EmbedJob(r.key, space, r.content_hash, priority="bulk") for r in rows])

    def stop(self) -> None:
        self.queue.stop()
        self.follower.sync()
        self.vectors.close()
        self.lexical.close()
        self.store.close()


def _check_supported(s: Settings) -> None:
    unsupported = [
        (name, value) for name, value in (("VIBE_QUEUE", s.queue), ("VIBE_LEXICAL", s.lexical),
                                          ("VIBE_VECTORS", s.vectors)) if value != "embedded"
    ]
    if unsupported:
        names = ", ".join(f"{n}={v}" for n, v in unsupported)
        raise RuntimeError(f"{names}: the distributed adapters are not built yet (issue #3)")


def _check_space(store: SqliteStore, space: str, emb: Embedder) -> None:
    """Dim safety (seed 000) across restarts: a space's vectors are only ever compared with
    vectors of the same model and dimension."""
    model_id, dim = store.bind_space(space, emb.model_id, emb.dim)
    if (model_id, dim) != (emb.model_id, emb.dim):
        raise RuntimeError(
            f"space {space!r} holds vectors of {model_id} ({dim} dims) but the configured embedder is "
            f"{emb.model_id} ({emb.dim} dims); choose another VIBE_SPACE for the new model or use the old one")


def build(settings: Settings, embedder: Embedder | None = None) -> Container:
    from shared.adapters.embedders import build_embedder

    _check_supported(settings)
    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(data / "vibe.sqlite3")
    lexical = TantivyLexicalIndex(data / "lexical")
    vectors = EdgeVectorIndex(data / "vectors")
    emb = embedder or build_embedder(settings)
    _check_space(store, settings.space, emb)
    follower = IndexFollower(store, lexical, vectors, data / "index.seq", settings.space)
    policy = EligibilityPolicy(settings.index_policy)
    handler = EmbedHandler(store, emb, policy, settings.embed_fields, settings.job_max_attempts)
    signal = Signal()

    def run_batch(jobs: list[EmbedJob]) -> BatchOutcome:
        out = handler.run(jobs)
        if out.changed:
            follower.sync()
        return out

    queue = InProcessQueue(run_batch, settings.workers, settings.embed_batch_size, settings.job_backoff_seconds,
                           settings.job_max_attempts)
    queue.on_done(signal.fire)
    cfg = PlannerConfig(settings.space, settings.lexical_candidates, settings.per_query_max_embeds,
                        settings.rrf_k)
    planner = Planner(cfg, store, lexical, vectors, emb, queue, MemoryBudget(settings.per_tenant_per_min),
                      follower, ExplainCache())
    docs = DocumentService(store, follower, queue, policy, settings.embed_fields, settings.space,
                           settings.max_doc_bytes, store.promoted())
    return Container(settings, store, lexical, vectors, emb, follower, queue, planner, docs, handler, signal)
