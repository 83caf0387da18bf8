"""Per-tenant request rate limit (issue 12 finding 10): one tenant cannot starve the others.

A token bucket per tenant in the API process (VIBE_PER_TENANT_REQUESTS_PER_SECOND, burst
VIBE_PER_TENANT_REQUEST_BURST; rate 0 = off). It runs as a pure ASGI middleware in front of
every route, `/mcp` included, and knows the tenant from the bearer key (also from a
`<task>@<key>` bearer); a request without a
valid key passes through to the route, whose authentication answers 401. Over the rate:
429 `rate_limited` with `Retry-After` (whole seconds until a token is there), and the
request is not run.

The limit is per process: with N API replicas behind a balancer a tenant gets up to N times
the rate, which bounds what one tenant takes from each replica (the point: fairness between
tenants on a replica), not a global quota. Buckets are kept for tenants of configured keys
only, so their number is bounded by the key ring.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from services.api.auth import KeyRing
from services.mcp.runtime import split_identity
from shared.errors import ErrorCode, VibeError
from shared.model import Principal

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenBuckets:
    """`rate` tokens a second per key, at most `burst` saved; `take` answers 0 when a token
    was taken, else the seconds until one will be there."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._state: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        now = self._clock()
        with self._lock:
            tokens, at = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


def bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class TenantRateLimit:
    """ASGI middleware: the token bucket of the request's tenant, before the route runs."""

    def __init__(self, app: ASGIApp, keys: KeyRing, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic):
        self.app = app
        self.keys = keys
        self.buckets = TokenBuckets(rate, burst, clock) if rate > 0 else None

    def principal(self, token: str | None) -> Principal | None:
        """Whose bucket a bearer draws on: its key's, also in the `<task>@<key>` form the MCP
        tools accept (services/mcp/runtime.py): an identity prefix must not be a way around the
        limit, so it is counted against the key's tenant whether or not the route accepts it."""
        if not token:
            return None
        found = self.keys.lookup(token)
        if found is None:
            identity, key = split_identity(token)
            found = self.keys.lookup(key) if identity is not None else None
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = self.principal(bearer(scope))
        wait = self.buckets.take(principal.tenant) if principal is not None else 0.0
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        retry = max(1, math.ceil(wait))
        err = VibeError(ErrorCode.RATE_LIMITED, f"too many requests for this tenant; retry in {retry}s")
        body = orjson.dumps(err.body())
        await send({"type": "http.response.start", "status": ErrorCode.RATE_LIMITED.status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(retry).encode())]})
        await send({"type": "http.response.body", "body": body})
