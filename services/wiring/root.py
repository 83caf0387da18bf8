"""The composition root: reads `Settings`, builds every adapter and the core services, and
wires every front door (HTTP, MCP, CLI, workers). It lives in `services/` because it imports
the services; `shared/` never imports `services/`.

Adapters are imported here and nowhere in the core. Each port has one `_build_*` function that
picks its adapter from `Settings`; distributed adapters are imported lazily so the embedded
profile never loads their clients.
"""

from __future__ import annotations

import fcntl
import importlib
import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from services.container import AgentAdapters, Container, RootHooks, Signal
from services.core.backfill import BackfillLimits, Backfills
from services.core.documents import DocumentService
from services.core.handlers import BatchOutcome, EmbedHandler
from services.core.keyring import KeyRing
from services.core.lifecycle import Lifecycle, LifecycleConfig
from services.core.promotion import PromotionPolicy
from services.core.repair import reconcile_pass
from services.core.usage import UsageRecorder
from services.planner.explain import Explains
from services.planner.passages import PassageLocator
from services.planner.planner import Planner, PlannerConfig
from services.planner.query_cache import QueryVectorCache
from services.planner.touch_policy import TouchPolicy
from services.planner.touch_switch import FollowUpSwitch
from services.worker.scheduler import SchedulerThread
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.adapters.cold_files import FileColdStore
from shared.adapters.cold_packed import PackedColdStore
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.facets import FilterableFields, fixed_fields
from shared.adapters.mcp_audit_sqlite import SqliteAuditLog, SqliteMaterialBudget, SqliteTaskLedger
from shared.adapters.memory_budget import MemoryBudget
from shared.adapters.memory_queue import InProcessQueue
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.agent_ports import CitationRegistry, PreCallCheck, Reranker
from shared.backpressure import Backpressure, TenantShare
from shared.collection_settings import CollectionDirectory, EmbedFields, embed_fields_of, stored_languages
from shared.config import Settings
from shared.foreground import Foreground
from shared.indexing import FilePosition, Followers, IndexFollower, StorePosition
from shared.keys import KeyStore
from shared.model import EmbedJob
from shared.model_specs import ModelSpec, local_allowlist, parse_model
from shared.policy.eligibility import EligibilityPolicy
from shared.policy.provider_certs import ProviderCerts
from shared.ports import (
    Budget,
    ColdStore,
    Embedder,
    JobQueue,
    LexicalIndex,
    ProviderLedger,
    StoreOfRecord,
    VectorIndex,
)
from shared.spaces import SpaceDirectory, embedding_spaces
from shared.text.passages import PassageConfig

if TYPE_CHECKING:
    from celery import Celery
    from fastapi import FastAPI

    from services.worker.tasks import Runtime

log = logging.getLogger("vibe.wiring")


def _check_space(store: StoreOfRecord, space: str, emb: Embedder) -> None:
    """Dim safety across restarts: a space's vectors are only ever compared with
    vectors of the same model and dimension. Only the operator's own use of the name counts: a
    binding that tenants' spaces of that name wrote while names were global is released
    (`release_space_binding`), so no tenant's row can keep a process from starting."""
    model_id, dim = store.bind_space(space, emb.model_id, emb.dim)
    if (model_id, dim) != (emb.model_id, emb.dim) and store.release_space_binding(space, model_id, dim):
        log.info("space binding of tenants' spaces released", extra={"space": space, "model": model_id})
        model_id, dim = store.bind_space(space, emb.model_id, emb.dim)
    others = [r.tenant for r in store.tenant_spaces() if r.space == space and r.model_id != emb.model_id]
    if others:  # the configured name serves them with the configured model from now on
        log.warning("tenants have a space of the configured name with another model",
                    extra={"space": space, "tenants": len(others)})
    if (model_id, dim) != (emb.model_id, emb.dim):
        raise RuntimeError(
            f"space {space!r} holds vectors of {model_id} ({dim} dims) but the configured embedder is "
            f"{emb.model_id} ({emb.dim} dims); choose another VIBE_SPACE for the new model or use the old one")


MAX_INDEX_SLOTS = 64
_held_slots: list[IO[bytes]] = []


def claim_index_home(data_dir: Path) -> Path:
    """Where this process keeps its EMBEDDED indexes and their change-log position.

    Each process that serves reads (`serve`, `mcp`) on one data dir needs indexes of its own:
    tantivy allows one writer per index, and a position shared by two processes would let one
    skip the changes the other applied (a revoked ACL would stay searchable in the other). A
    process takes the first free slot under an exclusive `flock`, held for its lifetime and
    dropped by the kernel when it dies: slot 0 is the data dir itself (the layout of a single
    process), slot N is `index-slots/N`, reused with its position after a restart."""
    for n in range(MAX_INDEX_SLOTS):
        home = data_dir if n == 0 else data_dir / "index-slots" / str(n)
        home.mkdir(parents=True, exist_ok=True)
        f = open(home / "index.lock", "ab")  # noqa: SIM115 - held open for the process's lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        _held_slots.append(f)
        return home
    raise RuntimeError(f"{MAX_INDEX_SLOTS} processes already hold index slots in {data_dir}")


def release_index_home(home: Path) -> None:
    for f in list(_held_slots):
        if Path(f.name).parent == home:
            _held_slots.remove(f)
            f.close()


def _build_lexical(settings: Settings, home: Path | None = None, store: StoreOfRecord | None = None,
                   collections: CollectionDirectory | None = None) -> LexicalIndex:
    """`store`: each collection's stored language (PUT .../settings) decides where it is indexed."""
    languages = settings.language_map()
    if store is not None:
        languages = stored_languages(languages, collections or build_collections(settings, store))
    if settings.lexical == "opensearch":
        from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex

        return OpenSearchLexicalIndex.from_settings(settings, languages)
    return TantivyLexicalIndex((home or settings.data_dir) / "lexical", languages=languages)


def _build_vectors(settings: Settings, home: Path | None = None,
                   filterable: FilterableFields | None = None) -> VectorIndex:
    """`filterable`: the fields declared filterable per (tenant, collection), which alone get
    payload indexes (default: VIBE_FILTERABLE_FIELDS everywhere)."""
    if settings.vectors == "qdrant":
        from shared.adapters.qdrant_vectors import QdrantVectorIndex

        return QdrantVectorIndex.from_settings(settings, filterable)
    return EdgeVectorIndex((home or settings.data_dir) / "vectors",
                           filterable or fixed_fields(settings.filterable_fields), settings.max_payload_indexes)


def _server(url: str | None) -> str:
    """host:port of a server URL, without the credentials it may carry."""
    return urlsplit(url or "").netloc.rpartition("@")[2]


def follower_name(settings: Settings, index: Literal["lexical", "vectors"]) -> str | None:
    """The store-held position's name for a SHARED index, identifying the index instance (server,
    index or collection prefix, and for vectors the space it holds), so that replicas configured
    alike share one position and a new, empty server starts from 0; None for an embedded index.
    Every replica must spell the server URL the same way."""
    if index == "lexical" and settings.lexical == "opensearch":
        return f"lexical:opensearch:{_server(settings.opensearch_url)}/{settings.opensearch_prefix}"
    if index == "vectors" and settings.vectors == "qdrant":
        from shared.adapters.qdrant_vectors import COLLECTION_PREFIX

        return f"vectors:qdrant:{_server(settings.qdrant_url)}/{COLLECTION_PREFIX}{settings.space}"
    return None


def _build_followers(settings: Settings, store: StoreOfRecord, lexical: LexicalIndex,
                     vectors: VectorIndex, home: Path | None = None) -> Followers:
    """Embedded indexes (a copy per process) share one follower positioned by a file in the data
    dir, as before; each shared index gets its own follower positioned in the store, applied by
    one replica at a time (why: shared/indexing.py)."""
    lex_name, vec_name = follower_name(settings, "lexical"), follower_name(settings, "vectors")
    live = SpaceDirectory(store, settings.space).live_of
    own_lexical, own_vectors = (lexical if lex_name is None else None), (vectors if vec_name is None else None)
    members = []
    if own_lexical is not None or own_vectors is not None:
        position = FilePosition((home or settings.data_dir) / "index.seq")
        members.append(IndexFollower(store, own_lexical, own_vectors, position, settings.space, live))
    if lex_name is not None:
        members.append(IndexFollower(store, lexical, None, StorePosition(store, lex_name), settings.space))
    if vec_name is not None:
        members.append(IndexFollower(store, None, vectors, StorePosition(store, vec_name), settings.space, live))
    return Followers(members)


def build_shared_follower(settings: Settings, index: Literal["lexical", "vectors"]) -> IndexFollower | None:
    """The follower of the configured shared `index` alone, with its own store (operator
    commands); None when that index is embedded. The caller closes `store` and the index."""
    name = follower_name(settings, index)
    if name is None:
        return None
    store = build_store(settings)
    lexical = _build_lexical(settings, store=store) if index == "lexical" else None
    vectors = _build_vectors(settings) if index == "vectors" else None
    return IndexFollower(store, lexical, vectors, StorePosition(store, name), settings.space)


def _build_queue(settings: Settings, run_batch: Callable[[list[EmbedJob]], BatchOutcome]) -> JobQueue:
    if settings.queue == "celery":
        from shared.adapters.celery_queue import CeleryQueue

        return CeleryQueue.from_settings(settings)
    return InProcessQueue(run_batch, settings.workers, settings.embed_batch_size, settings.job_backoff_seconds,
                          settings.job_max_attempts)


def build_budget(settings: Settings) -> Budget:
    if settings.queue == "celery":  # several API processes share one budget
        from shared.adapters.redis_budget import RedisBudget

        return RedisBudget.from_settings(settings)
    return MemoryBudget(settings.per_tenant_per_min)


def build_store(settings: Settings, clock: Callable[[], float] | None = None) -> StoreOfRecord:
    """The system of record: PostgreSQL, shared by API and workers on any host, or SQLite in
    the data dir, which several processes of one host open together (WAL). Its `clock` is the
    process's clock (default the wall clock): the handler, scheduler, backfills and usage
    statistics built on it stamp and decide by the same time (a simulated one in replays)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if settings.store == "postgres":
        from shared.adapters.postgres_store import PostgresStore

        return PostgresStore(settings.postgres_url, settings.postgres_pool_size, clock=clock)
    return SqliteStore(settings.data_dir / "vibe.sqlite3", clock=clock)


def build_key_store(store: StoreOfRecord) -> KeyStore:
    """API-made keys, in a table of the store of record (either store: shared/adapters/keys_sql.py)."""
    from shared.adapters.keys_sql import SqlKeyStore

    return SqlKeyStore(store)  # type: ignore[arg-type]  # both stores offer the lifecycle SQL hooks


def build_ledger(store: StoreOfRecord) -> ProviderLedger:
    """The provider-call ledger, in a table of the store of record (either store:
    shared/adapters/ledger_sql.py), so its rows and the usage totals they settle share a transaction."""
    from shared.adapters.ledger_sql import SqlLedger

    return SqlLedger(store)  # type: ignore[arg-type]  # both stores offer the lifecycle SQL hooks


def build_explains(settings: Settings, store: StoreOfRecord) -> Explains:
    """Explain records in a table of the store of record (either store: shared/adapters/explain_sql.py),
    so every replica answers an explainId until its TTL, on the store's clock."""
    from shared.adapters.explain_sql import SqlExplainStore

    return Explains(SqlExplainStore(store),  # type: ignore[arg-type]  # both stores offer the lifecycle SQL hooks
                    settings.explain_ttl_seconds, settings.explain_max_per_tenant, store.clock)


class SpaceEmbedders:
    """Each space's embedder (a space bundles its model), built on first use from the
    model id the space is bound to in the store, and kept. The configured space uses the
    configured embedder. Only the provider kinds this deployment can reach are built, and only
    models `shared.model_specs` accepts (bounded dimensions, listed local models)."""

    def __init__(self, settings: Settings, store: StoreOfRecord, default: Embedder,
                 wrap: Callable[[Embedder], Embedder] | None = None):
        self.settings = settings
        self.store = store
        self.default = default
        self.wrap = wrap
        self._by_model: dict[ModelSpec, Embedder] = {}
        self._preparing: dict[ModelSpec, Future[Embedder]] = {}
        self._lock = threading.Lock()

    def __call__(self, space: str, tenant: str | None = None) -> Embedder:
        """The embedder of the tenant's space `space` (space names are per tenant: two tenants'
        `core@v2` may hold two models), read from its row at each call (a space removed and made
        again may have another model); the configured space is the operator's model for every
        tenant. Without a tenant: the space's binding in `spaces` (the operator's)."""
        if space == self.settings.space:
            return self.default
        store = self.store
        binding = store.space_binding(space) if tenant is None else store.tenant_space_binding(tenant, space)
        if binding is None:
            raise LookupError(f"space {space!r} is not bound to a model")
        try:
            return self.for_model(*binding)
        except ValueError as e:  # a model no longer allowed here (VIBE_LOCAL_MODELS changed)
            raise LookupError(f"space {space!r}: {e}") from e

    def if_ready(self, space: str, tenant: str | None = None) -> Embedder | None:
        """`__call__` for reads: None (the leg answers degraded, lexically) instead of loading a
        local model in the read's thread, which a background thread then loads; None too for a
        space with no usable model."""
        if space == self.settings.space:
            return self.default
        store = self.store
        try:
            binding = store.space_binding(space) if tenant is None else store.tenant_space_binding(tenant, space)
            if binding is None:
                return None
            return self.prepare(*binding)
        except (LookupError, ValueError, RuntimeError, OSError):
            log.warning("no embedder for a read", extra={"space": space}, exc_info=True)
            return None

    def spec(self, model: str, dim: int | None = None) -> ModelSpec:
        """`model` checked by its text alone (ValueError: a message for the caller)."""
        s = self.settings
        return parse_model(model, dim, s.embedder, s.embed_dim, local_allowlist(s.embed_model, s.local_models))

    def for_model(self, model: str, dim: int | None = None) -> Embedder:
        """An embedder for a model id (`hash:v1@64`, `openai:<model>`, `local:<model>`) or a bare
        model name for the configured provider kind, built here (a worker, or a background
        thread through `prepare`: a local model may load for minutes, exporting to ONNX)."""
        spec = self.spec(model, dim)
        fut = self._future(spec)
        return fut.result()

    def prepare(self, model: str, dim: int | None = None) -> Embedder | None:
        """For a request thread: the model's embedder when it is quick to have (hash, a provider
        probed once, a local model already loaded), else None while a background thread loads the
        local model (ask again later). ValueError for a model `spec` refuses."""
        spec = self.spec(model, dim)
        fut = self._future(spec, background=spec.kind == "local")
        return fut.result() if fut.done() or spec.kind != "local" else None

    def _future(self, spec: ModelSpec, background: bool = False) -> Future[Embedder]:
        """One build per model per process, shared by every caller (single flight)."""
        with self._lock:
            done = self._by_model.get(spec)
            if done is not None:
                fut: Future[Embedder] = Future()
                fut.set_result(done)
                return fut
            fut = self._preparing.get(spec) or Future()
            mine = spec not in self._preparing
            self._preparing[spec] = fut
        if mine:
            if background:
                threading.Thread(target=self._build_into, args=(spec, fut), name="model-build", daemon=True).start()
            else:
                self._build_into(spec, fut)
        return fut

    def _build_into(self, spec: ModelSpec, fut: Future[Embedder]) -> None:
        try:
            emb = self._build(spec)
        except BaseException as e:  # noqa: BLE001 - handed to every waiter; the next call tries again
            with self._lock:
                self._preparing.pop(spec, None)
            fut.set_exception(e)
            return
        with self._lock:
            self._by_model[spec] = emb
            self._preparing.pop(spec, None)
        fut.set_result(emb)

    def _build(self, spec: ModelSpec) -> Embedder:
        from shared.adapters.embedders import build_embedder

        s = self.settings
        if spec.kind == s.embedder and (spec.kind == "hash" and spec.dim == s.embed_dim
                                        or spec.kind != "hash" and spec.name == s.embed_model):
            return self.default  # the configured model, loaded once per process
        if spec.kind == "hash":
            update: dict[str, object] = {"embedder": "hash", "embed_dim": spec.dim}
        else:
            update = {"embedder": spec.kind, "embed_model": spec.name}
        emb = build_embedder(s.model_copy(update=update), spec.dim)
        return self.wrap(emb) if self.wrap is not None else emb


def cold_root(settings: Settings) -> Path:
    return settings.cold_dir or settings.data_dir / "cold"


def build_cold(settings: Settings, store: StoreOfRecord | None = None) -> ColdStore:
    """Cold vectors packed (VIBE_COLD_STORE=packed): a SQLite file in the cold dir, or a table in
    PostgreSQL that workers on any host reach (through the store's connection pool when given);
    or one file each (`files`) in the data dir or a volume every worker mounts (VIBE_COLD_DIR)."""
    root = cold_root(settings)
    if settings.cold_store == "files":
        return FileColdStore(root, settings.cold_codec)
    if settings.store == "postgres":
        from shared.adapters.postgres_store import PostgresStore

        pool = store.pool if isinstance(store, PostgresStore) else None
        return PackedColdStore.postgres(settings.postgres_url, root, settings.cold_codec, pool)
    return PackedColdStore.sqlite(root, settings.cold_codec)


def adopt_legacy_cold_dirs(settings: Settings, store: StoreOfRecord) -> dict[str, int]:
    """Cold files that a space whose name is not file-safe wrote before e435828 move to its
    current directory (FileColdStore.adopt_legacy), at each serving process's start (the cold
    dir may be a volume the workers share; a rename is atomic). The claimants are every space
    the store knows: the configured one and every tenant's, and any bound space of the legacy
    name (a file-safe space keeps its files there)."""
    cold = FileColdStore(cold_root(settings), settings.cold_codec)  # files, whichever store is in use
    spaces = {settings.space} | {r.space for r in store.tenant_spaces()}
    moved = cold.adopt_legacy(spaces, lambda name: store.space_binding(name) is not None)
    if moved:
        log.info("cold store: legacy space directories adopted", extra={"tenantDirs": moved})
    return moved


def build_handler(settings: Settings, store: StoreOfRecord, emb: Embedder,
                  wrap: Callable[[Embedder], Embedder] | None = None) -> EmbedHandler:
    """The embedding job handler, the same in the API's worker threads and in Celery workers."""
    check_declared_dim(settings, emb)
    _check_space(store, settings.space, emb)
    policy = EligibilityPolicy(settings.index_policy)
    directory = SpaceDirectory(store, settings.space)
    return EmbedHandler(store, emb, policy, EmbedFields(build_collections(settings, store)), settings.job_max_attempts,
                        build_cold(settings, store), settings.tenant_daily_tokens, store.clock,
                        embedders=SpaceEmbedders(settings, store, emb, wrap), default_space=settings.space,
                        live=lambda tenant: set(embedding_spaces(directory, tenant)),
                        passages=passage_config(settings), calls=build_ledger(store),
                        max_inputs=settings.embed_batch_size,
                        provider_certs=ProviderCerts(settings.provider_certs))


def check_declared_dim(settings: Settings, emb: Embedder) -> None:
    """SURR_EMBED_DIM is a promise about the model: one that reports another dimension stops the
    process here, before a vector of the wrong shape is stored or compared."""
    declared = settings.declared_embed_dim()
    if declared is not None and emb.dim != declared:
        raise RuntimeError(f"SURR_EMBED_DIM={declared} but the model {emb.model_id} makes vectors of {emb.dim} "
                           "dimensions; fix SURR_EMBED_DIM or the model")


def passage_config(s: Settings) -> PassageConfig:
    return PassageConfig(s.passage_chars, s.passage_overlap, s.max_passages)


def lifecycle_config(s: Settings) -> LifecycleConfig:
    return LifecycleConfig(
        s.space, PromotionPolicy(s.promote_min_queries, s.promote_min_hits, s.promote_window_seconds,
                                 s.demote_idle_seconds),
        s.doc_promote_touches, s.doc_promote_ttl_seconds, s.usage_half_life_seconds, s.evict_idle_seconds,
        s.evict_batch, s.cold_codec, s.retired_space_retention_seconds, s.tenant_daily_tokens,
        ledger_retention_seconds=s.ledger_retention_days * 86400.0)


def backfill_reserve(settings: Settings) -> int:
    """Tokens of the tenant's per-minute bucket a backfill step leaves to reads. It used to be one
    query's ceiling (50 of 200): a promotion backfill then held the bucket near 50, and a burst of
    15 queries on another collection embedded 42 documents instead of 112 (distributed profile,
    README "Lifecycle"). A backfill only takes the top of the bucket as it refills, so its rate
    is the same while reads are idle; reads keep the rest of the bucket for their bursts."""
    cap = settings.per_tenant_per_min
    share = math.floor(cap * settings.backfill_read_share)
    # ... but below what one backfill interval refills, or the bucket would overflow between
    # steps and the backfill would lose rate while reads are idle.
    share = min(share, cap - math.ceil(cap * settings.backfill_interval_seconds / 60))
    return max(min(settings.per_query_max_embeds, cap // 4), share)


def build_lifecycle(settings: Settings, store: StoreOfRecord, queue: JobQueue, budget: Budget,
                    policy: EligibilityPolicy, after_change: Callable[[], object] | None = None,
                    cold: ColdStore | None = None) -> Lifecycle:
    """The scheduler's decisions, the same in `serve`'s thread and in Celery beat tasks."""
    limits = BackfillLimits(settings.backfill_step_docs, backfill_reserve(settings), settings.backpressure_queue_depth,
                            settings.tenant_queue_bound())
    fields = EmbedFields(build_collections(settings, store))
    backfills = Backfills(store, queue, budget, lambda d: policy.decide_doc(d, embed_fields_of(
        fields, d.key.tenant, d.key.collection)), limits, store.clock)
    directory = SpaceDirectory(store, settings.space)
    return Lifecycle(lifecycle_config(settings), store, cold or build_cold(settings, store), backfills, store.clock,
                     after_change=after_change, spaces=directory.live, active=directory.active,
                     ledger=build_ledger(store))


def touch_policy(settings: Settings, **tuning: Any) -> TouchPolicy:
    """The touch policy of this deployment: TouchPolicy's defaults with the operator's follow-up
    switch (VIBE_TOUCH_FOLLOW_UP). `tuning` sets other TouchPolicy fields: benchmarks and tests
    pass the result to `build(touch=)`; the product never does."""
    return replace(TouchPolicy(follow_up=settings.touch_follow_up), **tuning)


def build_follow_ups(settings: Settings, store: StoreOfRecord, policy: TouchPolicy) -> FollowUpSwitch:
    """The "auto" follow-up's switch on the store of record: every process built here (HTTP, MCP,
    workers, CLI) shares its collections' states through the store."""
    return FollowUpSwitch(window=policy.auto_window, store=store, flush_every=settings.touch_auto_flush_every,
                          refresh_seconds=settings.touch_auto_refresh_seconds, after=policy.auto_after,
                          below=policy.auto_below)


def build(settings: Settings, embedder: Embedder | None = None, clock: Callable[[], float] | None = None,
          touch: TouchPolicy | None = None) -> Container:
    """Every part of one process. `clock` (default the wall clock) is the store's, and through
    it every part's that stamps or decides by time (bench lifecycle replays simulated days).
    `touch` (default `touch_policy(settings)`) is the reads' touch policy, for benchmarks and
    tests that measure another."""
    from shared.adapters.embedders import build_embedder

    store = build_store(settings, clock)
    home = claim_index_home(settings.data_dir)
    collections = build_collections(settings, store)
    lexical = _build_lexical(settings, home, store, collections)
    vectors = _build_vectors(settings, home, declared_filterable(settings, collections))
    emb = embedder or build_embedder(settings)
    handler = build_handler(settings, store, emb)
    follower = _build_followers(settings, store, lexical, vectors, home)
    signal = Signal()

    # The in-process pipeline yields to first answers (shared/foreground.py); Celery workers
    # are other processes and share neither the interpreter lock nor this gate.
    foreground = Foreground(settings.foreground_max_wait_seconds)

    def run_batch(jobs: list[EmbedJob]) -> BatchOutcome:
        foreground.yield_to_requests()
        out = handler.run(jobs)
        if out.changed:
            foreground.yield_to_requests()
            follower.catch_up()
        return out

    queue = _build_queue(settings, run_batch)
    queue.on_done(signal.fire)
    cfg = PlannerConfig(settings.space, settings.lexical_candidates, settings.per_query_max_embeds,
                        settings.rrf_k, settings.fusion, settings.semantic_weight,
                        touch_policy(settings) if touch is None else touch,
                        short_first_page=settings.vectors != "qdrant")
    budget = build_budget(settings)
    lifecycle = build_lifecycle(settings, store, queue, budget, handler.policy, follower.sync, handler.cold)
    usage = UsageRecorder(lifecycle.cfg.bucket_seconds, settings.usage_half_life_seconds, lifecycle.clock, store,
                          settings.tenant_daily_tokens, calls=handler.calls)
    spaces = SpaceDirectory(store, settings.space)
    embedders = handler.embedders
    assert isinstance(embedders, SpaceEmbedders)
    # A semantic leg waits for the vector index only.
    planner = Planner(cfg, store, lexical, vectors, emb, queue, budget, follower.of_vectors(),
                      build_explains(settings, store),
                      QueryVectorCache.from_settings(settings), usage=usage, spaces=spaces,
                      embedders=embedders.if_ready,  # a read never loads a model (`if_ready`)
                      lexical_follower=follower.of_lexical(), foreground=foreground,
                      follow_ups=build_follow_ups(settings, store, cfg.touch),
                      backpressure=Backpressure(queue, settings.touch_backpressure_queue_depth, ttl=1.0),
                      tenant_share=(share := TenantShare(queue, settings.tenant_queue_bound(), ttl=1.0)))
    planner.passages = PassageLocator(passage_config(settings), EmbedFields(collections))
    docs = DocumentService(store, follower, queue, handler.policy, EmbedFields(collections), spaces,
                           settings.max_doc_bytes, lambda tenant: _eager(store, tenant),
                           settings.write_sync_wait_seconds,
                           (settings.acl_max_principal_bytes, settings.acl_max_bytes), budget, share)
    embedded = settings.queue != "celery"
    # The embedded profile's reconciler runs on the scheduler thread (the distributed one is a
    # Celery beat task, services/worker/reconciler.py).
    reconcile = (partial(reconcile_pass, store, spaces, queue, settings.reconcile_stuck_seconds,
                         settings.reconcile_batch) if embedded else None)
    # `VIBE_SCHEDULER_ENABLED=false` keeps this process from deciding (promotion, demotion, eviction,
    # pruning) and, distributed, from backfill steps (Celery beat runs them on the workers); usage
    # flushes always run, and embedded, backfill steps and the reconciler too (nothing else would).
    scheduler = SchedulerThread(lifecycle, usage, store, embedded and settings.scheduler_enabled,
                                settings.scheduler_interval_seconds,
                                settings.backfill_interval_seconds, settings.usage_flush_seconds,
                                reconcile, settings.reconcile_interval_seconds,
                                backfills=embedded or settings.scheduler_enabled)
    hooks = RootHooks(agent=partial(build_agent_adapters, settings), ledger=partial(build_ledger, store),
                      collections=partial(build_collections, settings, store),
                      before_start=partial(adopt_legacy_cold_dirs, settings, store),
                      release_index_home=partial(release_index_home, home),
                      key_store=partial(build_key_store, store))
    return Container(settings, store, lexical, vectors, emb, follower, queue, planner, docs, handler, lifecycle,
                     scheduler, spaces, embedders, home, hooks, signal, collections=collections)


def declared_filterable(settings: Settings, collections: CollectionDirectory) -> FilterableFields:
    """The fields that get payload indexes in the shared vector index: the operator's
    VIBE_FILTERABLE_FIELDS and the collection's own `filterableFields`."""
    operator = frozenset(settings.filterable_fields)

    def fields(tenant: str, collection: str) -> frozenset[str]:
        own = collections.filterable_fields(tenant, collection)
        return operator | own if own else operator
    return fields


def build_collections(settings: Settings, store: StoreOfRecord) -> CollectionDirectory:
    """Per-collection settings as every part of this process reads them (a short cache over the
    store of record: a change made through another replica applies within the TTL)."""
    languages = settings.language_map()
    return CollectionDirectory(store, settings.embed_fields, lambda c: languages.of(c).code,
                               settings.collection_settings_ttl_seconds)


def _eager(store: StoreOfRecord, tenant: str) -> set[str]:
    return {m.collection for m in store.collection_modes(tenant) if m.mode == "eager"}


# --- agent tools (MCP): the citation registry, audit log, budget, task ledger, pre-call check, reranker ---


def allow_all(tenant: str, user: str, tool: str, params: dict[str, Any]) -> None:
    """The default pre-call check: no billing system exists here."""


def load_precall(spec: str | None) -> PreCallCheck:
    """`VIBE_MCP_PRECALL_CHECK=module:attr` (extract_key_info's billing hook), or allow everything."""
    if not spec:
        return allow_all
    module, _, attr = spec.partition(":")
    fn = getattr(importlib.import_module(module), attr or "check")
    if not callable(fn):
        raise RuntimeError(f"VIBE_MCP_PRECALL_CHECK {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def build_citations(s: Settings) -> CitationRegistry:
    """Redis when API processes scale out (the Celery queue means Redis is there anyway);
    SQLite in the data dir otherwise. Both keep numbers across restarts."""
    if s.queue == "celery":
        from shared.adapters.citations_redis import RedisCitationRegistry

        return RedisCitationRegistry.from_settings(s)
    return SqliteCitationRegistry(s.data_dir / "mcp_citations.sqlite3")


def build_reranker(s: Settings) -> Reranker | None:
    if not s.rerank_url:
        return None
    from shared.adapters.rerank_http import HttpReranker

    return HttpReranker(s.rerank_url, s.rerank_model, s.rerank_protocol, s.rerank_api_key, s.rerank_timeout_seconds)


def build_agent_adapters(s: Settings) -> AgentAdapters:
    audit_path = s.data_dir / "mcp_audit.sqlite3"
    return AgentAdapters(build_citations(s), SqliteAuditLog(audit_path), SqliteMaterialBudget(audit_path),
                         SqliteTaskLedger(audit_path), load_precall(s.mcp_precall_check), build_reranker(s))


def create_app(container: Container, keys: KeyRing) -> FastAPI:
    """The served app: the HTTP API, with MCP's streamable HTTP endpoint at /mcp."""
    from services.api.app import create_app as http_api
    from services.mcp.http import McpHttp

    return http_api(container, keys, mcp=lambda: McpHttp(container, keys))


def build_worker_runtime(settings: Settings, app: Celery | None = None, dim: int | None = None) -> Runtime:
    """A Celery worker process's parts, built after the fork (SQLite connections and HTTP
    clients must not cross one): the same handler and lifecycle as the embedded runner's."""
    from services.worker.tasks import PostponingEmbedder, Runtime
    from shared.adapters.celery_queue import CeleryQueue
    from shared.adapters.embedders import build_embedder

    store = build_store(settings)
    # The circuit must open before a provider outage runs any job out of attempts: once it is
    # open, batches are postponed (not charged), so an outage never turns documents `failed`.
    trip = min(settings.breaker_failures, settings.job_max_attempts)
    emb = build_embedder(settings.model_copy(update={"breaker_failures": trip}), dim)
    handler = build_handler(settings, store, PostponingEmbedder(emb), wrap=PostponingEmbedder)
    queue = CeleryQueue.from_settings(settings, app)
    lifecycle = build_lifecycle(settings, store, queue, build_budget(settings), handler.policy, cold=handler.cold)
    return Runtime(settings, store, handler, queue, lifecycle)


def run_worker(settings: Settings, concurrency: int | None) -> None:
    """`vibe-semantic worker`: a Celery worker whose processes build their runtime here."""
    from services.worker.celery_app import run_worker as celery_worker

    celery_worker(settings, concurrency, build_worker_runtime)


def run_scheduler(settings: Settings) -> None:
    """`vibe-semantic scheduler`: Celery beat."""
    from services.worker.celery_app import run_scheduler as celery_beat

    celery_beat(settings, build_worker_runtime)


def run_mcp_stdio(settings: Settings) -> None:
    """`vibe-semantic mcp`: the tools over stdio, on a container built here."""
    from services.mcp.server import run_stdio

    run_stdio(settings, build)
