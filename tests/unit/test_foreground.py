"""First answers before background work (shared/foreground.py): the in-process embedding
pipeline starts a batch only when no first answer is in flight, and never waits for ever."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from shared.foreground import Foreground
from shared.metrics import METRICS
from shared.model import DocKey, Principal, SemanticStatus


def test_background_goes_at_once_when_no_first_answer_is_in_flight() -> None:
    assert Foreground(5.0).yield_to_requests() is True


def test_background_waits_for_the_first_answer_in_flight_then_goes() -> None:
    gate = Foreground(30.0)
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def request() -> None:
        with gate.serving():
            inside.set()
            release.wait(30)
            order.append("answer")

    t = threading.Thread(target=request)
    t.start()
    inside.wait(30)
    bg = threading.Thread(target=lambda: (gate.yield_to_requests(), order.append("batch")))
    before = METRICS.background_yields._value.get()
    bg.start()
    while METRICS.background_yields._value.get() == before:  # the batch is waiting at the gate
        time.sleep(0.001)
    release.set()
    t.join(30)
    bg.join(30)
    assert order == ["answer", "batch"]


def test_a_steady_stream_of_answers_cannot_starve_the_pipeline() -> None:
    gate = Foreground(0.01)
    with gate.serving():
        assert gate.yield_to_requests() is False  # waited its bound, then went ahead
    assert Foreground(0.0).yield_to_requests() is True  # 0 never waits


def test_a_touched_document_is_embedded_after_the_first_answer_in_flight(tmp_path: Path) -> None:
    from services.planner.planner import ReadRequest
    from services.wiring import build
    from shared.adapters.memory_queue import InProcessQueue
    from shared.config import Settings

    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", foreground_max_wait_seconds=5.0))
    c.start()
    try:
        alice = Principal("t", ("user:alice",), frozenset({"read", "write"}))
        c.docs.put([c.docs.parse(alice, "c", f"d{i}", {"body": f"gearbox lubrication {i}"}) for i in range(3)])
        key = DocKey("t", "c", "d0")
        assert isinstance(c.queue, InProcessQueue)
        with c.planner.foreground.serving():  # another request's first answer is being computed
            c.planner.open(alice, ReadRequest("c", "gearbox", "keyword", limit=3))  # JSON: touches
            assert c.store.sidecar(key, c.settings.space).status == SemanticStatus.QUEUED
            time.sleep(0.3)  # room for a worker that does not wait to embed it
            assert c.store.sidecar(key, c.settings.space).status == SemanticStatus.QUEUED
        assert c.queue.wait_idle(30)
        assert c.store.sidecar(key, c.settings.space).status == SemanticStatus.READY
    finally:
        c.stop()
