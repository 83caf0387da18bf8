"""Operational hardening, HTTP side, against the real app served by uvicorn: the metrics token,
`vibe_http_request_seconds{route, method, status}` counting 500s and 429s, and the per-tenant
request rate limit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.server import Served, served
from services.api.app import HTTP_LABELS

REPO = Path(__file__).resolve().parents[2]


def _counts(text: str) -> dict[tuple[str, str, str], float]:
    """(route, method, status) -> vibe_http_request_seconds_count."""
    out: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vibe_http_request_seconds_count":
                labels = sample.labels
                assert set(labels) == set(HTTP_LABELS), labels
                out[(labels["route"], labels["method"], labels["status"])] = sample.value
    return out


def test_metrics_token(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={"VIBE_METRICS_TOKEN": "scrape-secret"}) as s:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer k-admin-a"},
                        {"Authorization": "Basic scrape-secret"}):
            r = s.client.get("/metrics", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", headers
            assert "vibe_" not in r.text
        r = s.client.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
        assert r.status_code == 200 and "vibe_http_request_seconds_count" in r.text


def test_metrics_stay_open_without_a_token(server: Served) -> None:
    assert server.call("GET", "/metrics", None).status_code == 200


def test_a_server_error_is_answered_and_counted_with_its_method(tmp_path: Path) -> None:
    """A read the service cannot answer (here: the OpenSearch server is unreachable) answers a
    stable error body, `index_unavailable` with 503 (it used to reset the connection, then was an
    `internal_error` 500), and is counted under its route and method; other routes are counted
    by method too."""
    env = {"VIBE_LEXICAL": "opensearch", "VIBE_OPENSEARCH_URL": "http://127.0.0.1:9"}
    with served(tmp_path / "data", env=env) as s:
        r = s.read("k-alice", collection="c", q="rotor")
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "index_unavailable"
        assert "Traceback" not in r.text
        s.call("GET", "/v1/collections/c/docs/x", "k-alice")
        s.call("POST", "/mcp", "k-alice", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        counts = _counts(s.call("GET", "/metrics", None).text)
        assert counts[("/v1/read", "POST", "503")] == 1.0
        assert any(k[0].startswith("/v1/collections/{") and k[1:] == ("GET", "404") for k in counts)
        assert any(route == "/mcp" and method == "POST" for route, method, _ in counts)
        assert not any(route == "unmatched" for route, _, _ in counts)


def test_per_tenant_rate_limit(tmp_path: Path) -> None:
    """One token a hundred seconds after a burst of 3: the fourth request of tenant `ta` is
    refused with 429 `rate_limited` and Retry-After, and is not run; tenant `tb` is not
    affected; requests without a valid key are not counted (authentication answers them)."""
    env = {"VIBE_PER_TENANT_REQUESTS_PER_SECOND": "0.01", "VIBE_PER_TENANT_REQUEST_BURST": "3"}
    with served(tmp_path / "data", env=env) as s:
        for i in range(3):
            assert s.put("k-alice", "c", f"d{i}", {"title": "x"}).status_code == 201
        assert s.call("GET", "/v1/collections/c/docs/x", "nope").status_code == 401  # not counted
        r = s.put("k-admin-a", "c", "d3", {"title": "x"})  # same tenant, another key
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["retry-after"]) <= 100
        assert s.put("k-admin-b", "c", "d3", {"title": "x"}).status_code == 201  # tenant tb
        counts = _counts(s.call("GET", "/metrics", None).text)
    with served(tmp_path / "data") as again:  # the refused write changed nothing
        assert again.call("GET", "/v1/collections/c/docs/d3", "k-admin-a").status_code == 404
    put = [k for k in counts if k[1] == "PUT"]
    assert {k[2] for k in put} == {"201", "429"} and len({k[0] for k in put}) == 1  # one route template
    assert counts[(put[0][0], "PUT", "429")] == 1.0


@pytest.mark.parametrize("panel_metric", ["vibe_http_request_seconds"])
def test_dashboard_http_panels_use_the_histograms_labels(panel_metric: str) -> None:
    dash: dict[str, Any] = json.loads((REPO / "deploy" / "grafana" / "dashboards" / "vibe-semantic.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", []) if panel_metric in t["expr"]]
    assert exprs
    used = set()
    for expr in exprs:
        for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            used |= {g.strip() for g in group.split(",")}
    assert "method" in used and used <= {*HTTP_LABELS, "le"}


def test_answers_to_a_keyed_request_are_never_stored(server: Served) -> None:
    """What one key was shown (documents, results, streams, even its errors) must not be kept by
    a browser or a proxy for the next caller: `Cache-Control: no-store` on every keyed answer."""
    server.put("k-alice", "cache", "d1", {"title": "cached rotor"})
    keyed = [
        server.call("GET", "/v1/collections/cache/docs/d1", "k-alice"),
        server.call("GET", "/v1/collections/cache/docs/missing", "k-alice"),
        server.read("k-alice", collection="cache", q="rotor"),
        server.call("GET", "/semantic/coverage", "k-alice"),  # 403: an error answer too
        server.call("GET", "/v1/collections/cache/docs/d1", "not-a-key"),
    ]
    with server.client.stream("POST", "/v1/read", json={"collection": "cache", "q": "rotor"},
                              headers={"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}) as r:
        assert r.status_code == 200
        keyed.append(r)
    for r in keyed:
        assert r.headers.get("cache-control") == "no-store", (r.request.url, r.status_code, dict(r.headers))
    assert "cache-control" not in server.call("GET", "/healthz", None).headers  # no key: nothing personal
