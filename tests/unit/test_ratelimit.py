"""The per-tenant token bucket (services/api/ratelimit.py), on a fake clock."""

from __future__ import annotations

import pytest

from services.api.ratelimit import TokenBuckets
from shared.config import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_rate_per_tenant() -> None:
    clock = Clock()
    b = TokenBuckets(rate=2.0, burst=3, clock=clock)
    assert [b.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take("a") == pytest.approx(0.5)  # one token every 0.5 s
    assert b.take("b") == 0.0  # another tenant has its own bucket
    clock.now += 0.5
    assert b.take("a") == 0.0 and b.take("a") == pytest.approx(0.5)
    clock.now += 100
    assert [b.take("a") for _ in range(4)][-1] > 0  # refills to the burst, never beyond


def test_a_refused_request_spends_nothing() -> None:
    clock = Clock()
    b = TokenBuckets(rate=1.0, burst=1, clock=clock)
    assert b.take("a") == 0.0
    for _ in range(10):
        assert b.take("a") > 0
    clock.now += 1.0
    assert b.take("a") == 0.0


def test_defaults_are_generous() -> None:
    s = Settings()
    assert s.per_tenant_requests_per_second == 200 and s.per_tenant_request_burst >= 200


def _statuses(bearers: list[str]) -> list[int]:
    """The status of one request per bearer through the middleware (rate 1/s, burst 2, a clock
    that never moves)."""
    import asyncio

    from services.api.ratelimit import TenantRateLimit
    from services.core.keyring import KeyRing
    from shared.config import ApiKey

    async def ok(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    keys = KeyRing([ApiKey(key="k1", tenant="t", principals=["p"], scopes=["read"])])
    limit = TenantRateLimit(ok, keys, rate=1.0, burst=2, clock=lambda: 5.0)
    out: list[int] = []

    async def one(token: str) -> None:
        async def send(m: dict[str, object]) -> None:
            if m["type"] == "http.response.start":
                out.append(int(m["status"]))  # type: ignore[call-overload]

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]}
        await limit(scope, receive, send)

    async def run() -> None:
        for b in bearers:
            await one(b)

    asyncio.run(run())
    return out


def test_task_at_key_bearers_draw_on_their_keys_tenant() -> None:
    # a fresh task name per request (the MCP `<task>@<key>` form) gets no fresh bucket
    assert _statuses(["a@k1", "b@k1", "c@k1", "d@k1"]) == [200, 200, 429, 429]
    assert _statuses(["k1", "x@k1", "k1"]) == [200, 200, 429]
    assert _statuses(["x@nope", "y@nope", "z@nope"]) == [200, 200, 200]  # unknown: the route answers 401
