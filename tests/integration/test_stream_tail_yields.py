"""A stream's steps after its first event (its second answer: semantic leg, fusion, touch) yield
to other queries' first answers: they start `stream_tail_grace_seconds` after the first event is
sent and then wait while a first answer is in flight (shared/foreground.py), so a client that
reads first events back to back gets its next first answer before the previous query's rest."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse

from services.planner.planner import ReadSession
from services.wiring import Container, build
from shared.config import ApiKey, Settings
from shared.model import Principal
from tests.support.in_process import UvicornThread

KEYS = [ApiKey(key="k-alice", tenant="t", principals=["user:alice"], scopes=["read", "write"])]
ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Container, str]]:
    # A long grace and a long bound on the wait, so the test reads order, not speed.
    c = build(Settings(data_dir=Path(tmp_path_factory.mktemp("tail")) / "data", embedder="hash",
                       stream_tail_grace_seconds=0.2, foreground_max_wait_seconds=5))
    served = UvicornThread(c, KEYS)
    try:
        c.docs.put([c.docs.parse(ALICE, "c", f"d{i}", {"body": f"turbine blade inspection {i}"}) for i in range(12)])
        yield c, served.base
    finally:
        served.stop()


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "keyword"])
def test_the_rest_of_a_stream_waits_for_a_first_answer_in_flight(app: tuple[Container, str], strategy: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c, base = app
    started: list[str] = []
    complete, touch = ReadSession.complete_semantic, ReadSession.touch

    def completing(self: ReadSession) -> bool:
        started.append("complete_semantic")
        return complete(self)

    def touching(self: ReadSession) -> None:
        started.append("touch")
        touch(self)

    monkeypatch.setattr(ReadSession, "complete_semantic", completing)
    monkeypatch.setattr(ReadSession, "touch", touching)
    body = {"collection": "c", "q": f"turbine blade {strategy}", "limit": 5, "semantic": {"strategy": strategy}}
    with httpx.Client(base_url=base, timeout=30) as http, connect_sse(
            http, "POST", "/v1/read", json=body,
            headers={"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}) as es:
        events = es.iter_sse()
        assert next(events).event == "lexical"
        with c.planner.foreground.serving():  # another query's first answer is being computed
            time.sleep(0.5)  # past the grace
            assert started == []  # nothing of this query's rest has run
        rest = [e.event for e in events]
    assert rest[-1] == "done"
    assert started[:2] == ["complete_semantic", "touch"]
