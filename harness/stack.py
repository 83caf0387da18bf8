"""Profiles as processes, for tests/reliability/ and bench/reliability.py: the embedded profile
(one `serve`), and the distributed one (API + N Celery workers + beat on a private Redis and a
private PostgreSQL), both embedding through the local OpenAI-protocol provider so provider
calls can be counted. A PostgreSQL that can be halted and resumed on the same data."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.celery_worker import CeleryProcess, start_scheduler, start_worker
from harness.postgres_server import PostgresServer, find_bindir
from harness.redis_server import RedisServer
from harness.server import Served, end_process
from harness.workload import RecordingProvider

LOAD_KEYS = ["k-admin-a", "k-admin-b"]  # two tenants, each key read+write+admin


def base_env(provider: RecordingProvider, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "VIBE_DATA_DIR": str(data_dir), "VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": provider.base_url,
        "VIBE_EMBED_MODEL": "test-embed", "VIBE_EMBED_BATCH_SIZE": "20",
        # No request rate limit: any 429 would be an error of the run.
        "VIBE_PER_TENANT_REQUESTS_PER_SECOND": "0",
        # No embedding budget: under it an eager write beyond the bucket is stated `none` until the
        # scheduler's backfill (VIBE_SCHEDULER_INTERVAL_SECONDS, 60 s) embeds it; the load runs demand `ready`.
        "VIBE_PER_TENANT_PER_MIN": "1000000",
        "VIBE_STREAM_WAIT_SECONDS": "2", "VIBE_JOB_BACKOFF_SECONDS": "0.2", "VIBE_JOB_BACKOFF_MAX_SECONDS": "2",
    }
    env.update(extra)
    return env


def celery_extra(redis_url: str, postgres_url: str) -> dict[str, str]:
    return {
        "VIBE_QUEUE": "celery", "VIBE_REDIS_URL": redis_url, "VIBE_STORE": "postgres",
        "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "8",
        "VIBE_CELERY_VISIBILITY_TIMEOUT": "6", "VIBE_CELERY_RESTORE_INTERVAL": "1",
        "VIBE_REDIS_DOWN_BACKOFF_SECONDS": "0.5", "VIBE_RECONCILE_INTERVAL_SECONDS": "1",
        "VIBE_RECONCILE_STUCK_SECONDS": "2",
    }


class HaltablePostgres(PostgresServer):
    """`halt()` shuts the server down (fast shutdown: every connection is cut), `resume()`
    starts it again on the same data dir and port."""

    def halt(self) -> None:
        assert self.proc is not None
        end_process(self.proc, signal.SIGINT, grace=15)
        self.proc = None

    def resume(self) -> None:
        self.launch()


@contextlib.contextmanager
def haltable_postgres() -> Iterator[HaltablePostgres]:
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
    server = HaltablePostgres(bindir)
    try:
        yield server.start()  # type: ignore[misc]
    finally:
        server.stop()


@dataclass
class Distributed:
    api: Served
    env: dict[str, str]
    worker_env: dict[str, str]
    redis: RedisServer
    log_dir: Path
    workers: list[CeleryProcess] = field(default_factory=list)
    scheduler: CeleryProcess | None = None

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        self.api.stop()


@contextlib.contextmanager
def distributed(root: Path, provider: RecordingProvider, redis: RedisServer, postgres_url: str, workers: int = 2,
                **extra: str) -> Iterator[Distributed]:
    """API + `workers` worker processes (concurrency 1 each) + beat; the API and the workers
    share only PostgreSQL and Redis (each has its own data dir, as on separate hosts)."""
    env = base_env(provider, root / "api" / "data", **celery_extra(redis.url, postgres_url), **extra)
    wenv = {**env, "VIBE_DATA_DIR": str(root / "worker" / "data")}
    stack = Distributed(Served(root / "api" / "data", env=env), env, wenv, redis, root / "logs")
    try:
        for _ in range(workers):
            stack.workers.append(start_worker(wenv, stack.log_dir))
        stack.scheduler = start_scheduler(wenv, stack.log_dir)
        yield stack
    finally:
        stack.stop()
