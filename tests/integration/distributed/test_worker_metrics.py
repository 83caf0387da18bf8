"""A Celery worker serves Prometheus metrics that sum what its prefork children did."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.integration.distributed.conftest import celery_env, wait_for
from tests.support.celery_worker import celery_worker
from tests.support.redis_server import RedisServer
from tests.support.server import Served, free_port


def _sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_worker_metrics_count_the_childrens_jobs(redis_srv: RedisServer, tmp_path: Path) -> None:
    env = celery_env(redis_srv.url, tmp_path / "data")
    port = free_port()
    app = Served(tmp_path / "data", env=env)
    try:
        docs = [{"_id": f"m{i}", "title": f"Panel buckling note {i}", "body": f"case {i} of the shell tests"}
                for i in range(30)]
        assert app.bulk("k-admin-a", "notes", docs).status_code == 200
        with celery_worker({**env, "VIBE_METRICS_PORT": str(port)}, tmp_path / "logs", concurrency=2):
            assert app.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "notes"}).json()["queued"] == 30
            wait_for(lambda: app.call("GET", "/semantic/coverage?collection=notes", "k-admin-a").json()["ready"] == 30,
                     60, "the worker to embed every document")
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            assert _sample(text, "vibe_embed_jobs_completed_total") == 30.0  # summed over the children
            assert _sample(text, "vibe_embed_batch_seconds_count") is not None
        # The API embedded nothing itself: its own counter stays at zero.
        assert _sample(app.call("GET", "/metrics", None).text, "vibe_embed_jobs_completed_total") == 0.0
    finally:
        app.stop()
