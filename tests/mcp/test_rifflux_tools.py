"""Rifflux compatibility: this test speaks to our server exactly as a Rifflux MCP client does,
installing nothing from outside, over stdio (`vibe-semantic mcp`, as a Rifflux host launches
its server) and over streamable HTTP (a served app's /mcp), with the official MCP client.

It lists the tools and checks names, the `mode` enum, the `top_k` bounds and a description
on every parameter; then reindex → search_rifflux (each mode, the seed's "cache ttl"
example) → get_chunk → get_file → index_status; then prune_missing, background jobs and
invalid arguments in the tool's error shape.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import served
from tests.mcp.support import McpClient, http, stdio

CACHE = """# Caching

Intro to caching layers.

## TTL

The cache ttl controls expiry of entries. Set the ttl to 60 seconds.

## Eviction

LRU eviction drops the least recently used entry when memory is full.
"""
DEPLOY = "# Deploy\n\nRoll out the service behind a load balancer.\n"
RIFFLUX_TOOLS = {"search_rifflux", "reindex", "get_chunk", "get_file", "index_status"}
RESULT_KEYS = {"chunk_id", "path", "heading_path", "chunk_index", "content", "score_breakdown"}
BREAKDOWN = {"lexical": {"bm25"}, "semantic": {"cosine"}, "hybrid": {"rrf", "lexical_rank", "semantic_rank"}}


def _tree(root: Path) -> Path:
    (root / "notes" / "ops").mkdir(parents=True)
    (root / "notes" / "cache.md").write_text(CACHE)
    (root / "notes" / "ops" / "deploy.md").write_text(DEPLOY)
    (root / "other").mkdir()
    (root / "other" / "misc.txt").write_text("Miscellaneous text about gardening.\n")
    (root / "gone").mkdir()
    return root


@pytest.fixture(scope="module", params=["stdio", "http"])
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpClient, Path]]:
    root = _tree(Path(tmp_path_factory.mktemp(f"rifflux-{request.param}")) / "corpus")
    data = root.parent / "data"
    roots = json.dumps([str(root)])
    if request.param == "stdio":
        c = stdio(data, cwd=root / "notes", VIBE_MCP_REINDEX_ROOTS=roots)  # cwd: CON-006
        try:
            yield c, root
        finally:
            c.close()
    else:
        with served(data, env={"VIBE_MCP_REINDEX_ROOTS": roots}) as s:
            c = http(s.base, "k-alice")
            try:
                yield c, root
            finally:
                c.close()


def _prop(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """A property's schema with `anyOf: [X, null]` unwrapped (optional parameters)."""
    p = dict(schema["properties"][name])
    for alt in p.pop("anyOf", []):
        if alt.get("type") != "null":
            p.update(alt)
    return p


def test_tools_names_enum_bounds_and_descriptions(rig: tuple[McpClient, Path]) -> None:
    c, _ = rig
    schemas = c.schemas()
    assert set(schemas) >= RIFFLUX_TOOLS and "reindex_status" in schemas and "search" in schemas  # alias kept
    s = schemas["search_rifflux"]
    assert s["required"] == ["query"] and _prop(s, "query")["type"] == "string"
    assert _prop(s, "mode")["enum"] == ["lexical", "semantic", "hybrid"] and s["properties"]["mode"]["default"] == \
        "hybrid"
    top_k = _prop(s, "top_k")
    assert (top_k["type"], top_k["minimum"], top_k["default"]) == ("integer", 1, 10)
    assert "maximum" not in top_k  # any positive top_k is accepted (clamped by the server)
    assert "db_path" in s["properties"]
    r = schemas["reindex"]
    assert {"path", "paths", "force", "prune_missing", "background"} <= set(r["properties"])
    assert r["properties"]["prune_missing"]["default"] is True and r["properties"]["force"]["default"] is False
    assert _prop(r, "paths")["type"] == "array"
    for tool in (*RIFFLUX_TOOLS, "reindex_status"):
        for name in schemas[tool].get("properties", {}):
            assert _prop(schemas[tool], name).get("description"), (tool, name)


def test_reindex_search_get_chunk_get_file_index_status(rig: tuple[McpClient, Path]) -> None:
    c, root = rig
    out = c.ok("reindex", {"path": str(root / "nowhere"), "paths": [str(root / "notes"), str(root / "other")]})
    assert (out["indexed_files"], out["skipped_files"]) == (3, 0)  # AC-008/009: paths win, counts summed
    assert out["indexed_paths"] == [str(root / "notes"), str(root / "other")]
    assert out["embedding_model"] == "hash:v1@384" and out["embedding_backend"] == "hash"
    for mode in ("lexical", "semantic", "hybrid"):
        res = c.ok("search_rifflux", {"query": "cache ttl", "top_k": 5, "mode": mode})  # Rifflux's example query
        assert {"query", "mode", "count", "embedding_model", "results"} <= set(res)  # AC-006
        assert (res["query"], res["mode"], res["embedding_model"]) == ("cache ttl", mode, "hash:v1@384")
        assert res["count"] == len(res["results"]) and 0 < res["count"] <= 5  # AC-005
        for r in res["results"]:
            assert set(r) >= RESULT_KEYS and set(r["score_breakdown"]) == BREAKDOWN[mode]
    top = c.ok("search_rifflux", {"query": "cache ttl", "top_k": 1, "mode": "lexical"})["results"][0]
    assert top["path"] == "cache.md" and "ttl" in top["content"]
    assert c.ok("search", {"query": "cache ttl", "top_k": 1, "mode": "lexical"})["results"][0] == top  # alias

    chunk = c.ok("get_chunk", {"chunk_id": top["chunk_id"]})["chunk"]
    assert chunk == {k: top[k] for k in RESULT_KEYS - {"score_breakdown"}}
    assert c.error("get_chunk", {"chunk_id": "no-such-chunk~0"}) == "not_found"

    f = c.ok("get_file", {"path": "cache.md"})
    assert [x["chunk_index"] for x in f["chunks"]] == list(range(len(f["chunks"])))
    assert chunk in f["chunks"] and {x["path"] for x in f["chunks"]} == {"cache.md"}
    assert c.ok("get_file", {"path": str(root / "notes" / "ops" / "deploy.md")})["chunks"][0]["path"] == \
        "ops/deploy.md"
    assert c.ok("get_file", {"path": "missing.md"})["chunks"] == []

    st = c.ok("index_status", {})
    assert {"files", "chunks", "embeddings", "embedding_backend", "embedding_model"} <= set(st)
    assert st["files"] == 3 and st["chunks"] >= 3 and st["embeddings"] == st["chunks"]
    assert (st["embedding_backend"], st["embedding_model"]) == ("hash", "hash:v1@384")


def test_prune_missing_default_true_and_off(rig: tuple[McpClient, Path]) -> None:
    c, root = rig
    (root / "gone" / "a.md").write_text("# A\n\nAardvark notes.\n")
    (root / "gone" / "b.md").write_text("# B\n\nBadger notes.\n")
    assert c.ok("reindex", {"path": str(root / "gone")})["indexed_files"] == 2
    (root / "gone" / "a.md").unlink()
    kept = c.ok("reindex", {"path": str(root / "gone"), "prune_missing": False})
    assert kept["pruned_files"] == 0 and c.ok("get_file", {"path": str(root / "gone" / "a.md")})["chunks"]
    pruned = c.ok("reindex", {"path": str(root / "gone")})
    assert pruned["pruned_files"] == 1 and (pruned["indexed_files"], pruned["skipped_files"]) == (0, 1)
    assert c.ok("get_file", {"path": str(root / "gone" / "a.md")})["chunks"] == []
    assert not c.ok("search_rifflux", {"query": "aardvark", "mode": "lexical"})["results"]
    assert c.ok("search_rifflux", {"query": "badger", "mode": "lexical"})["results"]


def test_background_reindex_reports_through_reindex_status(rig: tuple[McpClient, Path]) -> None:
    c, root = rig
    job = c.ok("reindex", {"path": str(root / "other"), "force": True, "background": True})
    assert job["status"] in ("queued", "running", "done") and job["job_id"]
    deadline = time.monotonic() + 120
    st = c.ok("reindex_status", {"job_id": job["job_id"]})
    while st["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        st = c.ok("reindex_status", {"job_id": job["job_id"]})
    assert st["status"] == "done" and st["result"]["indexed_files"] == 1
    assert c.error("reindex_status", {"job_id": "0" * 24}) == "not_found"
    # a call that cannot run is refused at once, not queued
    assert c.error("reindex", {"path": "/etc", "background": True}) == "invalid_params"


def test_invalid_arguments_are_invalid_params_in_the_tool_shape(rig: tuple[McpClient, Path]) -> None:
    c, _ = rig
    bad = [{"query": "x", "top_k": 0}, {"query": "x", "top_k": -1}, {"query": "x", "top_k": "ten"},
           {"query": "x", "mode": "fuzzy"}, {"top_k": 3}, {"query": ["not", "a", "string"]},
           {"query": "x", "db_path": 7}]
    for args in bad:
        err, body = c.call("search_rifflux", args)
        assert err and body["error"]["code"] == "invalid_params" and body["error"]["message"], (args, body)
    err, body = c.call("get_chunk", {})
    assert err and body["error"]["code"] == "invalid_params" and "chunk_id" in body["error"]["message"]
    err, body = c.call("reindex", {"force": "maybe"})
    assert err and body["error"]["code"] == "invalid_params"


def test_reindex_without_locations_uses_the_working_directory(rig: tuple[McpClient, Path]) -> None:
    c, root = rig
    out = c.call("reindex", {})
    if "rifflux-stdio" in str(root):  # the stdio server runs in <root>/notes
        assert not out[0] and out[1]["indexed_files"] + out[1]["skipped_files"] == 2  # AC-010
    else:  # the served app's working directory is not an allowed root: refused, not indexed
        assert out[0] and out[1]["error"]["code"] == "invalid_params"


def test_seed_001_search_knowledge_base_on_reindexed_files(rig: tuple[McpClient, Path]) -> None:
    """SurfSense's search_knowledge_base on the same server and transport: scope by a reindexed file's document_id."""
    c, _ = rig
    top = c.ok("search_rifflux", {"query": "cache ttl", "top_k": 1, "mode": "lexical"})["results"][0]
    doc_id = top["chunk_id"].split("~")[0]
    scope = {"document_ids": [doc_id], "folder_ids": [], "connector_ids": [], "thread_ids": []}
    out = c.ok("search_knowledge_base", {"query": "load balancer eviction ttl", "scope": scope,
                                         "conversation_id": "kb-1"})
    assert out["results"] and {r["document_id"] for r in out["results"]} == {doc_id}
    assert [r["n"] for r in out["results"]] == list(range(1, len(out["results"]) + 1))
    assert 'Document: "cache.md" (kb)' in out["context"] and "  [1] " in out["context"]
    folder = c.ok("search_knowledge_base", {"query": "load balancer", "scope": {"paths": ["ops"]}})
    assert {r["title"] for r in folder["results"]} == {"ops/deploy.md"}
    ops = folder["results"][0]["folder_id"]  # folder ids are ids, not paths
    assert c.ok("search_knowledge_base", {"query": "load balancer", "scope": {"folder_ids": ["ops"]}})["results"] == []
    by_id = c.ok("search_knowledge_base", {"query": "load balancer eviction", "scope": {"folder_ids": [ops]}})
    assert by_id["results"] and {r["title"] for r in by_id["results"]} == {"ops/deploy.md"}


def test_search_and_reindex_name_the_model_of_the_tenants_active_space(tmp_path: Path) -> None:
    """After a model change is activated, `search` and `reindex` answered with the configured
    model (`hash:v1@384`) while the query went through the tenant's new one."""
    root = _tree(tmp_path / "corpus")
    with served(tmp_path / "data", env={"VIBE_MCP_REINDEX_ROOTS": json.dumps([str(root)])}) as s:
        c = http(s.base, "k-alice")
        try:
            assert c.ok("reindex", {"paths": [str(root / "notes")]})["embedding_model"] == "hash:v1@384"
            assert s.call("POST", "/semantic/spaces", "k-admin-a", {"space": "v2", "model": "hash:v1@16"}
                          ).status_code == 202
            out = s.call("POST", "/semantic/spaces/v2/activate", "k-admin-a", {"force": True})
            assert out.status_code == 200, out.text
            res = c.ok("search", {"query": "cache ttl", "mode": "hybrid"})
            assert res["embedding_model"] == "hash:v1@16"
            again = c.ok("reindex", {"paths": [str(root / "notes")]})
            assert (again["embedding_model"], again["embedding_backend"]) == ("hash:v1@16", "hash")
        finally:
            c.close()
