"""The response check every integration test runs through (harness/openapi_responses.py,
installed on `Served.client`): it passes real answers and fails answers outside /openapi.json,
so the suite's calls are a schema test of the served app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.openapi_responses import ResponseMismatch
from harness.server import Served, served


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("contract")) / "data") as s:
        yield s


def _fake(app: Served, method: str, path: str, status: int, body: Any) -> httpx.Response:
    request = httpx.Request(method, app.base + path)
    return httpx.Response(status, json=body, request=request)


def test_the_hook_is_installed_and_passes_real_answers(app: Served) -> None:
    assert app.contract.check in app.client.event_hooks["response"]
    assert app.put("k-alice", "c", "d1", {"title": "rotor hub", "n": 1}).status_code == 201
    assert app.read("k-alice", collection="c", q="rotor", include={"fields": True, "semantic": True,
                                                                    "highlights": True}).status_code == 200
    assert app.call("POST", "/v1/collections/c/docs:mget", "k-alice", {"ids": ["d1", "x"]}).status_code == 200
    assert app.call("GET", "/v1/collections/c/docs/nope", "k-alice").status_code == 404
    assert app.call("GET", "/semantic/coverage?collection=c", "k-admin-a").status_code == 200
    assert app.call("GET", "/no/such/route", "k-alice").status_code == 404
    events = app.stream("k-alice", collection="c", q="rotor")  # each event's data checked too
    assert events[-1][0] == "done"


@pytest.mark.parametrize(("method", "path", "status", "body", "why"), [
    ("POST", "/v1/read", 200, {"results": "not a list"}, "answer does not match"),
    ("POST", "/v1/read", 200, {"results": [], "strategy": "keyword", "warming": {"queued": 0, "message": ""},
                               "diagnostics": {"strategy": "keyword"}}, "nextCursor"),  # a required field missing
    ("POST", "/v1/read", 200, {"results": [{"id": "a", "collection": "c", "score": 0.0, "matchedBy": ["keyword"],
                                            "explainId": "e"}], "strategy": "keyword", "nextCursor": None,
                               "warming": {"queued": 0, "message": ""}, "diagnostics": {"strategy": "keyword"}},
     "0.0"),  # a score outside (0, 1]
    ("POST", "/v1/read", 400, {"detail": "FastAPI's own error"}, "answer does not match"),
    ("GET", "/healthz", 302, {"status": "ok"}, "status not declared"),
    ("GET", "/v1/collections/c/docs/d", 200, ["a list"], "answer does not match"),
])
def test_the_hook_fails_answers_outside_the_contract(app: Served, method: str, path: str, status: int,
                                                     body: Any, why: str) -> None:
    with pytest.raises(ResponseMismatch, match=why):
        app.contract.check(_fake(app, method, path, status, body))


def test_event_data_is_checked_per_event(app: Served) -> None:
    app.contract.check_event("warming", {"queued": 1, "message": "Warming up… 1 results are being indexed"})
    with pytest.raises(ResponseMismatch):
        app.contract.check_event("warming", {"queued": "one"})
    with pytest.raises(ResponseMismatch, match="not declared"):
        app.contract.check_event("progress", {})
