"""Requests first: background work in the serving process waits while a first answer is in flight.

On a small machine a first answer (a few ms of Python) shares the interpreter lock and the
cores with the in-process embedding pipeline and with earlier streams' tails: the previous
query's touch queues documents, and their batch (store writes, vector upserts, index follower)
runs while the next query is being answered. Measured in process at 100k documents with
back-to-back fresh queries, the first answer took 16 ms against 3 ms with nothing in the
background. Thread priorities cannot help with the lock (a low-priority holder only holds it
longer), so background work yields instead: it starts a step only when no first answer is in
flight, waiting at most `max_wait` seconds each time so a steady stream of reads cannot starve it.

"In flight" lasts until the answer is handed to the connection, not only until it is computed:
background work woken when the computation ends would take the lock from the response being
written (bench.first_event_ab measured that: +1.2 ms keyword, +1.7 hybrid paired p50). A hold
that is never released (a connection dropped before its response started) lapses after
`hold_limit` seconds, so it cannot stall background work.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from shared.metrics import METRICS


class Foreground:
    def __init__(self, max_wait: float = 0.05, hold_limit: float = 1.0):
        self.max_wait = max_wait
        self.hold_limit = hold_limit
        self._holds: dict[int, float] = {}  # token -> monotonic deadline
        self._tokens = itertools.count()
        self._cv = threading.Condition()

    def hold(self) -> Callable[[], None]:
        """A first answer is in flight from now until the returned release is called (once or
        more) or `hold_limit` passes."""
        with self._cv:
            token = next(self._tokens)
            self._holds[token] = time.monotonic() + self.hold_limit

        def release() -> None:
            with self._cv:
                if self._holds.pop(token, None) is not None and not self._busy():
                    self._cv.notify_all()

        return release

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Around the computation of a first answer (nested holds count once each)."""
        release = self.hold()
        try:
            yield
        finally:
            release()

    def _busy(self) -> bool:
        """Under the lock: a hold that has not lapsed (lapsed ones are dropped)."""
        if not self._holds:
            return False
        now = time.monotonic()
        for token in [t for t, deadline in self._holds.items() if deadline <= now]:
            del self._holds[token]
        return bool(self._holds)

    def yield_to_requests(self) -> bool:
        """Background work calls this before a step: returns at once when no first answer is in
        flight, else when the last one ends or `max_wait` passes (False: it went ahead anyway)."""
        if self.max_wait <= 0:
            return True
        with self._cv:
            if not self._busy():
                return True
            METRICS.background_yields.inc()
            end = time.monotonic() + self.max_wait
            while self._busy():
                now = time.monotonic()
                if now >= end:
                    return False
                # woken by the last release, or when the next hold lapses (nothing notifies that)
                self._cv.wait(min(end, *self._holds.values()) - now)
            return True
