"""Fixtures for the distributed profile on one machine: a private redis-server, real Celery
worker/beat processes and the served API, all on one VIBE_DATA_DIR (the SQLite store is the
system of record the API and the workers share), except in test_postgres_store.py, where
PostgreSQL is, and each process has a data dir of its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.redis_server import RedisServer
from harness.server import Served

PROBE = ["dimension probe"]  # what OpenAIEmbedder sends once at start-up


class RecordingProvider(OpenAIProtocolServer):
    """The local OpenAI-protocol server, also recording each call's inputs, time and status,
    so tests can count embedding calls (start-up probes excluded) and check the spacing."""

    def __init__(self, dim: int = 32):
        super().__init__(dim)
        self.calls: list[tuple[float, list[str], int]] = []

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        at = time.monotonic()
        status, payload, headers = super()._answer(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.calls.append((at, list(texts), status))
        return status, payload, headers

    def embed_calls(self) -> list[tuple[float, list[str], int]]:
        return [c for c in self.calls if c[1] != PROBE]


@pytest.fixture
def redis_srv(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path / "redis").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def provider() -> Iterator[RecordingProvider]:
    with RecordingProvider(dim=32) as p:
        yield p


def celery_env(redis_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    """Shared by the API and the workers: the same data dir and broker, small batches and
    short timeouts so the whole folder runs in well under three minutes."""
    env = {
        "VIBE_QUEUE": "celery", "VIBE_REDIS_URL": redis_url, "VIBE_DATA_DIR": str(data_dir),
        "VIBE_EMBEDDER": "hash", "VIBE_EMBED_DIM": "64", "VIBE_EMBED_BATCH_SIZE": "20",
        "VIBE_JOB_BACKOFF_SECONDS": "0.2", "VIBE_JOB_BACKOFF_MAX_SECONDS": "2",
        "VIBE_CELERY_VISIBILITY_TIMEOUT": "4", "VIBE_CELERY_RESTORE_INTERVAL": "1",
        "VIBE_REDIS_DOWN_BACKOFF_SECONDS": "0.5", "VIBE_RECONCILE_INTERVAL_SECONDS": "1",
        "VIBE_RECONCILE_STUCK_SECONDS": "1", "VIBE_STREAM_WAIT_SECONDS": "20",
        "VIBE_PER_TENANT_PER_MIN": "1000000",  # queue behaviour is measured here, not budgets
    }
    env.update(extra)
    return env


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stream_semantic_hit(app: Served, q: str, doc_id: str, collection: str = "reports") -> dict[str, Any]:
    """A hybrid SSE read (admin of tenant ta) that must go lexical → … → done and whose last
    `semantic` event ranks `doc_id` as a semantic match; returns that result."""
    events = app.stream("k-admin-a", collection=collection, q=q, semantic={"strategy": "hybrid"})
    names = [e for e, _ in events]
    assert names[0] == "lexical" and names[-1] == "done", names
    semantic = [d for e, d in events if e == "semantic"]
    assert semantic, names
    hit = next(r for r in semantic[-1]["results"] if r["id"] == doc_id)
    assert "semantic" in hit["matchedBy"]
    return dict(hit)
