"""Every tool through the official MCP client over stdio (`python -m services.cli mcp`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.openai_server import OpenAIProtocolServer
from tests.mcp.support import McpClient, stdio

DOC_A = """# Caching

Intro to caching layers.

## TTL

The cache ttl controls expiry of entries. Set the ttl to 60 seconds.

## Eviction

LRU eviction drops the least recently used entry when memory is full.
"""
DOC_B = "Deployment notes.\n\nRoll out the service behind a load balancer.\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for sub, name, text in [("one", "cache.md", DOC_A), ("two", "deploy.txt", DOC_B), ("two", "skip.bin", "x")]:
        (root / sub).mkdir(exist_ok=True)
        (root / sub / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def mcp(corpus: Path) -> Iterator[McpClient]:
    c = stdio(corpus.parent / "data", VIBE_MCP_REINDEX_ROOTS=f'["{corpus}"]',
              VIBE_MCP_PRECALL_CHECK="tests.mcp.precall:deny_big_topk")
    try:
        yield c
    finally:
        c.close()


def test_lists_every_tool(mcp: McpClient) -> None:
    assert set(mcp.tools()) == {"search_rifflux", "search", "reindex", "reindex_status", "get_chunk", "get_file",
                                "index_status", "search_knowledge_base", "citations.resolve", "extract_key_info",
                                "inner_voice.retrieve", "snippets.retrieve"}


def test_reindex_paths_win_aggregate_and_skip_unchanged(mcp: McpClient, corpus: Path) -> None:
    out = mcp.ok("reindex", {"path": str(corpus / "nowhere"), "paths": [str(corpus / "one"), str(corpus / "two")]})
    assert out["indexed_files"] == 2 and out["skipped_files"] == 0  # `path` ignored (AC-009), counts summed
    assert out["indexed_paths"] == [str(corpus / "one"), str(corpus / "two")]
    assert out["embedding_model"] == "hash:v1@384" and out["embedding_backend"] == "hash"
    again = mcp.ok("reindex", {"paths": [str(corpus / "one"), str(corpus / "two")]})
    assert (again["indexed_files"], again["skipped_files"]) == (0, 2)
    forced = mcp.ok("reindex", {"path": str(corpus / "one"), "paths": [], "force": True})  # paths=[] → path
    assert (forced["indexed_files"], forced["skipped_files"]) == (1, 0) and "indexed_paths" not in forced


def test_reindex_refuses_outside_roots_and_missing(mcp: McpClient, corpus: Path) -> None:
    assert mcp.error("reindex", {"path": "/etc"}) == "invalid_params"
    assert mcp.error("reindex", {"paths": [str(corpus / "one"), str(corpus / "missing")]}) == "invalid_params"
    assert mcp.error("reindex", {}) == "invalid_params"  # the server's cwd (the repo) is not an allowed root


def _search(mcp: McpClient, **args: object) -> dict:
    out = mcp.ok("search", dict(args))
    assert set(out) >= {"query", "mode", "count", "embedding_model", "results"}
    assert out["count"] == len(out["results"])
    for r in out["results"]:
        assert {"chunk_id", "path", "heading_path", "chunk_index", "content", "score_breakdown"} <= set(r)
    return out


def test_search_modes_and_breakdowns(mcp: McpClient, corpus: Path) -> None:
    mcp.ok("reindex", {"paths": [str(corpus / "one"), str(corpus / "two")]})
    lex = _search(mcp, query="cache ttl", mode="lexical", top_k=5)
    assert lex["results"][0]["heading_path"] == "Caching > TTL" and lex["results"][0]["path"] == "cache.md"
    assert all(set(r["score_breakdown"]) == {"bm25"} for r in lex["results"])
    sem = _search(mcp, query="cache ttl expiry", mode="semantic", top_k=5)
    cos = [r["score_breakdown"]["cosine"] for r in sem["results"]]
    assert cos == sorted(cos, reverse=True) and all(set(r["score_breakdown"]) == {"cosine"} for r in sem["results"])
    hyb = _search(mcp, query="cache ttl", mode="hybrid", top_k=5)
    assert hyb["mode"] == "hybrid" and hyb["results"]
    for r in hyb["results"]:
        b = r["score_breakdown"]
        assert set(b) == {"rrf", "lexical_rank", "semantic_rank"}
        want = sum(1 / (60 + x) for x in (b["lexical_rank"], b["semantic_rank"]) if x is not None)
        assert b["rrf"] == pytest.approx(want)
    rrfs = [r["score_breakdown"]["rrf"] for r in hyb["results"]]
    assert rrfs == sorted(rrfs, reverse=True)


def test_search_top_k_truncates_and_validates(mcp: McpClient) -> None:
    out = _search(mcp, query="the entry cache ttl caching", mode="hybrid", top_k=1)
    assert out["count"] == 1
    assert mcp.error("search", {"query": "x", "mode": "fuzzy"}) == "invalid_params"
    assert mcp.error("search", {"query": "x", "top_k": 0}) == "invalid_params"
    assert mcp.error("search", {"query": "   "}) == "invalid_params"


def test_semantic_zero_norm_query_gives_rows_with_cosine_zero(mcp: McpClient) -> None:
    """As in Rifflux, a zero-norm query vector scores 0.0, it does not empty the leg."""
    out = _search(mcp, query="!!! ???", mode="semantic")
    assert out["count"] > 0 and all(r["score_breakdown"] == {"cosine": 0.0} for r in out["results"])
    hybrid = _search(mcp, query="!!! ???", mode="hybrid")
    assert all(r["score_breakdown"]["semantic_rank"] is not None for r in hybrid["results"])


def test_scope_restricts_but_still_ranks(mcp: McpClient) -> None:
    out = _search(mcp, query="cache ttl eviction load balancer", mode="lexical", top_k=10,
                  scope={"paths": ["deploy.txt"]})
    assert out["results"] and {r["path"] for r in out["results"]} == {"deploy.txt"}
    assert mcp.error("search", {"query": "x", "scope": {"nonsense": [1]}}) == "invalid_params"


def test_citations_numbering_resolve_and_restart(mcp: McpClient, corpus: Path) -> None:
    first = _search(mcp, query="cache ttl", mode="lexical", top_k=2, conversation_id="conv-1")
    ns = [r["n"] for r in first["results"]]
    assert ns == [1, 2]
    ctx = first["context"]
    assert ctx.startswith("<retrieved_context>") and f"[1] {first['results'][0]['content'].split()[0]}" in ctx
    second = _search(mcp, query="eviction memory", mode="lexical", top_k=3, conversation_id="conv-1")
    by_id = {r["chunk_id"]: r["n"] for r in first["results"]}
    for r in second["results"]:  # find-or-create: a seen chunk keeps its number, new ones continue
        assert r["n"] == by_id.get(r["chunk_id"], r["n"]) and (r["chunk_id"] in by_id or r["n"] >= 3)
    res = mcp.ok("citations.resolve", {"conversation_id": "conv-1", "text": "TTL is 60 [1], see [999]."})
    assert res["citations"]["1"]["locator"]["chunk_id"] == first["results"][0]["chunk_id"]
    assert res["unknown"] == [999] and res["normalized_text"] == "TTL is 60 [citation:1], see [citation:999]."
    other = mcp.ok("citations.resolve", {"conversation_id": "conv-2", "numbers": [1]})
    assert other["citations"] == {} and other["unknown"] == [1]
    # the registry survives a restart of the server process
    again = stdio(corpus.parent / "data", VIBE_MCP_REINDEX_ROOTS=f'["{corpus}"]')
    try:
        res2 = again.ok("citations.resolve", {"conversation_id": "conv-1", "numbers": [1, 2]})
        assert res2["citations"]["1"]["locator"] == res["citations"]["1"]["locator"]
        third = again.ok("search", {"query": "cache ttl", "mode": "lexical", "top_k": 2, "conversation_id": "conv-1"})
        assert [r["n"] for r in third["results"]] == ns
    finally:
        again.close()


def test_extract_key_info_isolation_dedupe_limits_and_audit(mcp: McpClient, corpus: Path) -> None:
    got, a = mcp.extract({"query": "what colour is the sky", "task_id": "task-a", "topK": 2,
                          "materials": "The sky is blue today.\n\nGrass is green.\n\nThe sky is blue today."})
    assert got[0] == "The sky is blue today." and a["ingested_chunks"] == 2 and a["count"] == len(got) <= 2
    assert a["fusion"] == "weighted"  # extract_key_info's default
    got, _ = mcp.extract({"query": "what colour is the sky", "task_id": "task-b", "topK": 5,
                          "materials": "Bananas are yellow."})
    assert got == ["Bananas are yellow."]  # task-a's sky chunks are invisible to task-b
    got, again = mcp.extract({"query": "grass", "task_id": "task-a", "materials": "Grass is green."})
    assert again["ingested_chunks"] == 0 and again["duplicate_chunks"] == 1
    assert "Grass is green." in got and "Bananas are yellow." not in got
    t = {"task_id": "task-a"}
    assert mcp.error("extract_key_info", {"query": "q", "materials": "m", "topK": 21, **t}) == "invalid_params"
    assert mcp.error("extract_key_info", {"query": "", "materials": "m", **t}) == "invalid_params"
    assert mcp.error("extract_key_info", {"query": "q", "materials": "x" * 200_001, **t}) == "payload_too_large"
    assert mcp.error("extract_key_info", {"query": "q", "materials": "m", "task_id": "../x"}) == "invalid_params"
    got, facts = mcp.extract({"query": "lemons", "materials": "Lemons are sour."})  # no task_id: the default task
    assert (facts["task_id"], facts["task_from"]) == ("default", "default") and got == ["Lemons are sour."]
    assert mcp.error("extract_key_info", {"query": "q", "materials": "m", "topK": 13, **t}) == "forbidden"  # pre-call
    # validation runs before the pre-call (billing) hook: an invalid call is never billed
    assert mcp.error("extract_key_info", {"query": "", "materials": "m", "topK": 13, **t}) == "invalid_params"
    got, facts = mcp.extract({"query": "grass", "materials": "Grass is green.", **t})
    assert facts["topK"] == 5  # topK absent means the default
    assert mcp.error("extract_key_info", {"query": "grass", "materials": "Grass is green.", "topK": 0, **t}) == \
        "invalid_params"  # topK must be in (0, 20]
    # no search, not even over every collection of the tenant, surfaces task materials
    for mode in ("lexical", "semantic", "hybrid"):
        found = _search(mcp, query="bananas yellow sky blue", mode=mode, collection="any", top_k=100)["results"]
        assert not [r for r in found if "Bananas" in r["content"] or "sky" in r["content"]]
    db = sqlite3.connect(corpus.parent / "data" / "mcp_audit.sqlite3")
    rows = db.execute("SELECT tool, task, outcome, params, duration_ms FROM tool_calls WHERE tool='extract_key_info'"
                      ).fetchall()
    assert {r[2] for r in rows} >= {"ok", "invalid_params", "payload_too_large", "forbidden"}
    assert all("sky" not in r[3] for r in rows)  # sizes, not material text
    assert ("task-a", "ok") in {(r[1], r[2]) for r in rows}


def test_inner_voice_is_gated(mcp: McpClient) -> None:
    assert mcp.error("inner_voice.retrieve", {"query": "x"}) == "feature_disabled"


def test_embedder_failure_semantic_empty_hybrid_lexical(tmp_path: Path, corpus: Path) -> None:
    with OpenAIProtocolServer(dim=32) as api:
        c = stdio(tmp_path / "data", VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=api.base_url,
                  VIBE_OPENAI_API_KEY="x", VIBE_MCP_REINDEX_ROOTS=f'["{corpus}"]', VIBE_ENABLE_INNER_VOICE="1",
                  VIBE_JOB_MAX_ATTEMPTS="1")
        try:
            c.ok("reindex", {"path": str(corpus / "one")})
            assert "semantic" not in _search(c, query="cache ttl", mode="semantic")  # a vector: nothing to say
            api.fail_next(100, status=500)
            sem = _search(c, query="cache ttl", mode="semantic")
            assert sem["results"] == [] and sem["count"] == 0  # an empty semantic leg, no exception
            assert sem["semantic"] == {"state": "degraded", "reason": "embedder_unavailable"}  # and why
            hyb = _search(c, query="cache ttl", mode="hybrid")
            assert hyb["results"] and all(r["score_breakdown"]["semantic_rank"] is None for r in hyb["results"])
            assert hyb["semantic"]["reason"] == "embedder_unavailable"
            assert "semantic" not in _search(c, query="cache ttl", mode="lexical")  # it asked for no vector
            assert c.error("inner_voice.retrieve", {"query": "cache"}) == "embedder_unavailable"
        finally:
            api.clear()
            c.close()


def test_a_tenant_over_its_daily_cap_searches_lexically_without_a_provider_call(tmp_path: Path, corpus: Path) -> None:
    """The tools' query embeddings are under VIBE_TENANT_DAILY_TOKENS like the read path's."""
    with OpenAIProtocolServer(dim=32) as api:
        c = stdio(tmp_path / "data", VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=api.base_url,
                  VIBE_OPENAI_API_KEY="x", VIBE_MCP_REINDEX_ROOTS=f'["{corpus}"]', VIBE_ENABLE_INNER_VOICE="1",
                  VIBE_TENANT_DAILY_TOKENS="1")
        try:
            c.ok("reindex", {"path": str(corpus / "one")})  # its chunks are refused for budget too
            calls = api.requests
            sem = _search(c, query="cache ttl", mode="semantic")
            assert sem["results"] == [] and sem["semantic"] == {"state": "degraded", "reason": "budget"}
            hyb = _search(c, query="cache ttl", mode="hybrid")
            assert hyb["results"] and all(r["score_breakdown"]["semantic_rank"] is None for r in hyb["results"])
            assert hyb["semantic"]["reason"] == "budget"
            voice = c.ok("inner_voice.retrieve", {"query": "cache"})
            assert voice["snippets"] == [] and voice["diagnostics"]["reason"] == "budget"
            assert api.requests == calls  # no query was sent to the provider
        finally:
            c.close()


def test_reindex_is_off_until_roots_are_configured(tmp_path: Path, corpus: Path) -> None:
    """The working directory is no longer a root by default."""
    c = stdio(tmp_path / "data", cwd=corpus / "two")
    try:
        for args in ({}, {"path": str(corpus / "two")}, {"paths": ["."]}):
            err, body = c.call("reindex", args)
            assert err and body["error"]["code"] == "feature_disabled"
            assert "VIBE_MCP_REINDEX_ROOTS" in body["error"]["message"]
        assert _search(c, query="load balancer", mode="lexical")["results"] == []
    finally:
        c.close()


def test_reindex_without_location_uses_server_cwd_inside_a_plain_path_root(tmp_path: Path, corpus: Path) -> None:
    """Rifflux's CON-006 (reindex stays inside a root) holds with the cwd inside a root given
    as a plain path (not JSON): start-up must parse that form too."""
    c = stdio(tmp_path / "data", cwd=corpus / "two", VIBE_MCP_REINDEX_ROOTS=str(corpus))
    try:
        out = c.ok("reindex", {})
        assert (out["indexed_files"], out["skipped_files"]) == (1, 0)  # deploy.txt only (skip.bin ignored)
        assert _search(c, query="load balancer", mode="lexical")["results"][0]["path"] == "deploy.txt"
    finally:
        c.close()
    outside = stdio(tmp_path / "data2", cwd=tmp_path, VIBE_MCP_REINDEX_ROOTS=str(corpus / "one"))
    try:  # a cwd outside every root is refused, without naming it
        err, body = outside.call("reindex", {})
        assert err and body["error"]["code"] == "invalid_params" and str(tmp_path) not in body["error"]["message"]
    finally:
        outside.close()
