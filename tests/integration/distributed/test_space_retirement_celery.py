"""Activation in the API, the retired space's move to the cold store in a Celery worker: the
API process (its scheduler thread off) only cuts over; Celery beat's backfill task, run by a
separate worker process on the same data dir, moves the vectors in batches until GET
/semantic/spaces shows the retirement done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.celery_worker import start_scheduler, start_worker
from harness.redis_server import RedisServer
from harness.server import Served
from tests.integration.distributed.conftest import celery_env, wait_for

BODY = " about flutter margins, gust loads and the certification of composite wings"
DOCS = [{"_id": f"d{i}", "title": f"Report {i}", "body": f"case {i}" + BODY} for i in range(6)]


def test_the_retired_space_moves_to_the_cold_store_in_a_celery_worker(redis_srv: RedisServer,
                                                                        tmp_path: Path) -> None:
    env = celery_env(redis_srv.url, tmp_path / "data", VIBE_EVICT_BATCH="2", VIBE_BACKFILL_INTERVAL_SECONDS="0.5",
                     VIBE_SCHEDULER_INTERVAL_SECONDS="3600")
    app = Served(tmp_path / "data", env={**env, "VIBE_SCHEDULER_ENABLED": "false"})  # the API never moves
    worker = beat = None

    def spaces() -> dict[str, dict[str, Any]]:
        return {s["space"]: s for s in app.call("GET", "/semantic/spaces", "k-admin-a").json()["spaces"]}

    try:
        worker = start_worker(env, tmp_path / "logs")
        beat = start_scheduler(env, tmp_path / "logs")
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        app.read("k-admin-a", collection="r", q="flutter report case", semantic={"strategy": "keyword"})
        wait_for(lambda: spaces()["core"]["coverage"]["ready"] == len(DOCS), 60, "core to embed")
        assert app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "v2", "model": "hash:v1@32"}).status_code \
            == 202
        wait_for(lambda: spaces()["v2"]["coverage"]["ready"] == len(DOCS), 60, "the migration to v2")

        out = app.call("POST", "/semantic/spaces/v2/activate", "k-admin-a", {"force": True})
        assert out.status_code == 200, out.text
        body = out.json()
        assert body["retired"] == "core" and body["retiredToCold"] + body["retiredToMove"] == len(DOCS)
        wait_for(lambda: spaces()["core"]["retiring"]["state"] == "done", 60,
                 "the worker to move core's vectors to the cold store")
        core = spaces()["core"]
        assert core["retiring"] == {"toMove": 0, "moved": len(DOCS), "state": "done"}
        assert core["cold"]["vectors"] == len(DOCS)
        assert "vibe_retired_vectors_moved_total 0.0" in app.call("GET", "/metrics", None).text  # not the API
        res = app.read("k-admin-a", collection="r", q="flutter", semantic={"strategy": "semantic"}).json()
        assert res["diagnostics"]["space"] == "v2" and len(res["results"]) == len(DOCS)
    finally:
        for p in (beat, worker):
            if p is not None:
                p.stop()
        app.stop()
