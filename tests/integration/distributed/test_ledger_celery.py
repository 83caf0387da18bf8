"""The provider-call ledger in the distributed shape: PostgreSQL as the store of record, a
Celery worker process embedding, the recording OpenAI-protocol provider answering 500 and 429
before it answers. Every request the provider saw has its rows, written by the worker (the 429
through the job layer's postponement, the 500 through its retry), and GET /semantic/usage
agrees with the ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.celery_worker import CeleryProcess, start_worker
from harness.redis_server import RedisServer
from harness.server import Served
from tests.integration.distributed.conftest import RecordingProvider, celery_env, wait_for

BODY = " Measurements of heat transfer in hypersonic flow over blunt bodies at high Mach number."


@pytest.fixture
def rig(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Served, RecordingProvider]]:
    provider = RecordingProvider(dim=32)
    redis_srv = RedisServer(tmp_path / "redis").start()
    env = celery_env(redis_srv.url, tmp_path / "data", VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL="",
                     VIBE_EMBED_MODEL="test-embed", VIBE_STORE="postgres", VIBE_POSTGRES_URL=postgres_url,
                     VIBE_POSTGRES_POOL_SIZE="4", VIBE_BREAKER_FAILURES="5")
    worker: CeleryProcess | None = None
    app: Served | None = None
    with provider:
        env["VIBE_OPENAI_BASE_URL"] = provider.base_url
        try:
            app = Served(tmp_path / "data", env=env)
            worker = start_worker(env, tmp_path / "logs")
            yield app, provider
        finally:
            if worker is not None:
                worker.stop()
            if app is not None:
                app.stop()
            redis_srv.stop()


def _ledger(app: Served) -> list[dict[str, Any]]:
    r = app.call("GET", "/semantic/ledger", "k-admin-a", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return list(r.json()["rows"])


def test_the_worker_ledgers_every_call_the_provider_saw(rig: tuple[Served, RecordingProvider]) -> None:
    app, provider = rig
    provider.fail_next(1, status=500)
    provider.fail_next(1, status=429, retry_after=0.3)
    for i in range(3):
        assert app.put("k-admin-a", "hx", f"x{i}", {"title": f"blunt body {i}", "body": f"x{i}" + BODY}).status_code \
            == 201
    assert app.read("k-admin-a", collection="hx", q="blunt body", semantic={"strategy": "keyword"}).status_code == 200
    for i in range(3):
        assert app.wait_status("k-admin-a", "hx", f"x{i}", "ready", timeout=60) == "ready"
    wait_for(lambda: len({r["callId"] for r in _ledger(app)}) == len(provider.embed_calls()), 30,
             "a ledger row for every provider call")
    rows = _ledger(app)
    seen = sorted(status for _, _, status in provider.embed_calls())
    by_call: dict[str, set[str]] = {}
    for r in rows:
        by_call.setdefault(r["callId"], set()).add(r["outcome"])
    assert all(len(v) == 1 for v in by_call.values())
    outcomes = sorted({"ok": 200, "embedder_unavailable": 500, "rate_limited": 429}[next(iter(v))]
                      for v in by_call.values())
    assert outcomes == seen and 500 in seen and 429 in seen
    assert {r["purpose"] for r in rows} == {"touch"} and {r["_id"] for r in rows} == {"x0", "x1", "x2"}
    usage = app.call("GET", "/semantic/usage", "k-admin-a").json()
    assert sum(d["tokens"] for d in usage["days"]) == sum(r["tokens"] for r in rows) > 0
    assert sum(d["calls"] for d in usage["days"]) == sum(1 for v in by_call.values() if v == {"ok"})
