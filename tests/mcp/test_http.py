"""The tools over streamable HTTP at a served app's /mcp: the bearer key decides tenant and
principals; ACL/tenant/task leak tests; inner_voice.retrieve end to end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, served
from tests.mcp.support import McpClient, http

LONG = " ".join(f"Federation coordination failed at step {i} because quorum was lost." for i in range(30))


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("mcphttp"))
    (root / "docs").mkdir()
    (root / "docs" / "alpha.md").write_text("# Alpha\n\nShared alpha handbook about federation quorum.\n")
    env = {"VIBE_ENABLE_INNER_VOICE": "1", "VIBE_MCP_REINDEX_ROOTS": f'["{root}"]'}
    with served(root / "data", env=env) as s:
        s.docs_root = root / "docs"  # type: ignore[attr-defined]
        _seed(s)
        yield s


def _seed(s: Served) -> None:
    for key, col in [("k-admin-a", "kg"), ("k-admin-a", "thoughts"), ("k-admin-a", "kb")]:
        assert s.call("POST", "/semantic/promote", key, {"collection": col}).status_code == 200
    kg = [{"_id": f"e{i}", "text": f"Federation coordination entity {i} quorum", "kind": "entity"} for i in range(8)]
    kg += [{"_id": "o1", "text": "Federation coordination observation quorum lost", "kind": "observation"},
           {"_id": "dup", "text": "Quorum loss stalls federation coordination."},
           {"_id": "secret", "text": "Federation coordination secret quorum plan", "_acl": ["user:alice"]}]
    th = [{"_id": f"t{i}", "text": f"Thought {i} on federation coordination quorum", "origin": o}
          for i, o in enumerate(["human", "tool", "model", "logged", "human", "human"])]
    th += [{"_id": "priv", "text": "Private federation coordination quorum diary", "is_private": True},
           {"_id": "tagged", "text": "Federation coordination quorum tagged note", "tags": ["ops"]},
           {"_id": "dup2", "text": "Quorum  loss stalls Federation coordination.", "origin": "human"},
           {"_id": "long", "text": LONG, "origin": "tool"}]
    kb = [{"_id": "open", "content": "Federation quorum runbook for everyone"},
          {"_id": "alice-only", "content": "Federation quorum alice private runbook", "_acl": ["user:alice"]}]
    for col, docs in (("kg", kg), ("thoughts", th), ("kb", kb)):
        assert s.bulk("k-admin-a", col, docs).status_code == 200
        for d in docs:
            assert s.wait_status("k-admin-a" if "_acl" not in d else "k-alice", col, d["_id"], "ready") == "ready"
    assert s.call("POST", "/semantic/promote", "k-admin-b", {"collection": "kg"}).status_code == 200
    assert s.bulk("k-admin-b", "kg", [{"_id": "b1", "text": "Federation coordination quorum tenant b"}]
                  ).status_code == 200
    # inner_voice ranks by vectors only: wait for the embed, or the test races the worker
    assert s.wait_status("k-admin-b", "kg", "b1", "ready") == "ready"


@pytest.fixture(scope="module")
def alice(srv: Served) -> Iterator[McpClient]:
    c = http(srv.base, "k-alice")
    yield c
    c.close()


@pytest.fixture(scope="module")
def bob(srv: Served) -> Iterator[McpClient]:
    c = http(srv.base, "k-bob")
    yield c
    c.close()


def test_no_or_unknown_key_is_401_in_contract_shape(srv: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for key in (None, "nope"):
        r = srv.call("POST", "/mcp", key, body, headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_scope_and_tenant_come_from_the_key(srv: Served, bob: McpClient) -> None:
    assert bob.error("reindex", {"path": str(srv.docs_root)}) == "forbidden"  # type: ignore[attr-defined]
    admin_b = http(srv.base, "k-admin-b")
    try:
        out = admin_b.ok("inner_voice.retrieve", {"query": "federation coordination quorum", "top_k": 10})
        assert {s["id"] for s in out["snippets"]} == {"kg:b1"}
        assert out["diagnostics"]["kg_candidates"] == 1 and out["diagnostics"]["thought_candidates"] == 0
    finally:
        admin_b.close()


def test_search_never_returns_or_counts_outside_acl(alice: McpClient, bob: McpClient) -> None:
    for mode in ("lexical", "semantic", "hybrid"):
        a = alice.ok("search", {"query": "federation quorum runbook", "mode": mode})
        b = bob.ok("search", {"query": "federation quorum runbook", "mode": mode})
        assert "alice-only" in {r["chunk_id"] for r in a["results"]}
        assert {r["chunk_id"] for r in b["results"]} == {"open"} and b["count"] == 1


def test_citations_are_per_key(alice: McpClient, bob: McpClient) -> None:
    a = alice.ok("search", {"query": "alice private runbook", "mode": "lexical", "conversation_id": "shared"})
    assert a["results"][0]["n"] == 1
    assert bob.ok("citations.resolve", {"conversation_id": "shared", "numbers": [1]})["citations"] == {}
    assert alice.ok("citations.resolve", {"conversation_id": "shared", "numbers": [1]})["citations"]["1"]


def test_reindex_and_search_over_http(srv: Served, alice: McpClient) -> None:
    out = alice.ok("reindex", {"path": str(srv.docs_root), "collection": "handbook"})  # type: ignore[attr-defined]
    assert out["indexed_files"] == 1
    res = alice.ok("search", {"query": "alpha handbook", "collection": "handbook"})
    assert res["results"][0]["path"] == "alpha.md" and res["results"][0]["heading_path"] == "Alpha"


def test_extract_key_info_isolated_per_user(alice: McpClient, bob: McpClient) -> None:
    alice.ok("extract_key_info", {"query": "launch date", "materials": "Launch is on March 10.", "task_id": "t"})
    got, _ = bob.extract({"query": "launch date", "materials": "Budget is small.", "task_id": "t"})
    assert got == ["Budget is small."]


def _iv(c: McpClient, **args: Any) -> dict[str, Any]:
    out = c.ok("inner_voice.retrieve", {"query": "federation coordination quorum", **args})
    assert set(out) == {"snippets", "diagnostics"}
    for s in out["snippets"]:
        assert set(s) == {"id", "table", "source_type", "origin", "trust_tier", "created_at", "text", "score",
                          "content_hash", "span_start", "span_end"}
        assert len(s["text"]) <= 800 and s["span_end"] == len(s["text"])
    d = out["diagnostics"]
    assert {"provider", "model", "dim", "k_req", "k_ret", "kg_candidates", "thought_candidates", "floor_used",
            "latency_ms"} <= set(d) and d["k_ret"] == len(out["snippets"])
    return out


def test_inner_voice_mix_privacy_dedupe_tiers(alice: McpClient, bob: McpClient) -> None:
    out = _iv(bob, top_k=10, mix=0.6, floor=0.0)
    tables = [s["table"] for s in out["snippets"]]
    assert (tables.count("kg"), tables.count("thoughts")) == (6, 4)
    scores = [s["score"] for s in out["snippets"]]
    assert scores == sorted(scores, reverse=True)
    ids = {s["id"] for s in _iv(bob, top_k=50, floor=0.0)["snippets"]}
    assert "t:priv" not in ids and "kg:secret" not in ids  # private excluded; ACL inside the engine
    assert not {"kg:dup", "t:dup2"} <= ids and {"kg:dup", "t:dup2"} & ids  # same normalized text: one kept
    assert "t:priv" in {s["id"] for s in _iv(bob, top_k=50, floor=0.0, include_private=True)["snippets"]}
    assert "kg:secret" in {s["id"] for s in _iv(alice, top_k=50, floor=0.0)["snippets"]}
    tiers = {s["id"]: s["trust_tier"] for s in _iv(bob, top_k=50, floor=0.0)["snippets"]}
    assert (tiers["t:t1"], tiers["t:t2"], tiers["t:t3"], tiers["kg:e0"]) == ("amber", "red", "green", "green")
    obs = [s for s in _iv(bob, top_k=50, floor=0.0)["snippets"] if s["id"] == "kg:o1"]
    assert obs and obs[0]["source_type"] == "kg_observation"
    longs = [s for s in _iv(bob, top_k=50, floor=0.0)["snippets"] if s["id"] == "t:long"]
    assert longs and longs[0]["text"].endswith(".") and len(longs[0]["text"]) <= 800


def test_inner_voice_tags_backfill_and_empty(bob: McpClient, srv: Served) -> None:
    only = _iv(bob, top_k=10, floor=0.0, include_tags=["ops"])["snippets"]
    assert [s["id"] for s in only] == ["t:tagged"]  # KG underflows (no tags): thoughts backfill
    assert "t:tagged" not in {s["id"] for s in _iv(bob, top_k=50, floor=0.0, exclude_tags=["ops"])["snippets"]}
    none = bob.ok("inner_voice.retrieve", {"query": "zebra xylophone", "floor": 0.99})
    assert none["snippets"] == [] and none["diagnostics"]["no_results"] is True
    assert none["diagnostics"]["reason"] == "floor_excluded_all"
    assert bob.error("inner_voice.retrieve", {"query": "  "}) == "invalid_params"
    # inner_voice: out-of-range mix/floor clamp (mix 1.5 → 1.0: KG only), a wrong type is invalid_params
    clamped = bob.ok("inner_voice.retrieve", {"query": "federation coordination", "mix": 1.5, "floor": -1})
    assert clamped["snippets"] and {s["table"] for s in clamped["snippets"]} == {"kg"}
    assert bob.error("inner_voice.retrieve", {"query": "x", "mix": "lots"}) == "invalid_params"
    cited = bob.ok("inner_voice.retrieve", {"query": "federation coordination quorum", "top_k": 3, "floor": 0.0,
                                            "conversation_id": "iv"})
    assert [s["n"] for s in cited["snippets"]] == [1, 2, 3] and "<retrieved_context>" in cited["context"]
