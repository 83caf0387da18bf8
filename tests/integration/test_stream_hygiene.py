"""SSE hygiene of `POST /v1/read`, read as raw bytes off a real socket: a
`retry:` hint first, an `id:` on every event, `: keep-alive` comments while an event is being
computed, and on an internal error a clean `error` event and a complete body (an exception used
to cut the body: the client saw a broken chunked response instead of the error)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from harness.openai_server import OpenAIProtocolServer
from harness.server import served
from services.planner.planner import ReadSession
from services.wiring import build
from shared.config import ApiKey, Settings
from tests.support.in_process import UvicornThread

HEADERS = {"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}


def _raw_stream(client: httpx.Client, body: dict[str, Any], headers: dict[str, str] = HEADERS) -> list[str]:
    """Every line of the body, read to its end (a cut body raises here)."""
    with client.stream("POST", "/v1/read", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line for line in r.iter_lines()]


def _blocks(lines: list[str]) -> list[dict[str, str]]:
    """Event blocks (comment lines dropped), each as {field: value}."""
    out: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if not line:
            if cur:
                out.append(cur)
            cur = {}
            continue
        name, _, value = line.partition(":")
        cur[name] = value.removeprefix(" ")
    if cur:
        out.append(cur)
    return out


def test_retry_first_and_an_id_on_every_event(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={"VIBE_STREAM_RETRY_MS": "2500"}) as app:
        app.bulk("k-alice", "c", [{"_id": f"d{i}", "text": f"gearbox lubrication note {i}"} for i in range(8)])
        lines = _raw_stream(app.client, {"collection": "c", "q": "gearbox lubrication", "limit": 5})
        assert lines[0] == "retry: 2500"
        blocks = _blocks(lines)
        events = [b for b in blocks if "event" in b]
        assert len(events) == len(blocks)  # the hint travels with the first event, never alone
        assert [b["event"] for b in events][0] == "lexical" and events[-1]["event"] == "done"
        assert [b["id"] for b in events] == [str(i) for i in range(1, len(events) + 1)]
        for b in events:
            json.loads(b["data"])
        # an SSE library sees exactly these events: nothing empty from the hint or a comment
        with connect_sse(app.client, "POST", "/v1/read", json={"collection": "c", "q": "gearbox"},
                         headers=HEADERS) as es:
            seen = [(sse.event, sse.id, sse.retry) for sse in es.iter_sse()]
        assert seen[0] == ("lexical", "1", 2500)
        assert all(e in ("lexical", "semantic", "warming", "done") for e, _, _ in seen), seen
        assert [i for _, i, _ in seen] == [str(i) for i in range(1, len(seen) + 1)]


@pytest.fixture
def slow_provider() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as p:
        yield p


def test_keep_alive_comments_while_an_event_is_computed(tmp_path: Path, slow_provider: OpenAIProtocolServer) -> None:
    """The provider takes 1.5 s per call: the hybrid query's vector (after the `lexical` event)
    keeps the stream silent that long, and a heartbeat of 0.2 s fills the silence."""
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": slow_provider.base_url, "VIBE_EMBED_MODEL": "m",
           "VIBE_STREAM_HEARTBEAT_SECONDS": "0.2", "VIBE_STREAM_WAIT_SECONDS": "1"}
    with served(tmp_path / "data", env=env) as app:
        app.bulk("k-alice", "c", [{"_id": f"d{i}", "text": f"bearing wear report {i}"} for i in range(4)])
        slow_provider.hang(1.5)
        lines = _raw_stream(app.client, {"collection": "c", "q": "bearing wear", "semantic": {"strategy": "hybrid"}})
        slow_provider.clear()
        first = lines.index("event: lexical")
        after = lines[first:]
        assert ": keep-alive" in after, lines[:40]
        beats = after.index(": keep-alive")
        assert any(line.startswith("event: ") for line in after[beats:])  # events follow the beats
        events = [b for b in _blocks(lines) if "event" in b]
        assert events[-1]["event"] == "done"
        assert [b["id"] for b in events] == [str(i) for i in range(1, len(events) + 1)]


class _InProcess:
    """The app on a real socket, served by uvicorn in this process: the one way to put an
    internal fault in the middle of a stream (no outside input can cause one)."""

    def __init__(self, data_dir: Path):
        keys = [ApiKey(key="k-alice", tenant="ta", principals=["user:alice"], scopes=["read", "write"])]
        self.container = build(Settings(data_dir=data_dir, embedder="hash", embed_dim=32, api_keys=keys))
        self.served = UvicornThread(self.container, keys)
        self.client = httpx.Client(base_url=self.served.base, timeout=60)

    def close(self) -> None:
        self.client.close()
        self.served.stop()


def test_an_internal_error_mid_stream_ends_with_an_error_event_and_a_complete_body(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = _InProcess(tmp_path / "data")
    try:
        h = {"Authorization": "Bearer k-alice"}
        for i in range(3):
            assert srv.client.put(f"/v1/collections/c/docs/d{i}", json={"text": f"valve seat {i}"},
                                  headers=h).status_code == 201

        def broken(self: ReadSession) -> None:
            raise RuntimeError("disk on fire: /secret/path")

        monkeypatch.setattr(ReadSession, "touch", broken)  # after the first event was sent
        lines = _raw_stream(srv.client, {"collection": "c", "q": "valve seat"}, {**h, "Accept": "text/event-stream"})
        events = [b for b in _blocks(lines) if "event" in b]
        assert [b["event"] for b in events] == ["lexical", "error"]
        assert [b["id"] for b in events] == ["1", "2"]
        assert json.loads(events[-1]["data"]) == {"code": "internal_error", "message": "internal error"}
        assert "disk on fire" not in "\n".join(lines) and "Traceback" not in "\n".join(lines)
        monkeypatch.undo()
        # the server is fine afterwards
        again = _raw_stream(srv.client, {"collection": "c", "q": "valve seat"}, {**h, "Accept": "text/event-stream"})
        assert [b["event"] for b in _blocks(again)][-1] == "done"
    finally:
        srv.close()


def test_a_400_before_the_stream_is_a_json_error(tmp_path: Path) -> None:
    with served(tmp_path / "data") as app:
        r = app.client.post("/v1/read", json={"q": "x", "filter": {"_acl": "a"}}, headers=HEADERS)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params"
