"""Process-wide thread pools of the read path: the lexical leg beside the query embedding, and
the finisher of streams whose reader left."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from shared.metrics import METRICS
from shared.threads import lower_priority

log = logging.getLogger("vibe.planner")
T = TypeVar("T")

class _SidePool:
    """Threads that run a read's lexical leg while the request's own thread embeds the query
    (onnxruntime and torch release the GIL while they compute). The encoder stays on the
    request's thread: it is the longer of the two, so the request thread never sleeps waiting
    for a hand-off when the lexical leg is the shorter one. One pool per process: a forked
    child (a prefork worker) starts its own, as threads do not survive a fork."""

    def __init__(self, workers: int = 4, name: str = "vibe-lexical-leg"):
        self._workers = workers
        self._name = name
        self._lock = threading.Lock()
        self._pid = -1
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
                    self._pid = os.getpid()
        assert self._pool is not None
        return self._pool.submit(fn)


LEXICAL_LEGS = _SidePool()
# A global read's per-collection legs (services/planner/fanout.py): its own pool, since a global
# lexical leg may itself run on LEXICAL_LEGS and must never wait on a pool it occupies.
FANOUT_LEGS = _SidePool(4, "vibe-fanout-leg")


class _Finisher:
    """One background thread per process that finishes streams whose reader left before their
    touch (`ReadSession.finish`). At most `bound` wait: past that a left stream's touch is
    dropped and counted (`vibe_stream_left_touches_total{outcome="dropped"}`), so a flood of
    abandoned streams cannot grow memory without bound; the query's documents are touched again
    by its next read."""

    def __init__(self, bound: int = 256):
        self.bound = bound
        self._lock = threading.Lock()
        self._waiting = 0
        self._pid = -1
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], None]) -> bool:
        with self._lock:
            if self._pid != os.getpid():  # a forked child starts its own thread
                # Background work: below the request threads, as the document embedder is (the
                # query embedding it may do runs on this thread: one intra-op thread).
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="vibe-left-streams",
                                                initializer=lower_priority(5))
                self._pid, self._waiting = os.getpid(), 0
            if self._waiting >= self.bound:
                METRICS.left_streams.labels(outcome="dropped").inc()
                return False
            self._waiting += 1
            assert self._pool is not None
            self._pool.submit(self._run, fn)
            return True

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
            METRICS.left_streams.labels(outcome="touched").inc()
        except Exception:  # noqa: BLE001 - a background step: logged and counted, never raised into a request
            log.exception("finishing a left stream failed")
            METRICS.left_streams.labels(outcome="failed").inc()
        finally:
            with self._lock:
                self._waiting -= 1


FINISHER = _Finisher()
