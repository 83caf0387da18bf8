"""What one tenant's work costs another inside one process, each fix on its own:
the rate limit charges by the work asked for, a tenant's in-flight requests are capped, the
in-process job queue serves tenants in turn, a bulk is stored in chunks, and the per-document
write locks are per tenant. tests/integration/test_noisy_tenant.py runs them together."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import MutableMapping
from typing import Any

import orjson
import pytest

from services.api.ratelimit import RequestCost, TenantRateLimit, TokenBuckets
from services.core.keyring import KeyRing
from services.core.overwrite import locked
from shared.adapters.memory_queue import InProcessQueue
from shared.config import ApiKey
from shared.model import DocKey, EmbedJob

# -- the weighted cost -------------------------------------------------------------------


def test_a_bulk_costs_by_its_bytes_a_get_one_token() -> None:
    cost = RequestCost(body_bytes=4096, read_candidates=100, backfill=50)
    assert cost.of("GET", "/v1/collections/c/docs/x", 0) == 1.0
    assert cost.of("PUT", "/v1/collections/c/docs/x", 3000) == 1.0
    assert cost.of("POST", "/v1/collections/c/docs:bulk", 200 * 4096) == 200.0  # about one per document


def test_a_read_costs_by_its_limit_and_k_and_a_backfill_by_its_start() -> None:
    cost = RequestCost(body_bytes=4096, read_candidates=100, backfill=50)
    small = cost.of("POST", "/v1/read", 80, {"q": "x", "limit": 10})
    large = cost.of("POST", "/v1/read", 80, {"q": "x", "limit": 100, "semantic": {"k": 500}})
    assert small == pytest.approx(1.1) and large == pytest.approx(7.0)
    absurd = cost.of("POST", "/v1/read", 80, {"q": "x", "limit": 10**9, "semantic": {"k": 10**9}})
    assert absurd == pytest.approx(1 + (200 + 2000) / 100)  # refused by the route: priced at the bounds
    assert cost.of("POST", "/semantic/reindex", 30) == 51.0
    assert cost.of("GET", "/semantic/coverage", 0) == 1.0


def test_a_large_request_is_charged_into_debt_and_the_next_ones_pay() -> None:
    clock = [0.0]
    b = TokenBuckets(rate=10.0, burst=20, clock=lambda: clock[0])
    assert b.take("a", 1000) == 0.0  # admitted on a full bucket, charged as the burst: 0 left
    assert b.take("a", 1) == pytest.approx(0.1)  # the next one waits for a whole token
    assert b.take("b", 1) == 0.0  # another tenant's bucket is its own
    clock[0] += 0.5
    assert b.take("a", 12) == 0.0  # 5 tokens: admitted, 7 in debt (a bulk is never starved)
    assert b.take("a", 1) == pytest.approx(0.8)  # ... and A's next request pays for it


def _run_through(limit: TenantRateLimit, token: str, method: str, path: str, body: bytes) -> int:
    """One request through the middleware: its status."""
    got: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(m: MutableMapping[str, Any]) -> None:
        if m["type"] == "http.response.start":
            got["status"] = int(m["status"])

    scope = {"type": "http", "method": method, "path": path, "headers": [
        (b"authorization", f"Bearer {token}".encode()), (b"content-length", str(len(body)).encode())]}
    asyncio.run(limit(scope, receive, send))
    return int(got["status"])


def _echo_app(seen: list[bytes]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        m = await receive()
        seen.append(m.get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})
    return app


KEYS = KeyRing([ApiKey(key="ka", tenant="ta", principals=["p"], scopes=["read", "write"]),
                ApiKey(key="kb", tenant="tb", principals=["p"], scopes=["read", "write"])])


def test_the_middleware_charges_a_bulk_more_than_one_token_and_hands_a_read_body_on() -> None:
    seen: list[bytes] = []
    limit = TenantRateLimit(_echo_app(seen), KEYS, rate=1.0, burst=100, clock=lambda: 0.0,
                            cost=RequestCost(body_bytes=4096))
    bulk = b"x" * (60 * 4096)  # 60 tokens
    assert _run_through(limit, "ka", "POST", "/v1/collections/c/docs:bulk", bulk) == 200
    assert _run_through(limit, "ka", "POST", "/v1/collections/c/docs:bulk", bulk) == 200  # 40 left: into debt
    # one token a request would admit a hundred
    assert _run_through(limit, "ka", "POST", "/v1/collections/c/docs:bulk", bulk) == 429
    read = orjson.dumps({"q": "x", "limit": 10})
    assert _run_through(limit, "kb", "POST", "/v1/read", read) == 200
    assert seen[-1] == read  # the read's body was priced and still reaches the route whole


def test_a_tenant_at_its_in_flight_cap_waits_the_other_runs() -> None:
    gate = asyncio.Event()
    order: list[str] = []

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        token = dict(scope["headers"])[b"authorization"].decode()[7:]
        order.append(f"start {token}")
        if token == "ka":
            await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    limit = TenantRateLimit(slow, KEYS, rate=0.0, burst=1, max_inflight=2)

    async def one(token: str) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(m: MutableMapping[str, Any]) -> None:
            return None

        await limit({"type": "http", "method": "GET", "path": "/x",
                     "headers": [(b"authorization", f"Bearer {token}".encode())]}, receive, send)

    async def run() -> None:
        a = [asyncio.create_task(one("ka")) for _ in range(3)]
        await asyncio.sleep(0.05)
        await one("kb")  # B is not behind A's three
        assert order == ["start ka", "start ka", "start kb"]  # A's third waits for a slot
        gate.set()
        await asyncio.gather(*a)
        assert order.count("start ka") == 3

    asyncio.run(run())


# -- the job queue serves tenants in turn --------------------------------------------------


def _job(tenant: str, i: int, space: str = "s") -> EmbedJob:
    return EmbedJob(DocKey(tenant, "c", f"d{i}"), space, f"h{i}", priority="bulk")


def test_the_queue_serves_tenants_in_turn_not_first_come() -> None:
    batches: list[list[str]] = []
    done = threading.Event()

    class Out:
        changed: list[DocKey] = []
        retry: list[EmbedJob] = []
        retry_after: float | None = None

    def run(batch: list[EmbedJob]) -> Out:
        batches.append([f"{j.key.tenant}{j.key.doc_id}" for j in batch])
        if sum(len(b) for b in batches) == 12:
            done.set()
        return Out()

    q = InProcessQueue(run, workers=1, batch_size=4)  # type: ignore[arg-type]
    q.enqueue([_job("a", i) for i in range(10)])  # A's backfill first ...
    q.enqueue([_job("b", i) for i in range(2)])   # ... then B's two jobs
    assert q.depth("b")["bulk"] == 2 and q.depth("a")["bulk"] == 10
    q.start()
    try:
        assert done.wait(10)
    finally:
        q.stop()
    assert batches[0] == ["ad0", "bd0", "ad1", "bd1"]  # FIFO: B only after A's ten (third batch)
    assert [j for b in batches for j in b if j.startswith("a")] == [f"ad{i}" for i in range(10)]


def test_a_batch_keeps_one_space_across_tenants() -> None:
    from shared.adapters.memory_queue import _Lane

    lane = _Lane()
    for j in (_job("a", 0, "s1"), _job("b", 0, "s2"), _job("a", 1, "s1"), _job("c", 0, "s1")):
        lane.append(j)
    first = lane.take(8)
    assert [(j.key.tenant, j.space) for j in first] == [("a", "s1"), ("c", "s1"), ("a", "s1")]
    assert [(j.key.tenant, j.space) for j in lane.take(8)] == [("b", "s2")]
    assert not lane


# -- per-tenant write locks -----------------------------------------------------------------


def test_another_tenants_bulk_holds_none_of_my_write_locks() -> None:
    bulk = [DocKey("ta", "c", f"n{i}") for i in range(5000)]  # every one of the 256 stripes
    mine = DocKey("tb", "c", "one")
    acquired = threading.Event()

    def b_writes() -> None:
        with locked([mine]):
            acquired.set()

    with locked(bulk):
        t = threading.Thread(target=b_writes)
        t.start()
        assert acquired.wait(5)  # with one table for all tenants B waited for A's whole write
        t.join()
    mine_too = threading.Event()

    def a_writes_again() -> None:
        with locked([DocKey("ta", "c", "n1")]):
            mine_too.set()

    with locked(bulk):
        t = threading.Thread(target=a_writes_again)
        t.start()
        assert not mine_too.wait(0.2)  # A's own ids still wait for A's write
    assert mine_too.wait(5)
    t.join()


# -- a bulk is stored in chunks ---------------------------------------------------------------


def test_a_bulk_is_stored_in_chunks_and_queued_once(tmp_path: Any) -> None:
    """One transaction per chunk (the writer is free in between), but one catch-up and one
    enqueue for the whole bulk: chunking must not split the embedding jobs into part-filled
    provider batches (each chunk's remainder would be a call of its own)."""
    from services.wiring import build
    from shared.config import Settings
    from shared.model import Principal

    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=16, scheduler_enabled=False,
                       workers=1, per_tenant_per_min=10_000))
    c.scheduler_thread = False
    c.start()
    try:
        assert c.lifecycle.set_mode("ta", "hot", eager=True)
        transactions: list[int] = []
        enqueued: list[int] = []
        put_docs, enqueue = c.store.put_docs, c.docs.queue.enqueue

        def counting_put(docs: Any, sidecars: Any) -> Any:
            transactions.append(len(docs))
            return put_docs(docs, sidecars)

        def counting_enqueue(jobs: Any) -> int:
            enqueued.append(len(jobs))
            return enqueue(jobs)

        c.store.put_docs = counting_put  # type: ignore[method-assign]
        c.docs.queue.enqueue = counting_enqueue  # type: ignore[method-assign]
        writer = Principal("ta", ("user:w",), frozenset({"read", "write"}))
        body = "a document long enough to embed, number {} of the bulk"
        docs = [c.docs.parse(writer, "hot", f"d{i}", {"body": body.format(i)}) for i in range(201)]
        assert c.docs.put(docs, chunk=50) == ["created"] * 201
        assert transactions == [50, 50, 50, 50, 1]
        assert enqueued == [201]
    finally:
        c.stop()
