"""Per-tenant token bucket in Redis (distributed profile), plus the Redis plumbing the Redis
adapters share: a client with short timeouts and an outage guard.

Same semantics as `MemoryBudget`: `per_minute` tokens per tenant, refilled continuously,
`take` grants at most what is there. The refill and the take are one Lua script, so several
API processes share one bucket without races, and the clock is Redis's own (`TIME`), so
processes whose clocks disagree still agree on the level.

If Redis is down the budget fails closed (grants nothing, so nothing is enqueued that could
not be sent anyway) and never raises: the read it is part of is still answered lexically.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis

from shared.config import Settings
from shared.metrics import METRICS

log = logging.getLogger("vibe.redis")

# KEYS[1] bucket hash; ARGV capacity, rate per second, wanted (0 = just read the level).
_TAKE = """
local cap, rate, wanted = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(b[1]), tonumber(b[2])
if tokens == nil then tokens, at = cap, now end
local level = math.min(cap, tokens + math.max(0, now - at) * rate)
local granted = math.min(wanted, math.floor(level))
if wanted > 0 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(level - granted), 'at', tostring(now))
  -- a full bucket needs no key: expire once it would have refilled anyway
  if rate > 0 then redis.call('PEXPIRE', KEYS[1], math.ceil(1000 * cap / rate) + 1000) end
end
return {granted, math.floor(level - granted)}
"""

REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError)


def redis_client(settings: Settings) -> redis.Redis:
    """Short connect/read timeouts: callers sit on the read and write paths."""
    t = settings.redis_timeout_seconds
    return redis.Redis.from_url(settings.redis_url, socket_connect_timeout=t, socket_timeout=t,
                                health_check_interval=30)


class RedisOutage:
    """After a Redis error, callers skip Redis for `backoff` seconds instead of each paying a
    connect timeout; one error is logged per outage, not one per request."""

    def __init__(self, component: str, backoff: float):
        self.component = component
        self.backoff = backoff
        self._down_until = 0.0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return time.monotonic() < self._down_until

    def failed(self, e: BaseException) -> None:
        METRICS.redis_errors.labels(component=self.component).inc()
        with self._lock:
            first = self._down_until == 0.0
            self._down_until = time.monotonic() + self.backoff
        if first:
            log.warning("redis unreachable", extra={"component": self.component, "error": str(e)[:200]})

    def ok(self) -> None:
        if self._down_until:
            with self._lock:
                self._down_until = 0.0
            log.info("redis reachable again", extra={"component": self.component})


class RedisBudget:
    def __init__(self, client: redis.Redis, per_minute: int, backoff: float = 2.0, prefix: str = "vibe:budget:"):
        self.capacity = per_minute
        self.rate = per_minute / 60.0
        self.prefix = prefix
        self._script: Any = client.register_script(_TAKE)
        self.outage = RedisOutage("budget", backoff)

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisBudget:
        return cls(redis_client(settings), settings.per_tenant_per_min, settings.redis_down_backoff_seconds)

    def _run(self, tenant: str, wanted: int) -> tuple[int, int]:
        if self.outage.down:
            return 0, 0
        try:
            granted, level = self._script(keys=[self.prefix + tenant], args=[self.capacity, self.rate, wanted])
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return 0, 0
        self.outage.ok()
        return int(granted), int(level)

    def take(self, tenant: str, wanted: int) -> int:
        if wanted <= 0:
            return 0
        return self._run(tenant, wanted)[0]

    def available(self, tenant: str) -> int:
        return self._run(tenant, 0)[1]

    def reachable(self) -> bool:
        return not self.outage.down
