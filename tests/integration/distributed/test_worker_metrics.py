"""A Celery worker serves Prometheus metrics that sum what its prefork children did: the job
counters match what the (local OpenAI-protocol) provider really embedded and survive the
children exiting, an exited child's gauges disappear, a breaker that opens in a new child shows
on the worker's /metrics, and the API process keeps its own single-process metrics."""

from __future__ import annotations

from pathlib import Path

from celery import Celery

from harness.celery_worker import celery_worker
from harness.redis_server import RedisServer
from harness.server import Served, free_port
from tests.integration.distributed.conftest import RecordingProvider, celery_env, wait_for
from tests.support.prometheus_text import scrape as _scrape
from tests.support.prometheus_text import series as _series

ADMIN = "k-admin-a"


def _ready(app: Served, collection: str) -> int:
    return int(app.call("GET", f"/semantic/coverage?collection={collection}", ADMIN).json()["ready"])


def _reindex(app: Served, collection: str, docs: list[dict[str, str]]) -> None:
    assert app.bulk(ADMIN, collection, docs).status_code == 200
    assert app.call("POST", "/semantic/reindex", ADMIN, {"collection": collection}).json()["queued"] == len(docs)


def _pool_size(control: Celery) -> int | None:
    stats = control.control.inspect(timeout=5, limit=1).stats() or {}
    return next((len(v["pool"]["processes"]) for v in stats.values()), None)


def _resize(control: Celery, size: int) -> None:
    """Shrink or grow the pool by one child through Celery's remote control (as `celery control
    pool_shrink` does), then wait until the child is really gone or there; shrinking is refused
    while every child is busy, so ask again."""
    grow = size > (_pool_size(control) or 0)
    call = control.control.pool_grow if grow else control.control.pool_shrink
    wait_for(lambda: all("ok" in r for reply in call(1, reply=True, timeout=5, limit=1) for r in reply.values()),
             20, "the worker to accept the resize")
    wait_for(lambda: _pool_size(control) == size, 20, f"a pool of {size}")


def test_worker_metrics_sum_the_childrens_work(redis_srv: RedisServer, provider: RecordingProvider,
                                               tmp_path: Path) -> None:
    # Batches of 5 spread the 30 jobs over several tasks (both pool children take some); one
    # provider failure opens a child's breaker.
    env = celery_env(redis_srv.url, tmp_path / "data", VIBE_EMBEDDER="openai",
                     VIBE_OPENAI_BASE_URL=provider.base_url, VIBE_EMBED_MODEL="test-embed",
                     VIBE_EMBED_BATCH_SIZE="5", VIBE_BREAKER_FAILURES="1", VIBE_BREAKER_COOLDOWN_SECONDS="60")
    port = free_port()
    app = Served(tmp_path / "data", env=env)
    try:
        with celery_worker({**env, "VIBE_METRICS_PORT": str(port)}, tmp_path / "logs", concurrency=2):
            _reindex(app, "notes", [{"_id": f"m{i}", "title": f"Panel buckling note {i}",
                                     "body": f"case {i} of the shell tests"} for i in range(30)])
            wait_for(lambda: _ready(app, "notes") == 30, 60, "the worker to embed every document")
            calls = [texts for _, texts, status in provider.embed_calls() if status == 200]
            m = _scrape(port)
            assert m["vibe_embed_jobs_completed_total"] == sum(len(t) for t in calls) == 30
            assert m["vibe_embed_batch_seconds_count"] == len(calls) > 1
            assert m["vibe_embed_vectors_reused_total"] == 0.0
            assert m['vibe_embedder_breaker_state{state="closed"}'] == 1.0  # one series, no pid label
            assert m.get('vibe_embedder_breaker_state{state="open"}') == 0.0
            # Gauges only the API sets are not exported as a worker's zeros.
            assert not any(k.startswith(("vibe_queue_depth", "vibe_celery_broker_messages",
                                         "vibe_explain_cache")) for k in m)

            # Both children exit cleanly (Celery's worker_process_shutdown): their breaker gauges go
            # (none is left from the main process either), their counters stay.
            control = Celery(broker=redis_srv.url)
            for size in (1, 0):
                _resize(control, size)
            wait_for(lambda: not any(k.startswith("vibe_embedder_breaker_state") for k in _scrape(port)), 20,
                     "the exited children's gauges to be dropped")
            assert _scrape(port)["vibe_embed_jobs_completed_total"] == 30.0
            _resize(control, 1)

            provider.fail_next(100, status=500)
            _reindex(app, "down", [{"_id": "d1", "title": "Outage", "body": "the provider is down"}])
            wait_for(lambda: _scrape(port).get('vibe_embedder_breaker_state{state="open"}') == 1.0, 20,
                     "the child's open breaker on the worker's /metrics")
            m = _scrape(port)
            assert m['vibe_embedder_breaker_transitions_total{to="open"}'] >= 1.0
            assert m["vibe_embed_jobs_completed_total"] == 30.0  # the failed batch embedded nothing
        # The API embedded nothing itself: its single-process counter stays at zero.
        api = _series(app.call("GET", "/metrics", None).text)
        assert api["vibe_embed_jobs_completed_total"] == 0.0
    finally:
        provider.clear()
        app.stop()
