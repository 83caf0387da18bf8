"""Celery beat's lifecycle tick, end to end with real processes (distributed profile):
the API (its own scheduler off), Celery workers and beat share only PostgreSQL and Redis, and
every decision below is made by the `vibe.lifecycle` task beat schedules, never by the API:

- a collection read often enough is promoted by the tick ("auto", with its figures) and its
  documents, touched or not, are embedded by the promotion backfill;
- a vector idle for VIBE_EVICT_IDLE_SECONDS is moved to the cold store by the tick (the
  worker's vibe_evictions_total counts it), and the next touch restores it from there without
  a provider call;
- with two beats and two workers, a tick in progress holds the store lease: every tick either
  beat sends meanwhile, on the other worker, is refused as `not_leader`, and none records a run
  until the first one finishes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.celery_worker import CeleryProcess, start_scheduler, start_worker
from harness.redis_server import RedisServer
from harness.server import Served, free_port
from tests.integration.distributed.conftest import RecordingProvider, celery_env, wait_for
from tests.support.prometheus_text import scrape as _scrape

ADMIN = "k-admin-a"
BODY = " about flutter margins, gust loads and the certification of composite wings"
# Six documents the busy collection's queries find, and four they never do: only the promotion
# backfill embeds those (a read touches nothing it does not find).
BUSY = ([{"_id": f"f{i}", "title": f"Flutter report {i}", "body": f"case {i}" + BODY} for i in range(6)]
        + [{"_id": f"c{i}", "title": f"Cabin note {i}", "body": f"reading lights and dimmers, row {i}"}
           for i in range(4)])
MIN_QUERIES, MIN_HITS = 4, 24  # both reached on the fourth read (6 hits each): either promotes


def _wait(check: Callable[[], bool], timeout: float, what: str, state: Callable[[], object]) -> None:
    """`wait_for`, whose failure also shows `state()` as it was at the timeout."""
    try:
        wait_for(check, timeout, what)
    except AssertionError as e:
        raise AssertionError(f"{e}; at the timeout: {state()}") from None


def _coverage(app: Served, collection: str) -> dict[str, Any]:
    return dict(app.call("GET", f"/semantic/coverage?collection={collection}", ADMIN).json())


def _modes(app: Served) -> dict[str, dict[str, Any]]:
    return {m["collection"]: m for m in app.call("GET", "/semantic/promotions", ADMIN).json()["collections"]}


def _last_tick(app: Served) -> str | None:
    return app.call("GET", "/semantic/scheduler", ADMIN).json()["lastTickAt"]  # type: ignore[no-any-return]


def _sends_ticks(beat: CeleryProcess) -> bool:
    return "Sending due task lifecycle" in beat.log()


class Stack:
    """The API and the Celery processes of one test; stops them all, beats first."""

    def __init__(self, tmp_path: Path, redis_url: str, postgres_url: str, **extra: str):
        self.tmp_path = tmp_path
        self.redis_url = redis_url
        self.extra = {"VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
                      "VIBE_COLD_DIR": str(tmp_path / "cold-volume"), **extra}
        self.procs: list[CeleryProcess] = []
        self.app: Served | None = None

    def env(self, name: str, **more: str) -> dict[str, str]:
        """Each process has a data dir of its own, as on separate hosts."""
        data = self.tmp_path / name / "data"
        return celery_env(self.redis_url, data, **{**self.extra, **more})

    def serve(self) -> Served:
        # The API never ticks: whatever changes below, a Celery task changed it.
        self.app = Served(self.tmp_path / "api" / "data", env=self.env("api", VIBE_SCHEDULER_ENABLED="false"))
        return self.app

    def worker(self, name: str) -> int:
        """A worker (one pool child) serving /metrics; returns the metrics port."""
        port = free_port()
        self.procs.append(start_worker(self.env(name, VIBE_METRICS_PORT=str(port)), self.tmp_path / "logs"))
        return port

    def beat(self, name: str) -> CeleryProcess:
        self.procs.append(start_scheduler(self.env(name), self.tmp_path / "logs"))
        return self.procs[-1]

    def stop(self) -> None:
        for p in sorted(self.procs, key=lambda p: p.command != "scheduler"):
            p.stop()
        if self.app is not None:
            self.app.stop()


@pytest.fixture
def stack_factory(redis_srv: RedisServer, postgres_url: str, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    made: list[Stack] = []

    def make(**extra: str) -> Stack:
        made.append(Stack(tmp_path, redis_srv.url, postgres_url, **extra))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def test_beat_promotes_a_busy_collection_and_evicts_an_idle_vector(stack_factory: Callable[..., Stack],
                                                                   provider: RecordingProvider) -> None:
    """Promotion: MIN_QUERIES keyword reads of `busy` (each finding six documents) make the next
    tick promote it with reason "auto" and the figures that decided it, and the promotion
    backfill embeds all ten documents, the four no read found included. Eviction: a document of
    another (lazy) collection, touched once, goes `cold` VIBE_EVICT_IDLE_SECONDS after its
    embedding, counted by the worker that ran the tick, and a touch brings it back to `ready`
    from the cold store: the provider sees no further call."""
    stack = stack_factory(
        VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=provider.base_url, VIBE_EMBED_MODEL="test-embed",
        VIBE_SCHEDULER_INTERVAL_SECONDS="1", VIBE_BACKFILL_INTERVAL_SECONDS="0.5", VIBE_USAGE_FLUSH_SECONDS="0.5",
        VIBE_PROMOTE_MIN_QUERIES=str(MIN_QUERIES), VIBE_PROMOTE_MIN_HITS=str(MIN_HITS),
        VIBE_EVICT_IDLE_SECONDS="3")
    app = stack.serve()
    port = stack.worker("worker")
    beat = stack.beat("beat")

    assert app.bulk(ADMIN, "busy", BUSY).status_code == 200
    assert _coverage(app, "busy")["ready"] == 0  # lazy: nothing embedded on write
    for _ in range(MIN_QUERIES):
        res = app.read(ADMIN, collection="busy", q="flutter report", semantic={"strategy": "keyword"})
        assert len(res.json()["results"]) == 6, res.text
    _wait(lambda: _modes(app).get("busy", {}).get("state") == "eager", 30, "beat's lifecycle tick to promote `busy`",
          lambda: f"modes {_modes(app)}, scheduler {app.call('GET', '/semantic/scheduler', ADMIN).json()}, "
                  f"beat log {beat.log()[-1000:]}")
    mode = _modes(app)["busy"]
    assert mode["manual"] is False and mode["reason"].startswith("auto:"), mode
    figures = mode["figures"]
    assert figures["minQueries"] == MIN_QUERIES and figures["minHits"] == MIN_HITS, figures
    assert figures["queries"] >= MIN_QUERIES and figures["hits"] >= MIN_HITS, figures
    _wait(lambda: _coverage(app, "busy")["ready"] == len(BUSY), 30, "the promotion backfill to embed every document",
          lambda: _coverage(app, "busy"))
    backfills = app.call("GET", "/semantic/promotions", ADMIN).json()["backfills"]
    assert [(b["collection"], b["kind"]) for b in backfills] == [("busy", "promote")], backfills
    assert app.call("GET", "/semantic/scheduler", ADMIN).json()["lastTickAt"] is not None
    assert _scrape(port)['vibe_promotions_total{action="promote"}'] == 1.0  # the worker decided it

    # Eviction: one touch embeds `quiet/x`; idle for VIBE_EVICT_IDLE_SECONDS, a tick moves it cold.
    assert app.put(ADMIN, "quiet", "x", {"title": "Quiet", "body": "hangar door seals" + BODY}).status_code == 201
    app.read(ADMIN, collection="quiet", q="hangar door seals", semantic={"strategy": "keyword"})
    assert app.wait_status(ADMIN, "quiet", "x", "ready", timeout=30) == "ready"
    calls = len(provider.embed_calls())
    _wait(lambda: app.status(ADMIN, "quiet", "x") == "cold", 30, "beat's lifecycle tick to evict the idle vector",
          lambda: _coverage(app, "quiet"))
    assert _coverage(app, "quiet")["states"]["cold"] == 1
    assert _coverage(app, "busy")["ready"] == len(BUSY)  # an eager collection is never evicted
    assert _scrape(port)["vibe_evictions_total"] >= 1.0
    assert "vibe_evictions_total 0.0" in app.call("GET", "/metrics", None).text  # not the API

    app.read(ADMIN, collection="quiet", q="hangar door seals", semantic={"strategy": "keyword"})
    assert app.wait_status(ADMIN, "quiet", "x", "ready", timeout=30) == "ready", "the touch to rehydrate"
    assert len(provider.embed_calls()) == calls, "a rehydration must not call the provider"
    wait_for(lambda: _scrape(port).get("vibe_rehydrations_total", 0.0) >= 1.0, 10,
             "the worker to count the rehydration")


def test_two_beats_and_two_workers_tick_one_at_a_time(stack_factory: Callable[..., Stack], postgres_url: str) -> None:
    """Two beats send every tick twice and two workers can run it. While the test holds a
    PostgreSQL lock on `scheduler_runs`, the first tick to take the store lease waits inside it
    (in its record of the run): every tick started meanwhile, on either worker, is refused as
    `not_leader`, none runs, and GET /semantic/scheduler's last tick does not move. Released, the
    waiting tick finishes and the ticks go on, still one at a time (one leader, the others refused)."""
    # A long visibility timeout: the tick kept waiting must not hit the task's hard time limit.
    stack = stack_factory(VIBE_SCHEDULER_INTERVAL_SECONDS="0.5", VIBE_CELERY_VISIBILITY_TIMEOUT="60")
    app = stack.serve()
    ports = [stack.worker("worker-1"), stack.worker("worker-2")]
    beats = [stack.beat("beat-1"), stack.beat("beat-2")]

    def runs(outcome: str) -> float:
        return sum(_scrape(p).get(f'vibe_scheduler_runs_total{{outcome="{outcome}"}}', 0.0) for p in ports)

    _wait(lambda: _last_tick(app) is not None and runs("ran") >= 2, 30, "the first ticks",
          lambda: f"last tick {_last_tick(app)}, ran {runs('ran')}")
    for b in beats:
        wait_for(partial(_sends_ticks, b), 10, f"{b.log_path.name} to send ticks")

    with psycopg.connect(postgres_url, autocommit=False) as conn:
        conn.execute("LOCK TABLE scheduler_runs IN EXCLUSIVE MODE")  # reads go on; record_tick waits
        refused = runs("not_leader")
        # Once ticks are refused, one is waiting in the lease; from then on nothing may run.
        _wait(lambda: runs("not_leader") >= refused + 2, 30, "a tick to wait in the lease, refusing the others",
              lambda: f"refused {runs('not_leader') - refused}, ran {runs('ran')}")
        ran, refused, last = runs("ran"), runs("not_leader"), _last_tick(app)
        wait_for(lambda: runs("not_leader") >= refused + 6, 30,
                 "ticks refused while another holds the lease (each beat sends one every 0.5 s)")
        assert runs("ran") == ran, "a tick ran while another held the lease"
        assert _last_tick(app) == last
        conn.rollback()  # the waiting tick records its run and lets the lease go

    wait_for(lambda: runs("ran") >= ran + 2 and _last_tick(app) != last, 30, "the ticks to go on")
    assert sum(_scrape(p).get('vibe_scheduler_runs_total{outcome="failed"}', 0.0) for p in ports) == 0.0
