"""The admin lane through the served app (embedded profile, real worker threads): a reindex with a
model that bills nothing (the hash model) is not held to the tenant's per-minute bucket, shows a
rate and an ETA, and answers reads meanwhile; a paid provider's reindex (the OpenAI-protocol
stand-in) is still held to the bucket; an accepted reindex survives a killed process.

Counts, not durations: a bucket of 6 documents a minute lets a metered reindex embed a handful of
documents in the minutes these tests may take, so 300 embedded documents can only have come from
the admin lane; the timeouts are generous bounds, never the assertion."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from tests.integration.distributed.conftest import wait_for

ADMIN = "k-admin-a"
BODY = " on boundary layer transition, gust loads and flutter of swept wings in a wind tunnel"
QUIET = {"VIBE_PROMOTE_MIN_QUERIES": "1000000000", "VIBE_PROMOTE_MIN_HITS": "0",
         "VIBE_BACKFILL_INTERVAL_SECONDS": "0.3"}


def docs(n: int, prefix: str = "d") -> list[dict[str, Any]]:
    return [{"_id": f"{prefix}{i:04}", "title": f"Report {prefix}{i}", "body": f"case {i}" + BODY} for i in range(n)]


def metric(app: Served, name: str) -> float:
    for line in app.call("GET", "/metrics", None).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def task(app: Served, task_id: str) -> dict[str, Any]:
    rows = app.call("GET", "/semantic/backfills", ADMIN).json()["backfills"]
    return next(t for t in rows if t["id"] == task_id)


def ready(app: Served, collection: str) -> int:
    return int(app.call("GET", f"/semantic/coverage?collection={collection}", ADMIN).json()["ready"])


def test_a_free_model_reindex_runs_past_the_bucket_shows_its_eta_and_reads_answer(tmp_path: Path) -> None:
    env = {**QUIET, "VIBE_PER_TENANT_PER_MIN": "6", "VIBE_ADMIN_LANE_AHEAD": "20"}
    with served(tmp_path / "data", env=env) as app:
        assert app.bulk(ADMIN, "lazy", docs(300)).status_code == 200
        assert app.bulk(ADMIN, "other", docs(5, "o")).status_code == 200
        assert ready(app, "lazy") == 0  # a lazy collection: nothing embedded before the reindex
        r = app.call("POST", "/semantic/reindex", ADMIN, {"collection": "lazy"})
        assert r.status_code == 202, r.text
        first = r.json()["task"]
        assert {"docsPerSecond", "etaSeconds"} <= first.keys()
        seen = [first]
        read_done: list[tuple[str, dict[str, Any]]] = []
        while seen[-1]["state"] == "running":
            if not read_done:  # a read on another collection while the reindex runs
                read_done = app.stream(ADMIN, collection="other", q="flutter report", limit=5,
                                       semantic={"strategy": "hybrid"})
            seen.append(task(app, first["id"]))
            assert len(seen) < 5000, "the reindex did not finish"
            time.sleep(0.05)
        examined = [t["examined"] for t in seen]
        assert examined == sorted(examined) and examined[-1] == 300
        pcts = [t["progressPct"] for t in seen]
        assert pcts == sorted(pcts) and pcts[-1] == 100.0
        running = [t for t in seen[1:] if t["state"] == "running" and t["examined"] > 0]
        assert running and any(t["etaSeconds"] is not None and t["docsPerSecond"] for t in running)
        assert all(t["etaSeconds"] is None or t["etaSeconds"] >= 0 for t in seen)
        assert seen[-1]["etaSeconds"] == 0.0
        wait_for(lambda: ready(app, "lazy") == 300, 120, "every document of the reindex embedded")
        assert metric(app, 'vibe_backfill_unmetered_total{kind="reindex"}') >= 300 - 6
        # the read was served while the reindex ran, and its touch was not refused for the bucket
        assert read_done[0][0] == "lexical" and read_done[-1][0] == "done", [e for e, _ in read_done]
        assert read_done[-1][1]["results"]


def test_a_paid_provider_reindex_stays_on_the_bucket(tmp_path: Path) -> None:
    with OpenAIProtocolServer(dim=32) as api:
        env = {**QUIET, "VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url,
               "VIBE_EMBED_MODEL": "test-embed", "VIBE_PER_TENANT_PER_MIN": "2"}
        with served(tmp_path / "data", env=env) as app:
            assert app.bulk(ADMIN, "lazy", docs(40)).status_code == 200
            r = app.call("POST", "/semantic/reindex", ADMIN, {"collection": "lazy"})
            assert r.status_code == 202
            task_id = r.json()["task"]["id"]
            time.sleep(3.0)  # some ten backfill steps; the bucket refills 0.1 document in that time
            sent = [t for t in api.texts if t != "dimension probe"]
            assert 1 <= len(sent) <= 2, len(sent)  # the bucket's top above the reads' share, no more
            now = task(app, task_id)
            assert now["state"] == "running" and now["examined"] < 40
            assert metric(app, 'vibe_backfill_unmetered_total{kind="reindex"}') == 0


def test_an_accepted_reindex_survives_a_killed_process(tmp_path: Path) -> None:
    slow = {**QUIET, "VIBE_PER_TENANT_PER_MIN": "6", "VIBE_ADMIN_LANE_AHEAD": "10",
            "VIBE_BACKFILL_INTERVAL_SECONDS": "0.5"}
    app = Served(tmp_path / "data", env=slow)
    try:
        assert app.bulk(ADMIN, "lazy", docs(400)).status_code == 200
        r = app.call("POST", "/semantic/reindex", ADMIN, {"collection": "lazy"})
        task_id = r.json()["task"]["id"]
        wait_for(lambda: task(app, task_id)["examined"] >= 20, 60, "the reindex under way")
        before = task(app, task_id)
        assert before["state"] == "running" and before["examined"] < 400
    finally:
        app.stop(signal.SIGKILL)
    with served(tmp_path / "data", env={**QUIET, "VIBE_PER_TENANT_PER_MIN": "6"}) as again:
        wait_for(lambda: task(again, task_id)["state"] == "done", 120, "the same task to finish after the restart")
        wait_for(lambda: ready(again, "lazy") == 400, 120, "every document embedded")
        assert task(again, task_id)["examined"] >= 400
