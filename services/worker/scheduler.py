"""Where the lifecycle runs in the embedded profile: one daemon thread per API process.

It flushes the process's usage statistics every `VIBE_USAGE_FLUSH_SECONDS` (all profiles: every
API replica contributes, whatever VIBE_SCHEDULER_ENABLED says), runs backfill steps every
`VIBE_BACKFILL_INTERVAL_SECONDS` (when `backfills` is on: always in the embedded profile, where
nothing else would; in the distributed profile unless VIBE_SCHEDULER_ENABLED=false leaves them
to the workers' Celery beat), a lifecycle tick every `VIBE_SCHEDULER_INTERVAL_SECONDS` (when
`decide` is on: the embedded profile with VIBE_SCHEDULER_ENABLED; in the distributed profile
Celery beat sends those to a worker), and, given a
`reconcile` job (the embedded profile's reconciler, services/worker/repair.py), that job every
`VIBE_RECONCILE_INTERVAL_SECONDS`. Ticks and steps take a store lease, so several processes on
one store still make each decision once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from services.core.lifecycle import Lifecycle
from services.core.usage import UsageRecorder
from shared.ports import StoreOfRecord

log = logging.getLogger("vibe.scheduler")


class SchedulerThread:
    def __init__(self, lifecycle: Lifecycle, usage: UsageRecorder, store: StoreOfRecord, decide: bool,
                 interval: float, backfill_interval: float, flush_interval: float,
                 reconcile: Callable[[], object] | None = None, reconcile_interval: float = 30.0,
                 backfills: bool = True):
        self.lifecycle = lifecycle
        self.usage = usage
        self.store = store
        self.decide = decide
        self.backfills = backfills
        self.interval = interval
        self.backfill_interval = backfill_interval
        self.flush_interval = flush_interval
        self.reconcile = reconcile
        self.reconcile_interval = reconcile_interval
        self.backfilling = False  # the last backfill run queued a lane's worth (drain_wake below)
        self._drain_low = 1
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vibe-scheduler", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Run backfills now (a new task was created)."""
        self._wake.set()

    def drain_wake(self, bulk_depth: Callable[[], int], low: int) -> Callable[[object], None]:
        """A queue `on_done` callback: the next backfill step now, when the last one queued at
        least `low` jobs and the bulk lane is down to `low`. An admin-lane backfill
        (services/core/admin_lane.py) keeps only a bounded lane ahead of the workers; waiting for
        the next interval left a fast model idle between steps. A step that queued less (a
        backfill on the bucket's trickle) keeps the interval: woken after every batch, it would
        read a whole step of documents to queue a few."""
        self._drain_low = max(1, low)

        def after_batch(_keys: object) -> None:
            if self.backfilling and bulk_depth() <= low:
                self._wake.set()
        return after_batch

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.usage.flush(self.store)

    def _run(self) -> None:
        now = time.monotonic()
        due = {"flush": now + self.flush_interval, "backfill": now, "tick": now + self.interval}
        jobs: list[tuple[str, float, Callable[[], object]]] = [("flush", self.flush_interval, self._flush)]
        if self.backfills:
            jobs.append(("backfill", self.backfill_interval, self._backfill))
        if self.decide:
            jobs.append(("tick", self.interval, self._tick))
        if self.reconcile is not None:  # the start already re-enqueued what a previous run left
            due["reconcile"] = now + self.reconcile_interval
            jobs.append(("reconcile", self.reconcile_interval, self.reconcile))
        while not self._stop.is_set():
            wait = max(0.0, min(due.values()) - time.monotonic())
            if self._wake.wait(wait):
                self._wake.clear()
                due["backfill"] = time.monotonic()
            if self._stop.is_set():
                return
            now = time.monotonic()
            for name, every, job in jobs:
                if now >= due[name]:
                    due[name] = now + every
                    try:
                        job()
                    except Exception:  # noqa: BLE001 - the next round tries again; the service stays up
                        log.exception("scheduler %s failed", name)

    def _backfill(self) -> None:
        self.backfilling = self.lifecycle.run_backfills() >= self._drain_low

    def _flush(self) -> None:
        self.usage.flush(self.store)

    def _tick(self) -> None:
        self._flush()  # this process's latest figures count in this tick
        self.lifecycle.tick()
