"""extract_key_info driven exactly as its own manual writes the calls: `extract_key_info(query,
materials, topK)` with no other argument, over stdio and over streamable HTTP (official MCP
client), the caller named by `Authorization: Bearer <identity>@<token>`.

Each test fails on one promise: the call works without task_id (HTTP: the identity is the task,
the key the user; stdio: VIBE_MCP_KEY's identity, else the default task) while one user's or
task's materials never reach another; the tool is registered behind its feature flag;
`topK` is optional with default 5 and must be in (0, 20]; the three metric names carry a tenant
label only on their own operator endpoint, never on /metrics; one call's chunks are committed
together (a failure mid-way leaves nothing behind); chunks past the tenant's per-minute
embedding budget are refused with a stable code, never left unembedded in silence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from shared.config import Settings
from shared.tenant_metrics import OTHER, TenantMetrics, pseudonym
from tests.mcp.support import McpClient, http, stdio

LAUNCH = "Launch is on March 10.\n\nThe budget is small."
PARAS = [f"Note {i}: the walrus number {i} rests on the ice floe." for i in range(8)]


def _contexts(c: McpClient, args: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    return c.extract(args)


def _error(c: McpClient, args: dict[str, Any]) -> dict[str, Any]:
    err, body = c.call("extract_key_info", args)
    assert err, body
    return dict(body["error"])


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("seed004")) / "data", env={"VIBE_MCP_TENANT_METRICS": "hashed"}) as s:
        yield s


# --- identity and isolation over HTTP ----------------------------------------------------------


def test_http_seed_call_takes_the_task_from_the_identity_header(srv: Served) -> None:
    a, b = http(srv.base, "plan-a@k-alice"), http(srv.base, "plan-b@k-alice")
    bob, plain = http(srv.base, "plan-a@k-bob"), http(srv.base, "k-alice")
    try:
        got, facts = _contexts(a, {"query": "When is the launch?", "materials": LAUNCH, "topK": 1})
        assert got == ["Launch is on March 10."]
        assert (facts["task_id"], facts["task_from"], facts["topK"]) == ("plan-a", "identity", 1)
        # another task of the same user: plan-a's chunks never come back, even with topK 20
        got, facts = _contexts(b, {"query": "When is the launch?", "materials": "Kites fly in April.", "topK": 20})
        assert got == ["Kites fly in April."] and facts["task_id"] == "plan-b"
        # the same task name under another user (key): a task of its own
        got, _ = _contexts(bob, {"query": "When is the launch?", "materials": "Bob plants tulips.", "topK": 20})
        assert got == ["Bob plants tulips."]
        # a plain key and no task_id: the default task, which holds none of plan-a's chunks
        got, facts = _contexts(plain, {"query": "When is the launch?", "materials": "Owls hunt at night.",
                                       "topK": 20})
        assert got == ["Owls hunt at night."] and (facts["task_id"], facts["task_from"]) == ("default", "default")
        # plan-a again, with new materials: its first chunks are still there (and deduplicated)
        got, facts = _contexts(a, {"query": "When is the launch?", "materials": "Launch is on March 10.",
                                   "topK": 20})
        assert set(got) == {"Launch is on March 10.", "The budget is small."}
        assert (facts["ingested_chunks"], facts["duplicate_chunks"]) == (0, 1)
    finally:
        for c in (a, b, bob, plain):
            c.close()


def test_an_identity_with_an_unknown_key_is_refused(srv: Served) -> None:
    r = httpx.post(f"{srv.base}/mcp", headers={"Authorization": "Bearer plan-a@k-nobody",
                                               "Accept": "application/json, text/event-stream"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


# --- the contract: schema, defaults, limits ------------------------------------------------------


def test_schema_and_validation_limits_are_the_manuals(srv: Served) -> None:
    c = http(srv.base, "limits@k-alice")
    try:
        schema = c.schemas()["extract_key_info"]
        assert set(schema["required"]) == {"query", "materials"}
        top_k = schema["properties"]["topK"]
        assert (top_k["type"], top_k["default"], top_k["minimum"], top_k["maximum"]) == ("integer", 5, 1, 20)
        materials = "\n\n".join(PARAS)
        got, facts = _contexts(c, {"query": "walrus ice floe", "materials": materials})
        assert facts["topK"] == 5 and len(got) == 5  # topK omitted: 5 of the 8 chunks
        got, _ = _contexts(c, {"query": "walrus ice floe", "materials": materials, "topK": 20})
        assert sorted(got) == sorted(PARAS)
        for bad in (0, -1, 21):
            assert _error(c, {"query": "q", "materials": "m", "topK": bad})["code"] == "invalid_params"
        assert _error(c, {"query": "  ", "materials": "m"})["code"] == "invalid_params"
        assert _error(c, {"query": "q", "materials": " \n\n "})["code"] == "invalid_params"
        assert _error(c, {"query": "q", "materials": "x" * 200_001})["code"] == "payload_too_large"
        assert _error(c, {"materials": "m"})["code"] == "invalid_params"  # query is required
    finally:
        c.close()


# --- metrics -------------------------------------------------------------------------------------


def test_metrics_carry_a_tenant_label_only_on_the_operator_endpoint(srv: Served) -> None:
    c = http(srv.base, "metrics@k-alice")
    try:
        _contexts(c, {"query": "When is the launch?", "materials": LAUNCH})
        _error(c, {"query": "q", "materials": "m", "topK": 0})
    finally:
        c.close()
    tenants = httpx.get(f"{srv.base}/metrics/tenants", timeout=30).text
    label = pseudonym("ta")
    assert re.search(rf'tool_calls_total{{outcome="ok",tenant="{label}",tool="extract_key_info"}} [1-9]', tenants)
    for name in ("embedding_latency_seconds_count", "bm25_latency_seconds_count"):
        assert re.search(rf'{name}{{.*tenant="{label}".*}} [1-9]', tenants), name
    assert 'tenant="ta"' not in tenants  # hashed: the tenant's name is not shown
    general = httpx.get(f"{srv.base}/metrics", timeout=30).text
    assert re.search(r'tool_calls_total{outcome="ok",tool="extract_key_info"} [1-9]', general)
    assert "tenant=" not in general  # /metrics never carries a tenant label


def test_tenant_metrics_off_records_nothing_and_labels_are_bounded() -> None:
    m = TenantMetrics()
    m.configure(Settings(mcp_tenant_metrics="off"))
    m.tool_call("extract_key_info", "ok", "ta")
    assert b"tenant=" not in m.exposition()
    m.configure(Settings(mcp_tenant_metrics="name", mcp_tenant_metrics_max_tenants=2))
    for t in ("t1", "t2", "t3", "t4"):
        m.tool_call("extract_key_info", "ok", t)
    text = m.exposition().decode()
    assert 'tenant="t1"' in text and 'tenant="t2"' in text and 'tenant="t3"' not in text
    assert re.search(rf'tenant="{OTHER}",tool="extract_key_info"}} 2\.0', text)


def test_tenant_metrics_endpoint_is_404_when_off(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from services.core.keyring import KeyRing
    from services.wiring import build, create_app

    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=16))
    try:
        with TestClient(create_app(c, KeyRing([]))) as client:
            r = client.get("/metrics/tenants")
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    finally:
        c.store.close()


# --- stdio ---------------------------------------------------------------------------------------


def test_stdio_seed_call_uses_the_sessions_identity_or_the_default_task(tmp_path: Path) -> None:
    plain = stdio(tmp_path / "data")
    try:
        got, facts = _contexts(plain, {"query": "When is the launch?", "materials": LAUNCH, "topK": 1})
        assert got == ["Launch is on March 10."] and (facts["task_id"], facts["task_from"]) == ("default", "default")
    finally:
        plain.close()
    named = stdio(tmp_path / "data", key="plan-x@k-alice")
    try:
        got, facts = _contexts(named, {"query": "When is the launch?", "materials": "Kites fly in April.",
                                       "topK": 20})
        assert got == ["Kites fly in April."]  # the default task's launch chunks stay apart
        assert (facts["task_id"], facts["task_from"]) == ("plan-x", "identity")
        # the session's identity names the same task as an explicit task_id
        got, facts = _contexts(named, {"query": "kites", "materials": "Kites fly in April.", "task_id": "plan-x"})
        assert got == ["Kites fly in April."] and facts["duplicate_chunks"] == 1
    finally:
        named.close()


def test_feature_flag_unregisters_the_tool(tmp_path: Path) -> None:
    off = stdio(tmp_path / "data", VIBE_MCP_EXTRACT_KEY_INFO_ENABLED="0")
    try:
        assert "extract_key_info" not in off.tools() and "search" in off.tools()
        err, _ = off.call("extract_key_info", {"query": "q", "materials": "m"})
        assert err
    finally:
        off.close()


# --- atomic ingestion and the embedding budget ---------------------------------------------------


def test_a_failure_mid_way_leaves_nothing_behind(tmp_path: Path) -> None:
    materials = "\n\n".join(f"Fact {i}: the lighthouse keeper counts gull {i}." for i in range(40))
    with OpenAIProtocolServer(dim=32) as api:
        sizes: list[int] = []
        answer = api._answer

        def second_request_fails(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            sizes.append(len(texts))
            if fail["on"] and len(sizes) > fail["after"] + 1:  # the first batch of chunks lands, the next fail
                return 500, {"error": {"message": "injected", "type": "server_error"}}, {}
            return answer(body)

        fail = {"on": True, "after": 10**6}
        api._answer = second_request_fails  # type: ignore[method-assign]
        c = stdio(tmp_path / "data", VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=api.base_url,
                  VIBE_OPENAI_API_KEY="x", VIBE_BREAKER_FAILURES="1000", VIBE_EXTRACT_EMBED_BACKOFF_SECONDS="0.01")
        try:
            fail["after"] = len(sizes)  # what the server sent at start-up (its probe) does not count
            err = _error(c, {"query": "lighthouse gull", "materials": materials})
            assert err["code"] == "embedder_unavailable"
            mine = sizes[fail["after"]:]
            assert mine[0] == 32 and max(mine) <= 32  # at most 32 chunks per embeddings request
            fail["on"] = False
            # none of the 40 chunks was left behind: the same task sees only what it is sent now,
            # and sending the 40 again stores all 40 as new
            got, facts = _contexts(c, {"query": "lighthouse gull", "materials": "Gulls nest on cliffs.", "topK": 20})
            assert got == ["Gulls nest on cliffs."]
            got, facts = _contexts(c, {"query": "lighthouse gull", "materials": materials, "topK": 20})
            assert facts["ingested_chunks"] == 40 and len(got) == 20 and "not_embedded" not in facts
        finally:
            c.close()


def test_chunks_past_the_per_minute_budget_wait_or_are_refused_never_left_unembedded(tmp_path: Path) -> None:
    c = stdio(tmp_path / "data", VIBE_PER_TENANT_PER_MIN="30")  # 30 a minute: one token every 2 s
    try:
        first = "\n\n".join(f"First {i}: the walrus {i} rests on the ice floe." for i in range(28))
        got, facts = _contexts(c, {"query": "walrus", "materials": first, "topK": 20})
        assert facts["ingested_chunks"] == 28 and "not_embedded" not in facts
        # 4 more with 2 left: the call waits for the bucket (about 4 s, within the 5 s allowed)
        more = "\n\n".join(f"More {i}: the gannet {i} dives." for i in range(4))
        got, facts = _contexts(c, {"query": "gannet dives", "materials": more, "topK": 4})
        assert facts["ingested_chunks"] == 4 and len(got) == 4 and all("gannet" in g for g in got)
        # 20 more with none left would need 40 s: refused at once, with the wait it needs
        later = "\n\n".join(f"Later {i}: the seal {i} hunts herring." for i in range(20))
        err = _error(c, {"query": "seal herring", "materials": later, "topK": 20})
        assert err["code"] == "rate_limited" and err["details"]["needed"] == 20
        assert err["details"]["available"] < 20 and err["details"]["retry_after_seconds"] > 5
        # nothing of the refused call was stored: re-sending stored chunks (no new one, so no
        # budget needed) finds none of them
        got, facts = _contexts(c, {"query": "seal hunts herring", "materials": more, "topK": 20})
        assert facts["ingested_chunks"] == 0 and not [g for g in got if "seal" in g]
        # more chunks than the budget holds in a minute can never fit: said so
        many = "\n\n".join(f"Many {i}: the puffin {i} carries fish." for i in range(31))
        err = _error(c, {"query": "puffin", "materials": many})
        assert err["code"] == "payload_too_large" and err["details"]["per_minute"] == 30
    finally:
        c.close()
