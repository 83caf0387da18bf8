"""GET /readyz checks the store of record, both indexes and the job queue: 200 when every
required one answers, 503 naming the one that does not and why; the queue is reported but
not required (reads and writes go on while a broker is away)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.api.readiness import Check, Checker
from services.core.keyring import KeyRing
from services.wiring import Container, build, create_app
from shared.adapters.memory_queue import InProcessQueue
from shared.config import Settings
from shared.readiness import NotReady, folder_ready, reason


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=16))
    yield c
    c.store.close()


def _readyz(c: Container) -> Any:
    with TestClient(create_app(c, KeyRing([]))) as client:
        return client.get("/readyz")


def _fail(message: str) -> Any:
    def check_ready() -> None:
        raise sqlite3.OperationalError(message)
    return check_ready


def test_the_embedded_profile_is_ready(container: Container) -> None:
    r = _readyz(container)
    body = r.json()
    assert r.status_code == 200, body
    assert body["ready"] is True and body["status"] == "ready"
    assert set(body["checks"]) == {"store", "lexical", "vectors", "queue"}
    assert all(check["ok"] for check in body["checks"].values())
    assert body["embedder"] == container.embedder.model_id and body["dim"] == 16  # the fields it had before


def test_a_lexical_index_that_fails_its_check_makes_it_not_ready(container: Container,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(container.lexical, "check_ready", _fail("index folder gone"), raising=False)
    r = _readyz(container)
    err = r.json()["error"]
    assert r.status_code == 503 and err["code"] == "not_ready"
    assert err["message"] == "not ready: lexical: OperationalError: index folder gone"
    assert err["details"]["failed"] == ["lexical"]
    assert err["details"]["checks"]["lexical"]["ok"] is False
    assert err["details"]["checks"]["store"]["ok"] is True
    assert err["requestId"] == r.headers["x-request-id"]


def test_a_store_that_does_not_answer_makes_it_not_ready(container: Container,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(tenant: str | None = None) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(container.store, "change_log_head", broken)
    r = _readyz(container)
    details = r.json()["error"]["details"]
    assert r.status_code == 503 and details["failed"] == ["store"]
    assert "disk I/O error" in details["checks"]["store"]["error"]


def test_a_queue_that_fails_is_reported_but_keeps_it_ready(container: Container,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(container.queue, "check_ready", _fail("broker away"), raising=False)
    r = _readyz(container)
    queue = r.json()["checks"]["queue"]
    assert r.status_code == 200 and queue["ok"] is False and queue["required"] is False
    assert "broker away" in queue["error"]


def test_a_check_that_hangs_is_reported_and_not_started_again() -> None:
    release = threading.Event()
    started: list[int] = []

    def hang() -> None:
        started.append(1)
        release.wait(30)

    checker = Checker(timeout=0.05)
    try:
        first = checker.run([Check("lexical", hang)])["lexical"]
        second = checker.run([Check("lexical", hang)])["lexical"]
    finally:
        release.set()
    assert not first.ok and first.error is not None and "no answer" in first.error
    assert not second.ok and second.error is not None and "earlier check" in second.error
    assert started == [1]


def test_reasons_never_carry_url_credentials() -> None:
    text = reason(ConnectionError("cannot reach postgresql://vibe:hunter2@db:5432/vibe"))
    assert "hunter2" not in text and "postgresql://***@db:5432/vibe" in text
    assert len(reason(RuntimeError("x" * 1000))) <= 200


def test_an_in_process_queue_is_ready_only_while_its_workers_run() -> None:
    q = InProcessQueue(lambda jobs: None, workers=2)  # type: ignore[arg-type,return-value]
    with pytest.raises(NotReady, match="0 of 2"):
        q.check_ready()
    q.start()
    q.check_ready()
    q.stop()
    with pytest.raises(NotReady):
        q.check_ready()


def test_an_index_folder_must_be_a_usable_folder(tmp_path: Path) -> None:
    folder_ready(tmp_path / "not" / "made" / "yet")  # before the first write: its parent is looked at
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotReady, match="not a folder"):
        folder_ready(tmp_path / "file")
