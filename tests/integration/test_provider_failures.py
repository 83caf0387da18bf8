"""The served app with an OpenAI-compatible provider that fails: retries with backoff, a
visible `failed` state when they run out, and reads that keep working and say so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, ids, served

BODY = " Notes on gust loads, flutter margins and certification tests for composite wing structures."


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


@pytest.fixture(scope="module")
def app(api: OpenAIProtocolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_JOB_BACKOFF_SECONDS": "0.1", "VIBE_JOB_MAX_ATTEMPTS": "3"}
    with served(Path(tmp_path_factory.mktemp("prov")) / "data", env=env) as s:
        yield s


def test_transient_failures_are_retried_until_ready(app: Served, api: OpenAIProtocolServer) -> None:
    app.put("k-admin-a", "w", "a", {"title": "Flutter margins", "body": "alpha" + BODY})
    before = api.requests
    api.fail_next(2, status=500)
    app.read("k-admin-a", collection="w", q="flutter margins", semantic={"strategy": "keyword"})
    assert app.wait_status("k-admin-a", "w", "a", "ready", timeout=30) == "ready"
    assert api.requests - before == 3  # two failures, one success


def test_429_is_retried_after_the_providers_delay(app: Served, api: OpenAIProtocolServer) -> None:
    app.put("k-admin-a", "w", "b", {"title": "Gust loads", "body": "beta" + BODY})
    api.fail_next(1, status=429, retry_after=1.0)
    t0 = time.monotonic()
    app.read("k-admin-a", collection="w", q="gust loads beta", semantic={"strategy": "keyword"})
    assert app.wait_status("k-admin-a", "w", "b", "ready", timeout=30) == "ready"
    assert time.monotonic() - t0 >= 1.0


def test_exhausted_retries_leave_a_visible_failed_state(app: Served, api: OpenAIProtocolServer) -> None:
    app.put("k-admin-a", "w", "c", {"title": "Certification", "body": "gamma" + BODY})
    api.fail_next(50, status=500)
    try:
        app.read("k-admin-a", collection="w", q="certification gamma", semantic={"strategy": "keyword"})
        assert app.wait_status("k-admin-a", "w", "c", "failed", timeout=30) == "failed"
        st = app.call("GET", "/semantic/status?collection=w&_id=c", "k-admin-a").json()
        assert st["reason"].startswith("embed_error")
        cov = app.call("GET", "/semantic/coverage?collection=w", "k-admin-a").json()
        assert cov["states"]["failed"] == 1 and sum(cov["skipped"].values()) == 1
    finally:
        api.clear()


def test_reads_keep_working_and_say_the_semantic_leg_is_degraded(app: Served, api: OpenAIProtocolServer) -> None:
    api.fail_next(50, status=503)
    try:
        r = app.read("k-admin-a", collection="w", q="composite wing certification", semantic={"strategy": "hybrid"})
        assert r.status_code == 200
        body = r.json()
        assert body["diagnostics"]["semantic"]["state"] == "degraded"
        assert "embedder_unavailable" in body["diagnostics"]["semantic"]["reason"]
        assert set(ids(body["results"])) >= {"a", "b", "c"}
    finally:
        api.clear()
    r = app.read("k-admin-a", collection="w", q="composite wing certification", semantic={"strategy": "hybrid"})
    assert r.json()["diagnostics"]["semantic"]["state"] in ("ready", "warming")
