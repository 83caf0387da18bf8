"""The store of record and what lives beside it: keys, the provider-call ledger, explain
records, collection settings, the cold store; the job queue and the embedding budget."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from services.core.handlers import BatchOutcome
from services.planner.explain import Explains
from shared.adapters.cold_files import FileColdStore
from shared.adapters.cold_packed import PackedColdStore
from shared.adapters.memory_budget import MemoryBudget
from shared.adapters.memory_queue import InProcessQueue
from shared.adapters.sqlite_store import SqliteStore
from shared.collection_settings import CollectionDirectory
from shared.config import Settings
from shared.keys import KeyStore
from shared.model import EmbedJob
from shared.ports import (
    Budget,
    ColdStore,
    JobQueue,
    ProviderLedger,
    StoreOfRecord,
)

log = logging.getLogger("vibe.wiring")


def _build_queue(settings: Settings, run_batch: Callable[[list[EmbedJob]], BatchOutcome]) -> JobQueue:
    if settings.queue == "celery":
        from shared.adapters.celery_queue import CeleryQueue

        return CeleryQueue.from_settings(settings)
    return InProcessQueue(run_batch, settings.workers, settings.embed_batch_size, settings.job_backoff_seconds,
                          settings.job_max_attempts, bulk_batch_size=settings.admin_lane_batch)


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


def build_collections(settings: Settings, store: StoreOfRecord) -> CollectionDirectory:
    """Per-collection settings as every part of this process reads them (a short cache over the
    store of record: a change made through another replica applies within the TTL)."""
    languages = settings.language_map()
    return CollectionDirectory(store, settings.embed_fields, lambda c: languages.of(c).code,
                               settings.collection_settings_ttl_seconds)


def _eager(store: StoreOfRecord, tenant: str) -> set[str]:
    return {m.collection for m in store.collection_modes(tenant) if m.mode == "eager"}


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
    """Cold files that a space whose name is not file-safe wrote under its raw name (the older
    layout) move to its current directory (FileColdStore.adopt_legacy), at each serving process's start (the cold
    dir may be a volume the workers share; a rename is atomic). The claimants are every space
    the store knows: the configured one and every tenant's, and any bound space of the legacy
    name (a file-safe space keeps its files there)."""
    cold = FileColdStore(cold_root(settings), settings.cold_codec)  # files, whichever store is in use
    spaces = {settings.space} | {r.space for r in store.tenant_spaces()}
    moved = cold.adopt_legacy(spaces, lambda name: store.space_binding(name) is not None)
    if moved:
        log.info("cold store: legacy space directories adopted", extra={"tenantDirs": moved})
    return moved
