"""The embedding provider fails (500, 429, hangs) under the Celery queue: retries with
backoff that honours Retry-After, 429s not counted as failures, then the circuit breaker;
reads keep working and say the semantic leg is degraded; recovery needs no manual step."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.celery_worker import CeleryProcess, start_worker
from harness.redis_server import RedisServer
from harness.server import Served
from tests.integration.distributed.conftest import RecordingProvider, celery_env, wait_for

BODY = " Measurements of heat transfer in hypersonic flow over blunt bodies at high Mach number."
MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def provider() -> Iterator[RecordingProvider]:
    with RecordingProvider(dim=32) as p:
        yield p


@pytest.fixture(scope="module")
def rig(provider: RecordingProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One API + one worker for the module (each test uses its own documents)."""
    tmp_path = tmp_path_factory.mktemp("prov")
    redis_srv = RedisServer(tmp_path / "redis").start()
    env = celery_env(redis_srv.url, tmp_path / "data", VIBE_EMBEDDER="openai",
                     VIBE_OPENAI_BASE_URL=provider.base_url, VIBE_EMBED_MODEL="test-embed",
                     VIBE_JOB_MAX_ATTEMPTS=str(MAX_ATTEMPTS), VIBE_BREAKER_FAILURES="3",
                     VIBE_BREAKER_COOLDOWN_SECONDS="1", VIBE_EMBED_TIMEOUT_SECONDS="0.5")
    app = Served(tmp_path / "data", env=env)
    worker: CeleryProcess | None = None
    try:
        worker = start_worker(env, tmp_path / "logs")
        yield app
    finally:
        provider.clear()
        if worker is not None:
            worker.stop()
        app.stop()
        redis_srv.stop()


def _touch(app: Served, doc_id: str) -> None:
    app.put("k-admin-a", "hx", doc_id, {"title": f"blunt body {doc_id}", "body": doc_id + BODY})
    r = app.read("k-admin-a", collection="hx", q=f"blunt body {doc_id}", semantic={"strategy": "keyword"})
    assert r.status_code == 200


def _calls_for(provider: RecordingProvider, doc_id: str) -> list[tuple[float, int]]:
    return [(at, status) for at, texts, status in provider.embed_calls() if any(doc_id in t for t in texts)]


def test_500s_are_retried_with_backoff_then_ready(rig: Served, provider: RecordingProvider) -> None:
    provider.fail_next(2, status=500)
    _touch(rig, "r500")
    assert rig.wait_status("k-admin-a", "hx", "r500", "ready", timeout=30) == "ready"
    calls = _calls_for(provider, "r500")
    assert [s for _, s in calls] == [500, 500, 200]
    gaps = [b[0] - a[0] for a, b in zip(calls, calls[1:], strict=False)]
    # exponential backoff with equal jitter: at least half of 0.2 s, then half of 0.4 s
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2


def test_429_waits_for_retry_after_and_is_not_counted_as_a_failure(rig: Served, provider: RecordingProvider) -> None:
    provider.fail_next(MAX_ATTEMPTS + 2, status=429, retry_after=0.4)  # more 429s than attempts
    _touch(rig, "r429")
    assert rig.wait_status("k-admin-a", "hx", "r429", "ready", timeout=30) == "ready"
    calls = _calls_for(provider, "r429")
    assert [s for _, s in calls] == [429] * (MAX_ATTEMPTS + 2) + [200]
    assert all(b[0] - a[0] >= 0.4 for a, b in zip(calls, calls[1:], strict=False))
    # 429s never opened the breaker: a semantic read right away is served, not degraded
    r = rig.read("k-admin-a", collection="hx", q="blunt body", semantic={"strategy": "hybrid"})
    assert r.json()["diagnostics"]["semantic"]["state"] != "degraded"


def _read_state(app: Served) -> tuple[int, str, str]:
    r = app.read("k-admin-a", collection="hx", q="hypersonic blunt body", semantic={"strategy": "hybrid"})
    sem = r.json()["diagnostics"]["semantic"] if r.status_code == 200 else {}
    return r.status_code, str(sem.get("state")), str(sem.get("reason"))


def test_breaker_opens_reads_degrade_and_everything_recovers(rig: Served, provider: RecordingProvider) -> None:
    _touch(rig, "base")
    assert rig.wait_status("k-admin-a", "hx", "base", "ready", timeout=30) == "ready"
    provider.hang(2.0)  # longer than the 0.5 s provider timeout: every call times out
    _touch(rig, "during")
    seen = [_read_state(rig) for _ in range(5)]
    assert all(code == 200 for code, _, _ in seen)  # reads keep working, lexically
    assert all(state == "degraded" for _, state, _ in seen), seen
    assert any("circuit open" in reason for _, _, reason in seen), seen  # the breaker, not the timeout
    before = len(provider.embed_calls())
    assert _read_state(rig)[1] == "degraded" and len(provider.embed_calls()) == before  # no provider call
    # the worker's breaker opened too: the job is postponed, not burned into `failed`
    time.sleep(1.5)
    assert rig.status("k-admin-a", "hx", "during") == "queued"

    provider.clear()  # the provider recovers; nobody touches anything
    wait_for(lambda: _read_state(rig)[1] != "degraded", 30, "reads to leave the degraded state")
    assert rig.wait_status("k-admin-a", "hx", "during", "ready", timeout=30) == "ready"
