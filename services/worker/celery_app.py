"""The Celery app (distributed profile): embedding tasks, the reconciler, worker and beat.

Configuration comes from `Settings` only (`shared.adapters.celery_queue.celery_config`:
acks_late, reject on worker lost, prefetch 1, visibility timeout, lane order). `vibe-semantic
worker` and `vibe-semantic scheduler` call `run_worker` / `run_scheduler` with the composition
root's runtime builder (`services.wiring.build_worker_runtime`).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery import Celery, Task
from celery.signals import worker_process_shutdown

from services.worker import metrics_server
from services.worker.reconciler import reconcile
from services.worker.tasks import Runtime, RuntimeBuilder, backoff_delay, runtime
from shared.adapters.celery_queue import BACKFILL_TASK, EMBED_TASK, LIFECYCLE_TASK, QUEUES, RECONCILE_TASK, make_celery
from shared.config import Settings
from shared.logging import configure_logging

log = logging.getLogger("vibe.worker")


def create_app(settings: Settings, build: RuntimeBuilder, dim: int | None = None) -> Celery:
    app = make_celery(settings)
    # A hard limit below the visibility timeout: a batch can never still be running when its
    # message is handed to another worker. (The provider timeout bounds it long before.)
    limit = max(1.0, settings.celery_visibility_timeout * 0.9)

    def rt(task: Task) -> Runtime:
        """The process's runtime; if it cannot be built (store locked, Redis away), the
        message is re-sent later rather than failed and acked (which would drop the batch)."""
        try:
            return runtime(settings, app, dim, build)
        except Exception as e:
            log.exception("worker runtime unavailable")
            delay = backoff_delay(task.request.retries + 1, settings.job_backoff_seconds,
                                  settings.job_backoff_max_seconds, None)
            raise task.retry(exc=e, countdown=delay, max_retries=None) from e

    @app.task(name=EMBED_TASK, bind=True, time_limit=limit)
    def embed(self: Task, payload: list[Any]) -> dict[str, int]:
        lane = (self.request.delivery_info or {}).get("routing_key") or "?"
        return rt(self).run_batch(payload, lane)

    @app.task(name=RECONCILE_TASK, bind=True, time_limit=limit)
    def reconcile_task(self: Task) -> dict[str, int]:
        r = rt(self)
        return reconcile(r.store, r.queue, settings)

    @app.task(name=LIFECYCLE_TASK, bind=True, time_limit=limit)
    def lifecycle_task(self: Task) -> dict[str, object]:
        return rt(self).lifecycle.tick().body()

    @app.task(name=BACKFILL_TASK, bind=True, time_limit=limit)
    def backfill_task(self: Task) -> int:
        return rt(self).lifecycle.run_backfills()

    return app


def worker_queues(settings: Settings) -> str:
    names = [q.strip() for q in settings.worker_queues.split(",") if q.strip()]
    unknown = [q for q in names if q not in QUEUES]
    if unknown or not names:
        raise SystemExit(f"VIBE_WORKER_QUEUES: unknown lane(s) {unknown}; choose from {sorted(QUEUES)}")
    return ",".join(QUEUES[q] for q in names)


def _preflight(settings: Settings, build: RuntimeBuilder) -> int:
    """Fail at start-up, not on the first message: the store opens, the embedder answers and
    matches the space's model and dimension. Everything is closed again before the pool forks;
    the dimension is handed to the pool children so they need no probe call of their own."""
    rt = build(settings, None, None)
    rt.store.close()
    return rt.handler.embedder.dim


def _logging(settings: Settings) -> None:
    """JSON logs; Celery's per-task lines carry task arguments (document ids and content
    hashes), so they are only shown in debug."""
    configure_logging(settings.debug)
    if not settings.debug:
        for name in ("celery.worker.strategy", "celery.app.trace"):
            logging.getLogger(name).setLevel(logging.WARNING)


def run_worker(settings: Settings, concurrency: int | None, build: RuntimeBuilder) -> None:
    if settings.queue != "celery":
        raise SystemExit("vibe-semantic worker needs VIBE_QUEUE=celery (or VIBE_PROFILE=distributed)")
    _logging(settings)
    app = create_app(settings, build, _preflight(settings, build))
    _serve_metrics(settings)
    app.worker_main([
        "worker", "--concurrency", str(concurrency or settings.workers), "--queues", worker_queues(settings),
        "--hostname", f"vibe-{os.getpid()}@{socket.gethostname()}", "--loglevel", "INFO", "--pool", "prefork",
        # no cluster chatter: workers coordinate through the broker and the store only
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ])


def _serve_metrics(settings: Settings) -> None:
    """/metrics for the whole worker (VIBE_METRICS_PORT). Runs after the preflight and before
    the pool forks: the children inherit the multiprocess mode and the signal handler."""
    if settings.metrics_port is None or not metrics_server.enabled():
        return
    # The preflight's throw-away embedder published a breaker state from this (main) process,
    # which runs no task; left in place it would read as a live `closed` breaker forever.
    metrics_server.process_gone(os.getpid())
    metrics_server.serve(settings.metrics_port, settings.metrics_token)
    worker_process_shutdown.connect(_child_exited, weak=False)


def _child_exited(pid: int | None = None, **_: Any) -> None:
    """Celery sends this in a pool child just before it exits (not after a kill -9: that
    child's live gauges stay until the worker restarts with a fresh directory)."""
    metrics_server.process_gone(pid or os.getpid())


def run_scheduler(settings: Settings, build: RuntimeBuilder) -> None:
    if settings.queue != "celery":
        raise SystemExit("vibe-semantic scheduler needs VIBE_QUEUE=celery (or VIBE_PROFILE=distributed)")
    _logging(settings)
    create_app(settings, build).start(["beat", "--loglevel", "INFO"])
