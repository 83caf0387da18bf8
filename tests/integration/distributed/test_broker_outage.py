"""The broker goes away (redis-server stopped, and it comes back empty): reads are served
lexically with no 5xx, writes are accepted and recorded `queued`, and once Redis is back the
reconciler (Celery beat) brings every one of them to `ready` without manual steps."""

from __future__ import annotations

from pathlib import Path

from harness.celery_worker import start_scheduler, start_worker
from harness.redis_server import RedisServer
from harness.server import Served, ids
from tests.integration.distributed.conftest import celery_env, wait_for

BODY = " A survey of boundary layer transition on swept wings, with wind tunnel data."


def test_reads_and_writes_survive_a_broker_outage_and_the_reconciler_catches_up(
        redis_srv: RedisServer, tmp_path: Path) -> None:
    env = celery_env(redis_srv.url, tmp_path / "data")
    app = Served(tmp_path / "data", env=env)
    procs = []
    try:
        procs.append(start_worker(env, tmp_path / "logs"))
        procs.append(start_scheduler(env, tmp_path / "logs"))
        assert app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "eager"}).status_code == 200
        app.bulk("k-admin-a", "lazy", [{"_id": f"l{i}", "title": f"transition note {i}", "body": BODY}
                                       for i in range(5)])

        redis_srv.stop()
        written = [f"e{i}" for i in range(20)]
        r = app.bulk("k-admin-a", "eager", [{"_id": d, "title": f"swept wing {d}", "body": BODY} for d in written])
        assert r.status_code == 200 and r.json()["accepted"] == 20
        assert app.put("k-admin-a", "eager", "single", {"title": "one more", "body": BODY}).status_code in (200, 201)
        written.append("single")
        assert {app.status("k-admin-a", "eager", d) for d in written} == {"queued"}

        for strategy in ("keyword", "hybrid", "semantic", "auto"):
            rr = app.read("k-admin-a", collection="any", q="swept wing transition", semantic={"strategy": strategy})
            assert rr.status_code == 200, rr.text
            if strategy == "keyword":
                assert set(ids(rr.json()["results"])) & set(written)
        events = app.stream("k-admin-a", collection="lazy", q="transition note", semantic={"strategy": "hybrid"})
        assert events[0][0] == "lexical" and events[-1][0] == "done" and ids(events[0][1]["results"])
        assert app.status("k-admin-a", "lazy", "l0") == "none"  # budget fails closed: nothing half-queued
        for path in ("/semantic/queueDepth", "/semantic/lag", "/semantic/mismatch", "/metrics", "/readyz"):
            assert app.call("GET", path, "k-admin-a").status_code == 200, path
        assert app.call("GET", "/semantic/queueDepth", "k-admin-a").json()["broker"] == "unreachable"
        lag = app.call("GET", "/semantic/lag", "k-admin-a").json()
        assert lag["queued"] == 21 and lag["reconciler"] == {"reachable": False}

        redis_srv.start()  # same port, empty: every message and pending mark is gone
        wait_for(lambda: {app.status("k-admin-a", "eager", d) for d in written} == {"ready"}, 90,
                 "the reconciler and the workers to bring every write to ready")
        lag = app.call("GET", "/semantic/lag", "k-admin-a").json()
        assert lag["queued"] == 0 and lag["reconciler"]["requeued"] >= 1
        assert app.call("GET", "/semantic/lag", "k-admin-b").json()["reconciler"].get("requeued") is None
        mismatch = app.call("GET", "/semantic/mismatch", "k-admin-a").json()
        assert mismatch["missingVectors"] == 0 and mismatch["queuedWithoutJob"] == 0
        # and the read path queues again once the broker is back
        app.read("k-admin-a", collection="lazy", q="transition note", semantic={"strategy": "keyword"})
        wait_for(lambda: app.status("k-admin-a", "lazy", "l0") == "ready", 30, "a touch after recovery")
        assert "Traceback" not in app.log()
    finally:
        for p in procs:
            p.stop()
        app.stop()
