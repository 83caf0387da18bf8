"""A query's touch does not depend on its reader: a stream
closed at its first event (a page closed, a client that wanted only the first answer) still
queues the documents its query touched, as a JSON read of the same query does. Before, the
stream stopped at its next send and the touch, which comes after the first event, never ran
for hybrid, semantic and auto reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.planner import planner as planner_module
from services.wiring import Container, build
from shared.config import ApiKey, Settings
from shared.metrics import METRICS
from shared.model import DocKey, Principal, SemanticStatus
from tests.support.in_process import UvicornThread

KEYS = [ApiKey(key="k-alice", tenant="t", principals=["user:alice"], scopes=["read", "write", "admin"])]
ALICE = Principal("t", ("user:alice",), frozenset({"read", "write", "admin"}))
SSE = {"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[Container, httpx.Client]]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                       per_tenant_per_min=1_000_000))
    served = UvicornThread(c, KEYS)
    try:
        topics = ["gearbox lubrication", "propeller blade", "wing flutter", "turbine cooling"]
        c.docs.put([c.docs.parse(ALICE, topics[i % 4].split()[0], f"d{i:02d}",
                                 {"body": f"{topics[i % 4]} note {i} " + "detail " * (i % 7)})
                    for i in range(40)])
        with httpx.Client(base_url=served.base, timeout=60) as http:
            yield c, http
    finally:
        served.stop()


def _first_event_then_leave(http: httpx.Client, collection: str, q: str, strategy: str) -> None:
    body = {"collection": collection, "q": q, "limit": 5, "semantic": {"strategy": strategy}}
    with http.stream("POST", "/v1/read", json=body, headers=SSE) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: lexical"):
                break  # leaving: the response is closed unread


def _touched(c: Container, collection: str) -> int:
    keys = [DocKey("t", collection, f"d{i:02d}") for i in range(40)]
    sides = c.store.sidecars(keys, c.settings.space)
    return sum(s.status in (SemanticStatus.QUEUED, SemanticStatus.READY) for s in sides.values())


@pytest.mark.parametrize(("strategy", "collection", "q"), [
    ("keyword", "gearbox", "gearbox lubrication"), ("hybrid", "propeller", "propeller blade"),
    ("semantic", "wing", "wing flutter"), ("auto", "turbine", "turbine cooling")])
def test_a_stream_closed_at_its_first_event_still_queues_what_its_query_touched(
        app: tuple[Container, httpx.Client], strategy: str, collection: str, q: str) -> None:
    c, http = app
    before = METRICS.left_streams.labels(outcome="touched")._value.get()
    assert _touched(c, collection) == 0
    _first_event_then_leave(http, collection, q, strategy)
    deadline = time.monotonic() + 30
    while _touched(c, collection) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _touched(c, collection) >= 5  # the page's documents, at least
    # The touch ran once (in the stream or after its reader left); a left stream is counted.
    assert METRICS.left_streams.labels(outcome="touched")._value.get() - before <= 1


def test_a_sessions_touch_runs_once(app: tuple[Container, httpx.Client]) -> None:
    c, _ = app
    from services.planner.planner import ReadRequest

    session = c.planner.open(ALICE, ReadRequest("wing", "wing flutter", "hybrid", limit=5), streaming=True)
    session.finish()  # as the finisher would, had the reader left
    queued = session.queued_by_us
    assert queued > 0 and session.touched
    session.touch()  # the stream's own step, arriving late: nothing more
    session.finish()
    assert session.queued_by_us == queued


def test_the_finisher_drops_past_its_bound_and_says_so() -> None:
    finisher = planner_module._Finisher(bound=1)
    release = threading.Event()
    dropped = METRICS.left_streams.labels(outcome="dropped")._value.get()
    assert finisher.submit(release.wait)  # occupies the one place
    assert not finisher.submit(lambda: None)  # a flood of left streams cannot grow without bound
    assert METRICS.left_streams.labels(outcome="dropped")._value.get() == dropped + 1
    release.set()
    deadline = time.monotonic() + 10
    while not finisher.submit(lambda: None):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_the_finisher_runs_below_the_request_threads() -> None:
    import os

    finisher = planner_module._Finisher()
    seen: list[int] = []
    done = threading.Event()

    def probe() -> None:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        done.set()

    assert finisher.submit(probe) and done.wait(10)
    assert seen[0] > os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
