"""Every answer carries `X-Request-Id` (errors, 401, 404, 405, 500, SSE and the MCP mount
too), error bodies carry it as `error.requestId`, every log record written while serving a
request has it, and one access-log record is written per request: never a query string or a key."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.api.request_id import MAX_CHARS, accepted_id
from services.core.keyring import KeyRing
from services.wiring import build, create_app
from shared.config import ApiKey, Settings
from shared.logging import REQUEST_ID, JsonFormatter

KEY = "k-secret-abc"
GENERATED = re.compile(r"[0-9a-f]{32}")


def _app(data_dir: Path, **settings: object) -> tuple[FastAPI, object]:
    c = build(Settings(data_dir=data_dir, embedder="hash", embed_dim=16, **settings))  # type: ignore[arg-type]
    keys = KeyRing([ApiKey(key=KEY, tenant="t1", principals=["user:a"], scopes=["read", "write", "admin"])])
    app = create_app(c, keys)

    async def boom() -> None:
        logging.getLogger("vibe.test").warning("about to fail")
        raise RuntimeError("boom")

    app.add_api_route("/boom", boom, methods=["GET"])
    return app, c


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app, c = _app(tmp_path / "data")
    with TestClient(app, raise_server_exceptions=False) as tc:
        yield tc
    c.store.close()  # type: ignore[attr-defined]


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def test_a_well_formed_caller_id_is_kept_and_anything_else_replaced() -> None:
    assert accepted_id(b"req-42.a:b_c") == "req-42.a:b_c"
    assert accepted_id(b"A" * MAX_CHARS) == "A" * MAX_CHARS
    for bad in (None, b"", b"A" * (MAX_CHARS + 1), b"has space", b"new\nline", b'quote"', "é".encode()):
        assert GENERATED.fullmatch(accepted_id(bad)), bad


def test_every_answer_carries_an_id_and_error_bodies_repeat_it(client: TestClient) -> None:
    ok = client.get("/healthz")
    assert ok.status_code == 200 and GENERATED.fullmatch(ok.headers["x-request-id"])
    assert client.get("/healthz").headers["x-request-id"] != ok.headers["x-request-id"]  # one per request
    answers = {
        401: client.post("/v1/read", json={"q": "x"}, headers={"X-Request-Id": "mine-401"}),
        404: client.get("/no/such/route", headers={"X-Request-Id": "mine-404"}),
        405: client.delete("/healthz", headers={"X-Request-Id": "mine-405"}),
        500: client.get("/boom", headers={"X-Request-Id": "mine-500"}),
        400: client.post("/v1/read", json={"limit": 0}, headers={**_auth(), "X-Request-Id": "mine-400"}),
    }
    for status, r in answers.items():
        assert r.status_code == status, (status, r.text)
        assert r.headers["x-request-id"] == f"mine-{status}"
        assert r.json()["error"]["requestId"] == f"mine-{status}", r.text
    forged = client.get("/healthz", headers={"X-Request-Id": "x" * 500})
    assert GENERATED.fullmatch(forged.headers["x-request-id"])


def test_streams_and_the_mcp_mount_carry_the_id(client: TestClient) -> None:
    client.put("/v1/collections/c/docs/d1", json={"title": "swept wing"}, headers=_auth())
    headers = {**_auth(), "Accept": "text/event-stream", "X-Request-Id": "stream-1"}
    with client.stream("POST", "/v1/read", json={"collection": "c", "q": "swept"}, headers=headers) as r:
        body = r.read().decode()
    assert r.headers["x-request-id"] == "stream-1" and "event: lexical" in body and "event: done" in body
    mcp = client.post("/mcp", json={}, headers={"X-Request-Id": "mcp-1"})
    assert mcp.status_code == 401 and mcp.headers["x-request-id"] == "mcp-1"


def test_log_records_written_while_serving_carry_the_id(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    client.get("/boom", headers={"X-Request-Id": "trace-me"})
    mine = [r for r in caplog.records if getattr(r, "requestId", None) == "trace-me"]
    names = {(r.name, r.getMessage()) for r in mine}
    assert ("vibe.test", "about to fail") in names and ("vibe.api", "unhandled error") in names
    line = json.loads(JsonFormatter().format(next(r for r in mine if r.name == "vibe.test")))
    assert line["requestId"] == "trace-me"
    outside = logging.getLogger("vibe.test").makeRecord("vibe.test", logging.INFO, "f", 1, "m", (), None)
    assert "requestId" not in json.loads(JsonFormatter().format(outside))


def test_the_formatter_writes_the_id_set_in_the_context() -> None:
    token = REQUEST_ID.set("ctx-1")
    try:
        record = logging.getLogger("x").makeRecord("x", logging.INFO, "f", 1, "m", (), None)
    finally:
        REQUEST_ID.reset(token)
    assert json.loads(JsonFormatter().format(record))["requestId"] == "ctx-1"


def _access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "vibe.access"]


def test_one_access_record_per_request_without_query_strings_or_keys(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vibe.access")
    r = client.get("/v1/collections/c/docs/missing?token=hunter2", headers={**_auth(), "X-Request-Id": "acc-1"})
    assert r.status_code == 404
    client.get("/healthz")
    records = _access(caplog)
    assert len(records) == 2
    rec = records[0]
    assert (rec.method, rec.path, rec.status, rec.tenant, rec.requestId) == (  # type: ignore[attr-defined]
        "GET", "/v1/collections/c/docs/missing", 404, "t1", "acc-1")
    assert rec.route == "/v1/collections/{collection}/docs/{doc_id:path}"  # type: ignore[attr-defined]
    assert rec.bytesOut == len(r.content) and rec.durationMs >= 0  # type: ignore[attr-defined]
    assert records[1].tenant is None  # type: ignore[attr-defined]
    # the server's records (the test client's own logger, httpx, logs the URL it asked for)
    text = "\n".join(JsonFormatter().format(x) for x in caplog.records if not x.name.startswith("httpx"))
    assert "hunter2" not in text and KEY not in text


def test_a_stream_is_logged_once_when_it_ends_with_its_whole_size(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    client.put("/v1/collections/c/docs/d1", json={"title": "swept wing"}, headers=_auth())
    caplog.set_level(logging.INFO, logger="vibe.access")
    headers = {**_auth(), "Accept": "text/event-stream"}
    with client.stream("POST", "/v1/read", json={"collection": "c", "q": "swept"}, headers=headers) as r:
        size = len(r.read())
    records = [x for x in _access(caplog) if x.path == "/v1/read"]  # type: ignore[attr-defined]
    assert len(records) == 1
    assert records[0].status == 200 and records[0].bytesOut == size  # type: ignore[attr-defined]


def test_the_access_log_can_be_turned_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app, c = _app(tmp_path / "data", access_log=False)
    caplog.set_level(logging.INFO, logger="vibe.access")
    with TestClient(app) as tc:
        r = tc.get("/healthz")
    c.store.close()  # type: ignore[attr-defined]
    assert r.headers["x-request-id"] and _access(caplog) == []
