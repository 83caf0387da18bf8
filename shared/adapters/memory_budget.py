"""Per-tenant token bucket in memory (embedded profile; the distributed one lives in Redis)."""

from __future__ import annotations

import threading
import time


class MemoryBudget:
    """`per_minute` tokens per tenant, refilled continuously (`perTenantPerMin`)."""

    def __init__(self, per_minute: int):
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _level(self, tenant: str, now: float) -> float:
        tokens, at = self._buckets.get(tenant, (self.capacity, now))
        return min(self.capacity, tokens + (now - at) * self.rate)

    def take(self, tenant: str, wanted: int) -> int:
        if wanted <= 0:
            return 0
        with self._lock:
            now = time.monotonic()
            level = self._level(tenant, now)
            granted = min(wanted, int(level))
            self._buckets[tenant] = (level - granted, now)
            return granted

    def reachable(self) -> bool:
        return True

    def available(self, tenant: str) -> int:
        with self._lock:
            return int(self._level(tenant, time.monotonic()))
