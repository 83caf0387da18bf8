"""A stream's steps after its first event are background work for the other requests: while
another request's first answer is in flight, they wait (shared/foreground.py), over real HTTP."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from httpx_sse import connect_sse

from services.wiring import build
from shared.config import ApiKey, Settings
from shared.model import DocKey, Principal, SemanticStatus
from tests.support.in_process import UvicornThread

KEYS = [ApiKey(key="k-alice", tenant="t", principals=["user:alice"], scopes=["read", "write"])]
ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))


def test_a_streams_tail_waits_for_the_first_answer_in_flight(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", foreground_max_wait_seconds=5.0))
    served = UvicornThread(c, KEYS)
    key = DocKey("t", "c", "d0")
    try:
        c.docs.put([c.docs.parse(ALICE, "c", f"d{i}", {"body": f"gearbox lubrication {i}"}) for i in range(3)])
        body = {"collection": "c", "q": "gearbox", "limit": 3, "semantic": {"strategy": "hybrid"}}
        headers = {"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}
        with httpx.Client(base_url=served.base, timeout=60) as http, ExitStack() as held:
            held.enter_context(c.planner.foreground.serving())  # another request's first answer
            with connect_sse(http, "POST", "/v1/read", json=body, headers=headers) as es:
                events = es.iter_sse()
                assert next(events).event == "lexical"  # first answers never wait for each other
                time.sleep(0.5)  # room for a tail that does not wait to touch
                assert c.store.sidecar(key, c.settings.space).status == SemanticStatus.NONE
                held.close()  # that answer is sent: the tail goes on
                names = [e.event for e in events]
        assert names[-1] == "done"
        assert c.store.sidecar(key, c.settings.space).status in (SemanticStatus.QUEUED, SemanticStatus.READY)
    finally:
        served.stop()
