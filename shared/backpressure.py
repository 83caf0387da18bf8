"""Global backpressure from queue depth (beside the per-tenant rate limit and the per-query
ceiling): whether the job queue, every lane together (waiting, running or retrying), holds
at least `bound` jobs. A queue that deep means the workers or the provider are not keeping up
(or are down): more jobs would only grow the lag every waiting read sees, so the paths that add
jobs stop adding them until it drains. Backfills (promotion, reindex, migration, rehydration)
stop at `VIBE_BACKPRESSURE_QUEUE_DEPTH`; on-touch embedding, which a reader waits for, only at
`VIBE_TOUCH_BACKPRESSURE_QUEUE_DEPTH` (twice as deep by default), so backfills yield first.
Below both, each tenant has its own share of the queue (`TenantShare`), so no tenant alone
reaches the global bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from shared.ports import JobQueue


def queued_total(depth: dict[str, int]) -> int:
    """Jobs in a `JobQueue.depth()` answer, every lane together (`unreachable` is a flag, not jobs)."""
    return sum(v for k, v in depth.items() if k != "unreachable")


class Backpressure:
    """`pressed()`: the queue holds at least `bound` jobs. The depth is read at most every `ttl`
    seconds (0: at every ask): a read path asks on every touch, and a Redis round trip per read
    for a figure that moves by a batch at a time is not worth it. A queue that cannot be measured
    is not a reason to stop: enqueueing then reports its own outage."""

    def __init__(self, queue: JobQueue, bound: int, ttl: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        self.queue = queue
        self.bound = bound
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._read: tuple[float, int] | None = None  # (when, total)

    def total(self) -> int | None:
        """The queue's jobs, as last read (None: it could not be measured)."""
        now = self.clock()
        with self._lock:
            if self._read is not None and now - self._read[0] < self.ttl:
                return self._read[1]
        try:
            depth = self.queue.depth()
        except Exception:  # noqa: BLE001 - see the class docstring
            return None
        if depth.get("unreachable"):
            return None
        total = queued_total(depth)
        with self._lock:
            self._read = (now, total)
        return total

    def pressed(self) -> bool:
        total = self.total()
        return total is not None and total >= self.bound


class TenantShare:
    """A per-tenant bound on queued jobs (`VIBE_TENANT_QUEUE_MAX`): one tenant's jobs, every lane
    together (waiting, running or retrying), stay under `bound`. The global bound stops every
    tenant's embedding once the whole queue is that deep; without a share below it, one tenant
    (a rollback rehydrating a whole space, a burst of reads, a promotion) could fill the queue
    alone and trip it for everyone. Rehydrations count too: they call no provider, but each is
    a job that every other tenant's job waits behind. 0 = no bound.

    `room(tenant)` is read at most every `ttl` seconds per tenant (a read path asks at every
    touch); `took` adds what the caller just queued to the cached figure, so several reads
    within one `ttl` cannot each spend the same room. A queue that cannot be measured gives
    unbounded room: enqueueing then reports its own outage (as `Backpressure`)."""

    def __init__(self, queue: JobQueue, bound: int, ttl: float = 0.0, clock: Callable[[], float] = time.monotonic):
        self.queue = queue
        self.bound = bound
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._read: dict[str, tuple[float, int]] = {}  # tenant -> (when, jobs)

    def room(self, tenant: str) -> int | None:
        """How many more jobs `tenant` may queue now (None: no bound)."""
        if self.bound <= 0:
            return None
        now = self.clock()
        with self._lock:
            seen = self._read.get(tenant)
            if seen is not None and now - seen[0] < self.ttl:
                return max(0, self.bound - seen[1])
        try:
            depth = self.queue.depth(tenant)
        except Exception:  # noqa: BLE001 - see the class docstring
            return None
        if depth.get("unreachable"):
            return None
        jobs = queued_total(depth)
        with self._lock:
            if len(self._read) > 10_000:  # tenants come and go: never an unbounded map
                self._read.clear()
            self._read[tenant] = (now, jobs)
        return max(0, self.bound - jobs)

    def took(self, tenant: str, n: int) -> None:
        if n <= 0 or self.bound <= 0:
            return
        with self._lock:
            seen = self._read.get(tenant)
            if seen is not None:
                self._read[tenant] = (seen[0], seen[1] + n)
