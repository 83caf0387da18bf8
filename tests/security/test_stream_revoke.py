"""An open SSE stream re-checks readability at every event (README Security): a document whose
ACL is revoked between two events is in no later event — not in a ranking (`semantic`,
`done`, with its explain id), not in a `warming` count. The stream is held after its first
event (a gate before its next step) while the test revokes, so the order is certain."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from services.planner import flow
from services.planner.session import ReadSession
from services.wiring import Container, build
from shared.config import ApiKey, Settings
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus
from tests.support.in_process import UvicornThread

KEYS = [ApiKey(key="k-alice", tenant="t", principals=["user:alice"], scopes=["read", "write"])]
ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))
BOB = Principal("t", ("user:bob",), frozenset({"read", "write"}))
SSE = {"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}
T = TypeVar("T")


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Container, httpx.Client]]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                       per_tenant_per_min=1_000_000, stream_wait_seconds=1.0, stream_tail_grace_seconds=0.0))
    served = UvicornThread(c, KEYS)
    # Jobs stay queued (no worker takes them): the touched documents stay pending, so the
    # stream's `warming` events count them.
    held: list[EmbedJob] = []
    monkeypatch.setattr(c.queue, "enqueue", lambda jobs: held.extend(jobs) or len(jobs))
    try:
        docs = [c.docs.parse(ALICE, "notes", "x", {"body": "gearbox gearbox gearbox lubrication secret plan"})]
        docs += [c.docs.parse(ALICE, "notes", f"d{i}", {"body": f"gearbox lubrication note {i}"}) for i in range(4)]
        c.docs.put(docs)
        with httpx.Client(base_url=served.base, timeout=60) as http:
            yield c, http
    finally:
        served.stop()


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: "):])


@pytest.mark.parametrize("strategy", ["hybrid", "keyword"])
def test_a_document_revoked_mid_stream_is_in_no_later_event(app: tuple[Container, httpx.Client], strategy: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    c, http = app
    gate = threading.Event()
    step = flow.after_first_answers

    def gated(session: ReadSession, run: Callable[[], T]) -> T:
        assert gate.wait(60), "the test never opened the gate"
        return step(session, run)

    monkeypatch.setattr(flow, "after_first_answers", gated)
    body = {"collection": "notes", "q": "gearbox lubrication", "limit": 10, "semantic": {"strategy": strategy}}
    later: list[tuple[str, dict[str, Any]]] = []
    with http.stream("POST", "/v1/read", json=body, headers=SSE) as r:
        assert r.status_code == 200
        events = _events(r.iter_lines())
        name, first = next(events)
        assert name == "lexical"
        assert "x" in [h["id"] for h in first["results"]]
        # bob rewrites x for himself: alice may no longer read it
        c.docs.put([c.docs.parse(BOB, "notes", "x", {
            "body": "gearbox lubrication plan for the second quarter, kept for bob alone", "_acl": ["user:bob"]})])
        gate.set()
        later = list(events)
    names = [n for n, _ in later]
    assert names[-1] == "done", names
    for n, data in later:
        assert "x" not in [h["id"] for h in data.get("results", [])], (n, data)
    # the touch queued x with the others (it ranked first): a warming count must not include it
    assert c.store.sidecar(DocKey("t", "notes", "x"), c.settings.space).status == SemanticStatus.QUEUED
    queued = c.store.sidecars([DocKey("t", "notes", f"d{i}") for i in range(4)], c.settings.space)
    readable_queued = sum(s.status == SemanticStatus.QUEUED for s in queued.values())
    for n, data in later:
        warming = data if n == "warming" else data.get("warming")
        if isinstance(warming, dict):
            assert warming["queued"] <= readable_queued, (n, warming, readable_queued)
