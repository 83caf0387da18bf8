"""Background threads below the request threads (Linux `nice` is per thread)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable


def lower_priority(by: int) -> Callable[[], None]:
    """A thread initializer: the thread that runs it goes `by` nice levels below the process, so
    on a small machine the scheduler hands a core to a query before it hands it to background
    work. Threads a library starts from it (onnxruntime's pool) inherit the level."""
    def lower() -> None:
        if by <= 0 or not hasattr(os, "setpriority"):
            return
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):  # not permitted here: same priority as the rest, still correct
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    return lower


class TicketLock:
    """A lock that admits its waiters in the order they came (a ticket queue), with a timeout.

    The embedded store's writers queue on one (`SqliteStore._tx`, per database file): SQLite's
    busy handler lets a waiting writer sleep and poll (1, 2, 5, ... up to 100 ms), so a thread
    that commits back to back (a batch loop, a worker) keeps a request's write out for as long as
    it goes on (measured: 4 s, the whole run, against a 5 ms transaction repeated), and any wait
    takes up to a poll interval longer than the lock is held. Here the next ticket goes in as
    soon as the lock is free. Not reentrant: `held()` tells a caller that would nest.

    A waiter that times out gives up its ticket (`acquire` returns False), and the queue skips it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0  # the next ticket handed out
        self._serving = 0  # the ticket that holds the lock (or may take it now)
        self._gave_up: set[int] = set()  # tickets of waiters that timed out
        self._owner: int | None = None

    def acquire(self, timeout: float | None = None) -> bool:
        with self._cond:
            ticket = self._next
            self._next += 1
            if not self._cond.wait_for(lambda: self._serving == ticket, timeout):
                self._gave_up.add(ticket)
                return False
            self._owner = threading.get_ident()
            return True

    def release(self) -> None:
        with self._cond:
            self._owner = None
            self._serving += 1
            while self._serving in self._gave_up:
                self._gave_up.discard(self._serving)
                self._serving += 1
            self._cond.notify_all()

    def held(self) -> bool:
        """Whether the calling thread holds it."""
        return self._owner == threading.get_ident()
