"""Requests first: background work in the serving process waits while a first answer is computed.

On a small machine a first answer (a few ms of Python) shares the interpreter lock and the
cores with the in-process embedding pipeline: the previous query's touch queues documents, and
their batch (store writes, vector upserts, index follower) runs while the next query is being
answered. Measured in process at 100k documents with back-to-back fresh queries, the first
answer took 16 ms against 3 ms with nothing in the background. Thread priorities cannot help
with the lock (a low-priority holder only holds it longer), so the pipeline yields instead: it
starts a batch, or applies its index changes, only when no first answer is in flight, waiting at
most `max_wait` seconds each time so a steady stream of reads cannot starve it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from shared.metrics import METRICS


class Foreground:
    def __init__(self, max_wait: float = 0.05):
        self.max_wait = max_wait
        self._serving = 0
        self._cv = threading.Condition()

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Around the computation of a first answer (nested calls count once each)."""
        with self._cv:
            self._serving += 1
        try:
            yield
        finally:
            with self._cv:
                self._serving -= 1
                if not self._serving:
                    self._cv.notify_all()

    def yield_to_requests(self) -> bool:
        """Background work calls this before a step: returns at once when no first answer is in
        flight, else when the last one ends or `max_wait` passes (False: it went ahead anyway)."""
        if self.max_wait <= 0:
            return True
        with self._cv:
            if not self._serving:
                return True
            METRICS.background_yields.inc()
            return self._cv.wait_for(lambda: not self._serving, timeout=self.max_wait)
