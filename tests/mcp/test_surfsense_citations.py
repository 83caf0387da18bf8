"""SurfSense (its citation ADR 0001) through the official MCP client over streamable HTTP against a
served app: `search_knowledge_base(query, scope?)` with the seed's scope example, `[n]`
numbering and `<retrieved_context>`, resolution, the reranker behind its port (a local
Cohere/TEI `/rerank` stand-in), brackets in passages, and numbers across a reindex.

The scope test puts the in-scope document past rank 500 lexically in a collection of 600
stronger matches: a post-filter of the top 500 would lose it; the engine's id allow-list
must find it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.rerank_server import RerankServer
from harness.server import Served, served
from shared.adapters.rerank_http import HttpReranker
from shared.agent_ports import RerankError
from tests.mcp.support import McpClient, http

SEED_DOCS = [  # SurfSense's example passages
    {"_id": "42", "title": "Q3 Launch Notes", "content": "We agreed to push launch to March 10. "
     "Marketing will be notified next week."},
    {"_id": "43", "title": "Timeline", "content": "Dates floated for the launch were Mar 10 and Mar 17."},
    {"_id": "44", "title": "Brackets", "content": "The launch plan cites [3] and [citation:7] as sources."},
]
CROWD = 600
SCOPE = {"document_ids": [42], "folder_ids": [], "connector_ids": [], "thread_ids": []}  # SurfSense's scope, verbatim


@pytest.fixture(scope="module")
def reranker() -> Iterator[RerankServer]:
    with RerankServer() as r:
        yield r


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, reranker: RerankServer) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("surfsense"))
    (root / "notes").mkdir()
    env = {"VIBE_RERANK_URL": reranker.url, "VIBE_RERANK_MODEL": "stand-in", "VIBE_RERANK_CANDIDATES": "20",
           "VIBE_MCP_REINDEX_ROOTS": json.dumps([str(root)])}
    with served(root / "data", env=env) as s:
        s.notes = root / "notes"  # type: ignore[attr-defined]
        assert s.bulk("k-alice", "kb", SEED_DOCS).status_code == 200
        # 600 documents that match "quorum" far better than the needle below
        crowd = [{"_id": f"c{i}", "content": f"quorum quorum quorum vote {i}"} for i in range(CROWD)]
        assert s.bulk("k-alice", "crowd", crowd).status_code == 200
        filler = " ".join(f"word{i}" for i in range(400))
        assert s.bulk("k-alice", "crowd", [{"_id": "needle", "content": f"{filler} quorum {filler}"}]
                      ).status_code == 200
        yield s


@pytest.fixture(scope="module")
def alice(srv: Served) -> Iterator[McpClient]:
    c = http(srv.base, "k-alice")
    yield c
    c.close()


def _skb(c: McpClient, **args: Any) -> dict[str, Any]:
    out = c.ok("search_knowledge_base", args)
    assert out["count"] == len(out["results"])
    return out


def test_seed_scope_example_numbers_and_context(alice: McpClient) -> None:
    out = _skb(alice, query="When is the launch?", scope=SCOPE, conversation_id="conv-seed", rerank=False)
    assert [r["document_id"] for r in out["results"]] == ["42"]  # only the scoped document, still ranked
    r = out["results"][0]
    assert (r["n"], r["source_type"], r["chunk_id"], r["title"], r["source"]) == (1, "kb_chunk", "42",
                                                                                  "Q3 Launch Notes", "kb")
    ctx = out["context"]
    assert ctx.startswith("<retrieved_context>") and ctx.endswith("</retrieved_context>")
    assert 'Document: "Q3 Launch Notes" (kb)' in ctx and "  [1] We agreed to push launch to March 10." in ctx
    # unscoped: more passages; the seen one keeps [1] (find-or-create), new ones continue from 2
    wide = _skb(alice, query="launch March", conversation_id="conv-seed", rerank=False)
    ns = {x["document_id"]: x["n"] for x in wide["results"]}
    assert ns["42"] == 1 and sorted(n for d, n in ns.items() if d != "42") == list(range(2, len(ns) + 1))
    res = alice.ok("citations.resolve", {"conversation_id": "conv-seed", "text": "Launch is March 10 [1] [99]."})
    assert res["citations"]["1"]["locator"]["document_id"] == "42" and res["unknown"] == [99]
    assert res["citations"]["1"]["display"]["title"] == "Q3 Launch Notes"
    assert res["normalized_text"] == "Launch is March 10 [citation:1] [citation:99]."


def test_scope_kinds_empty_lists_and_field_kinds(alice: McpClient) -> None:
    empty = {"document_ids": [], "folder_ids": [], "connector_ids": [], "thread_ids": []}
    assert _skb(alice, query="launch", scope=empty, rerank=False)["count"] == 3  # empty lists: no constraint
    for kind in ("connector_ids", "thread_ids", "folder_ids"):  # no seed document carries the field: nothing
        assert _skb(alice, query="launch", scope={kind: ["7"]}, rerank=False)["results"] == []
    assert alice.error("search_knowledge_base", {"query": "launch", "scope": {"tags": ["x"]}}) == "invalid_params"
    assert _skb(alice, query="launch", scope={"document_ids": ["no-such-doc"]})["results"] == []


def test_scope_is_applied_inside_the_engine_query(alice: McpClient) -> None:
    """The needle ranks past 500 for "quorum" among 600 stronger matches; scoped, it is found."""
    unscoped = alice.ok("search_rifflux", {"query": "quorum", "mode": "lexical", "top_k": 100,
                                           "collection": "crowd"})
    assert "needle" not in {r["chunk_id"] for r in unscoped["results"]}
    scope = {"document_ids": ["needle"]}
    got = _skb(alice, query="quorum", scope=scope, collection="crowd", rerank=False)
    assert [r["document_id"] for r in got["results"]] == ["needle"]
    lex = alice.ok("search_rifflux", {"query": "quorum", "mode": "lexical", "collection": "crowd", "scope": scope})
    assert [r["chunk_id"] for r in lex["results"]] == ["needle"] and lex["results"][0]["score_breakdown"]["bm25"]


def test_only_n_is_a_bracketed_integer_next_to_passages(alice: McpClient) -> None:
    out = _skb(alice, query="launch plan sources", conversation_id="conv-br", rerank=False)
    assert any(r["document_id"] == "44" for r in out["results"])
    ctx = out["context"]
    assert "\\[3\\]" in ctx and "\\[citation:7\\]" in ctx  # passage brackets are escaped
    unescaped = re.findall(r"(?<!\\)\[(\d+)\]", ctx)
    assert sorted(int(n) for n in unescaped) == sorted(r["n"] for r in out["results"])
    assert not re.search(r"(?<!\\)\[citation:\d+\]", ctx)


def test_reranker_reorders_then_failure_keeps_the_fused_order(alice: McpClient, reranker: RerankServer) -> None:
    fused = _skb(alice, query="launch March 10", rerank=False)
    assert fused["reranked"] is False and fused["reranker"] == "rerank:stand-in"
    reranker.requests.clear()
    reranker.boost = "sources"  # the stand-in favours the one passage that says "sources"
    out = _skb(alice, query="launch March 10")
    assert out["reranked"] is True and out["results"][0]["document_id"] == "44"
    scores = [r["rerank_score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)
    sent = reranker.requests[-1]
    assert sent["query"] == "launch March 10" and sent["model"] == "stand-in"
    assert len(sent["documents"]) == len(fused["results"]) and sent["top_n"] == len(sent["documents"])
    reranker.fail_status = 503
    try:
        down = _skb(alice, query="launch March 10")
    finally:
        reranker.fail_status, reranker.boost = None, None
    assert down["reranked"] is False
    assert [r["chunk_id"] for r in down["results"]] == [r["chunk_id"] for r in fused["results"]]


def test_http_reranker_adapter_speaks_tei_and_cohere(reranker: RerankServer) -> None:
    passages = ["cats purr", "dogs bark loudly", "cats and dogs"]
    for protocol in ("tei", "cohere"):
        r = HttpReranker(reranker.url, "m", protocol)
        try:
            assert r.rerank("dogs bark", passages) == [0.0, 1.0, 0.5]
        finally:
            r.close()
    assert "texts" in reranker.requests[-2] and "documents" in reranker.requests[-1]
    bad = HttpReranker("http://127.0.0.1:1/rerank", "m", timeout=2)  # nothing listens on port 1
    with pytest.raises(RerankError):
        bad.rerank("q", ["p"])
    bad.close()


def test_a_number_keeps_its_meaning_after_a_reindex(srv: Served, alice: McpClient) -> None:
    notes: Path = srv.notes  # type: ignore[attr-defined]
    (notes / "plan.md").write_text("# Plan\n\nThe rollout starts on Monday with the canary.\n")
    assert alice.ok("reindex", {"path": str(notes), "collection": "notes"})["indexed_files"] == 1
    first = _skb(alice, query="rollout canary", collection="notes", conversation_id="conv-re", rerank=False)
    n = first["results"][0]["n"]
    assert alice.ok("reindex", {"path": str(notes), "collection": "notes", "force": True})["indexed_files"] == 1
    same = _skb(alice, query="rollout canary", collection="notes", conversation_id="conv-re", rerank=False)
    assert same["results"][0]["n"] == n  # rewritten with the same text: the same unit, the same number
    (notes / "plan.md").write_text("# Plan\n\nThe rollout starts on Friday with the canary.\n")
    alice.ok("reindex", {"path": str(notes), "collection": "notes"})
    changed = _skb(alice, query="rollout canary", collection="notes", conversation_id="conv-re", rerank=False)
    n2 = changed["results"][0]["n"]
    assert n2 != n and "Friday" in changed["results"][0]["content"]
    res = alice.ok("citations.resolve", {"conversation_id": "conv-re", "numbers": [n, n2]})
    assert res["unknown"] == [n]  # [n] never comes to mean the new text
    assert res["citations"][str(n2)]["locator"]["chunk_id"] == changed["results"][0]["chunk_id"]


def test_tool_metrics_are_exported(srv: Served, alice: McpClient) -> None:
    _skb(alice, query="launch", rerank=False)
    alice.call("search_rifflux", {"query": "x", "top_k": 0})
    text = srv.call("GET", "/metrics", None).text
    assert re.search(r'tool_calls_total\{outcome="ok",tool="search_knowledge_base"\} [1-9]', text)
    assert re.search(r'tool_calls_total\{outcome="invalid_params",tool="search_rifflux"\} [1-9]', text)
    assert 'tool_call_seconds_count{tool="search_knowledge_base"}' in text


def test_the_reranker_never_receives_a_document_with_certificates_and_reads_masked_text(
        tmp_path: Path, reranker: RerankServer) -> None:
    """The reranker is an outside endpoint, as an embedding provider is: a document that requires
    certificates is never sent (it keeps its fused place), and the rest is masked as an embedder's
    text is."""
    keys = [{"key": "k-hr", "tenant": "ta", "principals": ["user:hr"], "certs": ["hr:staff"],
             "scopes": ["read", "write"]}]
    env = {"VIBE_RERANK_URL": reranker.url, "VIBE_RERANK_MODEL": "stand-in"}
    docs = [{"_id": "pay", "content": "salary review salary review salary review", "_certs": ["hr:staff"]},
            {"_id": "mail", "content": "salary review questions to ann.lee@example.com"}]
    with served(tmp_path / "data", env=env, keys=keys) as s:
        assert s.bulk("k-hr", "kb", docs).status_code == 200
        c = http(s.base, "k-hr")
        try:
            fused = _skb(c, query="salary review", rerank=False)
            reranker.requests.clear()
            out = _skb(c, query="salary review")
        finally:
            c.close()
    assert out["reranked"] is True
    assert [r["document_id"] for r in out["results"]] == [r["document_id"] for r in fused["results"]]
    assert {r["document_id"] for r in out["results"]} == {"pay", "mail"}
    sent = [d["text"] if isinstance(d, dict) else d for d in reranker.requests[-1]["documents"]]
    assert sent == ["salary review questions to [EMAIL]"]
    assert "rerank_score" not in next(r for r in out["results"] if r["document_id"] == "pay")
