"""In-process job queue with worker threads (embedded profile).

Two lanes so that interactive on-touch jobs never wait behind a bulk reindex. Within a lane
the tenants take turns (`_Lane`): one tenant's backfill of thousands of jobs does not stand
in front of another tenant's one job, as it did in one FIFO. Workers take up to
`batch_size` jobs at a time so the embedder sees batches. Pending jobs are deduplicated
by job key. Nothing here is durable on purpose: the sidecar row says `queued` in the store,
and `requeue_stale()` on start re-enqueues those rows, so a crash loses no accepted job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from shared.metrics import METRICS
from shared.model import DocKey, EmbedJob
from shared.readiness import NotReady

log = logging.getLogger("vibe.queue")


class _Outcome(Protocol):
    changed: list[DocKey]
    retry: list[EmbedJob]
    retry_after: float | None


class _Lane:
    """One lane's jobs: a FIFO per tenant, tenants served in turn. A batch takes one job from
    each tenant in turn (those whose next job is in the batch's space), then the next batch
    starts with the tenant after the one that started this one."""

    def __init__(self) -> None:
        self._tenants: OrderedDict[str, deque[EmbedJob]] = OrderedDict()  # turn order: first is next

    def __len__(self) -> int:
        return sum(len(q) for q in self._tenants.values())

    def __bool__(self) -> bool:
        return bool(self._tenants)

    def count(self, tenant: str) -> int:
        q = self._tenants.get(tenant)
        return len(q) if q is not None else 0

    def append(self, job: EmbedJob) -> None:
        self._tenants.setdefault(job.key.tenant, deque()).append(job)

    def take(self, size: int) -> list[EmbedJob]:
        """Up to `size` jobs of one space (the next tenant's next job's), tenants in turn."""
        first = next(iter(self._tenants))
        space = self._tenants[first][0].space
        batch: list[EmbedJob] = []
        while len(batch) < size:
            took = False
            for q in list(self._tenants.values()):
                if len(batch) < size and q and q[0].space == space:
                    batch.append(q.popleft())
                    took = True
            if not took:
                break
        self._tenants.move_to_end(first)  # the next batch starts with the next tenant
        for tenant in [t for t, q in self._tenants.items() if not q]:
            del self._tenants[tenant]
        return batch


class InProcessQueue:
    def __init__(
        self,
        run_batch: Callable[[list[EmbedJob]], _Outcome],
        workers: int = 2,
        batch_size: int = 32,
        backoff_seconds: float = 0.5,
        max_attempts: int = 4,
        bulk_batch_size: int | None = None,
    ):
        self._max_attempts = max_attempts
        self._run_batch = run_batch
        self._n_workers = workers
        self._batch_size = batch_size
        # Bulk batches may be larger: a batch's store write and index apply are paid once per
        # batch, and no reader waits on a bulk job's latency.
        self._bulk_batch_size = bulk_batch_size or batch_size
        self._backoff = backoff_seconds
        self._lanes: dict[str, _Lane] = {"interactive": _Lane(), "bulk": _Lane()}
        self._pending: set[tuple[str, ...]] = set()
        self._reconciled: dict[str | None, dict[str, float]] = {}  # the last reconcile pass, by tenant
        self._inflight: Counter[str] = Counter()  # by tenant
        self._retrying: Counter[str] = Counter()
        self._cv = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._callbacks: list[Callable[[list[DocKey]], None]] = []

    def on_done(self, callback: Callable[[list[DocKey]], None]) -> None:
        self._callbacks.append(callback)

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        added = 0
        with self._cv:
            for j in jobs:
                if j.job_key in self._pending:
                    continue
                self._pending.add(j.job_key)
                self._lanes[j.priority].append(j)
                METRICS.jobs_queued.labels(priority=j.priority).inc()
                added += 1
            self._publish_depth()
            self._cv.notify_all()
        return added

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        with self._cv:
            if tenant is None:
                lanes = {lane: len(q) for lane, q in self._lanes.items()}
                return {**lanes, "inflight": self._inflight.total(), "retrying": self._retrying.total()}
            lanes = {lane: q.count(tenant) for lane, q in self._lanes.items()}
            return {**lanes, "inflight": self._inflight[tenant], "retrying": self._retrying[tenant]}

    def idle(self) -> bool:
        d = self.depth()
        return not any(d.values())

    def _publish_depth(self) -> None:
        for lane, q in self._lanes.items():
            METRICS.queue_depth.labels(queue=lane).set(len(q))

    def start(self) -> None:
        self._stopping = False
        for i in range(self._n_workers):
            t = threading.Thread(target=self._work, name=f"vibe-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def check_ready(self) -> None:
        """Its worker threads run: a thread killed by an error nobody caught leaves jobs queued
        for ever, with nothing else to show it."""
        with self._cv:
            alive, stopping = sum(t.is_alive() for t in self._threads), self._stopping
        if stopping or alive < self._n_workers:
            raise NotReady(f"{alive} of {self._n_workers} embedding worker threads running")

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()

    def _take(self) -> list[EmbedJob] | None:
        """Interactive lane first; a batch never mixes lanes or spaces; tenants take turns."""
        with self._cv:
            while not self._stopping and not any(self._lanes.values()):
                self._cv.wait()
            if self._stopping:
                return None
            urgent = bool(self._lanes["interactive"])
            lane = self._lanes["interactive"] if urgent else self._lanes["bulk"]
            batch = lane.take(self._batch_size if urgent else self._bulk_batch_size)
            self._inflight.update(j.key.tenant for j in batch)
            self._publish_depth()
            return batch

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            changed: list[DocKey] = []
            retry: list[EmbedJob] = []
            delay = self._backoff
            try:
                out = self._run_batch(batch)
                changed, retry = out.changed, out.retry
                delay = out.retry_after if out.retry_after is not None else self._backoff
            except Exception:  # a bug in a handler must not kill the worker thread
                log.exception("embed batch crashed", extra={"jobs": len(batch)})
                retry = [replace(j, attempt=j.attempt + 1) for j in batch if j.attempt + 1 < self._max_attempts]
                # Jobs past the limit stay `queued` in the store: visible in /semantic/lag; the scheduler
                # thread's reconcile pass re-enqueues them once stuck (services/worker/repair.py).
            self._finish(batch, retry, delay)
            for cb in self._callbacks:
                cb(changed)

    def _finish(self, batch: list[EmbedJob], retry: list[EmbedJob], delay: float) -> None:
        with self._cv:
            self._inflight.subtract(j.key.tenant for j in batch)
            for j in batch:
                self._pending.discard(j.job_key)
            self._retrying.update(j.key.tenant for j in retry)
        if retry:
            METRICS.jobs_retried.inc(len(retry))
            attempt = max(j.attempt for j in retry)
            wait = max(delay, self._backoff * (2 ** max(attempt - 1, 0)))
            threading.Timer(wait, self._requeue, args=(retry,)).start()

    def _requeue(self, jobs: list[EmbedJob]) -> None:
        with self._cv:
            self._retrying.subtract(j.key.tenant for j in jobs)
        self.enqueue(jobs)

    # -- the embedded reconciler's record (services/worker/repair.py), for /semantic/lag --
    # (No `pending_job_keys` for /semantic/mismatch: several embedded processes may share one
    # store, and a row another process's queue holds would look orphaned from here.)

    def record_reconcile(self, tenant: str | None, at: float, stuck: int, requeued: int) -> None:
        """The last reconcile pass (tenant None: all tenants) and what it found per tenant."""
        with self._cv:
            self._reconciled[tenant] = {"at": at, "stuck": stuck, "requeued": requeued}

    def reconcile_report(self, tenant: str) -> dict[str, object]:
        """For /semantic/lag, as the Celery queue reports it: when this process last reconciled
        and what it last found for this tenant (never another tenant's numbers)."""
        with self._cv:
            last, mine = self._reconciled.get(None), self._reconciled.get(tenant)
        out: dict[str, object] = {"reachable": True, "lastRunAt": last["at"] if last else None}
        if mine:
            out.update(lastFoundAt=mine["at"], stuckFound=int(mine["stuck"]), requeued=int(mine["requeued"]))
        return out

    def wait_idle(self, timeout: float) -> bool:
        """For tests and the CLI: block until nothing is queued, running or retrying."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle():
                return True
            time.sleep(0.02)
        return False
