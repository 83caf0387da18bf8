"""Per-tenant request rate limit: one tenant cannot starve the others.

A token bucket per tenant in the API process (VIBE_PER_TENANT_REQUESTS_PER_SECOND, burst
VIBE_PER_TENANT_REQUEST_BURST; rate 0 = off). It runs as a pure ASGI middleware in front of
every route, `/mcp` included, and knows the tenant from the bearer key (also from a
`<task>@<key>` bearer); a request without a
valid key passes through to the route, whose authentication answers 401. Over the rate:
429 `rate_limited` with `Retry-After` (whole seconds until a token is there), and the
request is not run.

A request costs what it asks the server to do (`RequestCost`), not one token each: were a
5,000-document bulk to cost what a GET costs, a tenant within its rate could keep the writer,
the index and the CPU busy for everyone. Cost: the body in units of
VIBE_RATE_COST_BODY_BYTES (at least 1; 16 KiB by default: about 3 MB/s of bulks per tenant at
the default rate; smaller units price bulks closer to a token per document, larger ones let
one tenant ingest faster at the others' expense),
plus (limit + k) / VIBE_RATE_COST_READ_CANDIDATES for POST /v1/read, plus
VIBE_RATE_COST_BACKFILL for admin actions that start a backfill (promote, reindex, spaces);
never more than the burst. A request is admitted while a whole token is there and charged
its cost, into debt if need be (`TokenBuckets`).

Each tenant also has at most VIBE_PER_TENANT_MAX_INFLIGHT requests running at once in the
process (`InFlight`): the others wait in the event loop, holding no thread, until one of its
answers has sent its head. Without it one tenant's parallel slow requests could take every
thread of the pool the routes run on (40), and another tenant's request waited for a thread.

The limit is per process: with N API replicas behind a balancer a tenant gets up to N times
the rate, which bounds what one tenant takes from each replica (the point: fairness between
tenants on a replica), not a global quota. Buckets are kept for tenants of configured keys
only, so their number is bounded by the key ring.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from services.core.keyring import KeyRing, split_identity
from shared.errors import ErrorCode, VibeError
from shared.model import Principal

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenBuckets:
    """`rate` tokens a second per key, at most `burst` saved. `take` admits a request while the
    bucket holds a whole token and charges it its full `cost`, into debt if need be (a cost
    over the burst counts as the burst); it answers 0 then, else the seconds until a whole
    token will be there. A large request is charged after the fact so that it is never starved
    by a stream of the tenant's small ones (it would wait for a bucket that never fills), and
    the tenant's next requests pay for it: over time a tenant gets `rate` tokens of work a second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._state: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str, cost: float = 1.0) -> float:
        cost = min(max(cost, 0.0), float(self.burst))
        now = self._clock()
        with self._lock:
            tokens, at = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
            if tokens >= 1.0:
                self._state[key] = (tokens - cost, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


READ_PATH = "/v1/read"
BACKFILL_PATHS = ("/semantic/promote", "/semantic/reindex", "/semantic/spaces")
READ_BODY_PEEK = 65_536  # a read body up to this size is read here to price its limit and k


@dataclass(frozen=True)
class RequestCost:
    """Tokens a request costs (module docstring)."""

    body_bytes: int = 16_384
    read_candidates: int = 100
    backfill: float = 50.0
    max_limit: int = 200  # VIBE_MAX_LIMIT, VIBE_MAX_K: a read asking for more is refused by its
    max_k: int = 2000     # route (400), and that refusal must not cost the tenant its whole bucket

    def of(self, method: str, path: str, length: int, read: dict[str, Any] | None = None) -> float:
        cost = max(1.0, length / self.body_bytes)
        if method == "POST" and path == READ_PATH and read is not None:
            cost += self.read_extra(read)
        if method == "POST" and path.startswith(BACKFILL_PATHS):
            cost += self.backfill
        return cost

    def read_extra(self, read: dict[str, Any]) -> float:
        """(limit + k) / read_candidates: what a read asks for, as its body says (a malformed
        one costs nothing more here: the route refuses it)."""
        sem = read.get("semantic")
        asked = [(read.get("limit"), self.max_limit), (sem.get("k") if isinstance(sem, dict) else None, self.max_k)]
        return sum(float(min(v, cap)) for v, cap in asked if isinstance(v, int) and v > 0) / self.read_candidates


class InFlight:
    """At most `cap` requests of one tenant at once (0 = no cap); the others wait in the event
    loop. Semaphores are kept for tenants of configured keys only (bounded by the key ring)."""

    def __init__(self, cap: int):
        self.cap = cap
        self._slots: dict[str, asyncio.Semaphore] = {}

    def slot(self, tenant: str) -> asyncio.Semaphore | None:
        if self.cap <= 0:
            return None
        return self._slots.setdefault(tenant, asyncio.Semaphore(self.cap))


def bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class TenantRateLimit:
    """ASGI middleware: the token bucket of the request's tenant, charged what the request
    costs, then its tenant's in-flight slot, before the route runs."""

    def __init__(self, app: ASGIApp, keys: KeyRing, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic, cost: RequestCost | None = None,
                 max_inflight: int = 0):
        self.app = app
        self.keys = keys
        self.buckets = TokenBuckets(rate, burst, clock) if rate > 0 else None
        self.cost = cost or RequestCost()
        self.inflight = InFlight(max_inflight)

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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = self.principal(bearer(scope))
        if principal is None:  # the route answers 401
            await self.app(scope, receive, send)
            return
        if self.buckets is not None:
            cost, receive = await self._price(scope, receive)
            wait = self.buckets.take(principal.tenant, cost)
            if wait > 0:
                await _refuse(send, wait)
                return
        await self._within_slot(principal.tenant, scope, receive, send)

    async def _price(self, scope: Scope, receive: Receive) -> tuple[float, Receive]:
        """The request's cost, and the `receive` the route must use (a read body read here to
        price it is handed on as it came)."""
        method, path = str(scope.get("method", "")), str(scope.get("path", ""))
        length = _content_length(scope)
        if method != "POST" or path != READ_PATH or not 0 < length <= READ_BODY_PEEK:
            return self.cost.of(method, path, length), receive
        messages, raw = await _read_body(receive)
        try:
            read = orjson.loads(raw)
        except orjson.JSONDecodeError:
            read = None
        return self.cost.of(method, path, length, read if isinstance(read, dict) else None), _replay(messages, receive)

    async def _within_slot(self, tenant: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request in one of the tenant's slots, given back when the answer's head is
        sent (a stream then goes on without one: it holds no pool thread between events)."""
        slot = self.inflight.slot(tenant)
        if slot is None:
            await self.app(scope, receive, send)
            return
        await slot.acquire()
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                slot.release()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            release()


def _content_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            raw = value.decode("latin-1").strip()
            return int(raw) if raw.isdigit() else 0
    return 0


async def _read_body(receive: Receive) -> tuple[list[Message], bytes]:
    messages: list[Message] = []
    raw = bytearray()
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        raw += message.get("body", b"")
        if not message.get("more_body", False) or len(raw) > READ_BODY_PEEK:
            break
    return messages, bytes(raw)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _refuse(send: Send, wait: float) -> None:
    retry = max(1, math.ceil(wait))
    err = VibeError(ErrorCode.RATE_LIMITED, f"too many requests for this tenant; retry in {retry}s")
    body = orjson.dumps(err.body())
    await send({"type": "http.response.start", "status": ErrorCode.RATE_LIMITED.status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry).encode())]})
    await send({"type": "http.response.body", "body": body})
