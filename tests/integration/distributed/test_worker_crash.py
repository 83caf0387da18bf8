"""`kill -9` of a worker in the middle of a batch of 1,000 jobs: after a new worker starts,
every job completes, none is lost, no document ends with two vectors or a wrong state, and
provider calls repeat at most for the batch that was in flight."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.celery_worker import start_worker
from harness.redis_server import RedisServer
from harness.server import Served
from tests.integration.distributed.conftest import RecordingProvider, celery_env, wait_for

N, BATCH = 1000, 20


def _vector_rows(data_dir: Path) -> tuple[int, int]:
    with sqlite3.connect(data_dir / "vibe.sqlite3") as db:
        rows, hashes = db.execute("SELECT COUNT(*), COUNT(DISTINCT content_hash) FROM vectors").fetchone()
    return int(rows), int(hashes)


def test_kill9_mid_batch_loses_nothing_and_repeats_at_most_the_inflight_batch(
        redis_srv: RedisServer, provider: RecordingProvider, tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = celery_env(redis_srv.url, data, VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=provider.base_url,
                     VIBE_EMBED_MODEL="test-embed", VIBE_EMBED_BATCH_SIZE=str(BATCH))
    app = Served(data, env=env)
    workers = []
    try:
        assert app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "big"}).status_code == 200
        provider.hang(0.03)  # every batch is in flight for a while, so the kill lands mid-batch
        workers.append(start_worker(env, tmp_path / "logs"))
        docs = [{"_id": f"d{i}", "title": f"document {i}", "body": f"unique body number {i} alpha"} for i in range(N)]
        assert app.bulk("k-admin-a", "big", docs).json()["accepted"] == N  # eager: 1,000 queued jobs
        wait_for(lambda: len(provider.embed_calls()) >= 10, 60, "the first worker to be busy")
        workers[0].kill9()
        calls_before_restart = len(provider.embed_calls())
        cov = app.call("GET", "/semantic/coverage?collection=big", "k-admin-a").json()
        assert 0 < cov["states"]["ready"] < N  # really killed mid-way

        workers.append(start_worker(env, tmp_path / "logs"))
        wait_for(lambda: app.call("GET", "/semantic/coverage?collection=big", "k-admin-a").json()["ready"] == N,
                 90, "every job to complete")

        cov = app.call("GET", "/semantic/coverage?collection=big", "k-admin-a").json()
        assert cov["states"] == {**dict.fromkeys(cov["states"], 0), "ready": N}  # no wrong state
        assert _vector_rows(data) == (N, N)  # one vector per document, none twice
        mismatch = app.call("GET", "/semantic/mismatch", "k-admin-a").json()
        assert mismatch["missingVectors"] == 0 and mismatch["queuedWithoutJob"] == 0
        assert app.call("GET", "/semantic/queueDepth", "k-admin-a").json()["total"] == 0

        calls = provider.embed_calls()
        embedded = [t for _, texts, status in calls if status == 200 for t in texts]
        batches = -(-N // BATCH)
        # Redelivery repeats only what was in flight when the worker died (concurrency 1).
        assert len(calls) <= batches + 1, (len(calls), calls_before_restart)
        assert len(embedded) <= N + BATCH
        assert len(set(embedded)) == N
    finally:
        provider.clear()
        for w in workers:
            w.stop()
        app.stop()
