"""A Rifflux client, written exactly as the Rifflux retrieval contract describes its calls, works
unchanged against this server, over stdio (`vibe-semantic mcp`) and over streamable HTTP
(/mcp), with the official MCP client.

Each test fails on one item of the contract: `db_path` accepted but never opened, the score
breakdown per mode (FTS5's bm25 sign, cosine, RRF k=60 with ranks from 1), `top_k * 2`
candidates per modality, any positive `top_k` (clamped and said so), the output keys, and
`reindex` with `path`/`paths`/working-directory precedence and its edge cases.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import served
from services.mcp.reindex import Reindexer
from services.mcp.scope import Scope
from services.mcp.search import ChunkSearch
from services.wiring import build
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.config import Settings
from shared.model import Principal
from tests.mcp.support import McpClient, http, stdio

CACHE = """# Caching

Intro to caching layers and the cache.

## TTL

The cache ttl controls expiry of entries. Set the ttl to 60 seconds.

## Eviction

LRU eviction drops the least recently used cache entry when memory is full.
"""
NOTES = {
    "cache.md": CACHE,
    "deploy.md": "# Deploy\n\nRoll out the service behind a load balancer; warm the cache first.\n",
    "ops/runbook.md": "# Runbook\n\nWhen the cache ttl is too short, raise it and page the on-call.\n",
    "ops/misc.txt": "Gardening notes: water the tomatoes every morning.\n",
}
MANY = 110  # more chunks than the server's top_k limit (100)
OUTPUT_KEYS = {"query", "mode", "count", "embedding_model", "results"}
RESULT_KEYS = {"chunk_id", "path", "heading_path", "chunk_index", "content", "score_breakdown"}
RRF_K = 60


def _tree(root: Path) -> Path:
    for rel, text in NOTES.items():
        f = root / "notes" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    (root / "other").mkdir()
    (root / "other" / "extra.md").write_text("# Extra\n\nA cache of spare parts in the shed.\n")
    (root / "many").mkdir()
    for i in range(MANY):
        (root / "many" / f"m{i:03d}.md").write_text(f"# Item {i}\n\nwidget number {i} in the widget pile.\n")
    return root


@pytest.fixture(scope="module", params=["stdio", "http"])
def rig(request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, McpClient, Path]]:
    root = _tree(Path(tmp_path_factory.mktemp(f"seed002-{request.param}")) / "corpus")
    data = root.parent / "data"
    roots = json.dumps([str(root)])
    if request.param == "stdio":  # a Rifflux host launches its server in the folder to index
        c = stdio(data, cwd=root / "notes", VIBE_MCP_REINDEX_ROOTS=roots)
        try:
            yield "stdio", c, root
        finally:
            c.close()
    else:
        with served(data, env={"VIBE_MCP_REINDEX_ROOTS": roots}) as s:
            c = http(s.base, "k-alice")
            try:
                yield "http", c, root
            finally:
                c.close()


@pytest.fixture(scope="module")
def indexed(rig: tuple[str, McpClient, Path]) -> tuple[str, McpClient, Path]:
    _, c, root = rig
    out = c.ok("reindex", {"paths": [str(root / "notes")]})
    assert out["indexed_files"] == len(NOTES)
    assert c.ok("reindex", {"path": str(root / "many"), "collection": "many"})["indexed_files"] == MANY
    return rig


def _search(c: McpClient, **args: Any) -> dict[str, Any]:
    out = c.ok("search_rifflux", args)
    assert set(out) >= OUTPUT_KEYS and out["count"] == len(out["results"])  # AC-006, count == len(results)
    for r in out["results"]:
        assert set(r) >= RESULT_KEYS
    return out


# --- search_rifflux -----------------------------------------------------------------------------


def test_db_path_is_accepted_and_never_opened(indexed: tuple[str, McpClient, Path], tmp_path: Path) -> None:
    """The seed's input contract lists `db_path`: a call with it succeeds, answers from the
    server's store, and the server neither opens nor creates the file a caller names."""
    _, c, _ = indexed
    other = tmp_path / "rifflux.db"  # a real Rifflux-style SQLite file with its own text
    con = sqlite3.connect(other)
    con.execute("CREATE VIRTUAL TABLE chunks USING fts5(content)")
    con.execute("INSERT INTO chunks VALUES ('zebra migration patterns')")
    con.commit()
    con.close()
    missing = tmp_path / "nowhere" / "absent.db"
    plain = _search(c, query="cache ttl", top_k=5, mode="lexical")
    for db_path in (str(other), str(missing)):
        got = _search(c, db_path=db_path, query="cache ttl", top_k=5, mode="lexical")
        assert got["results"] == plain["results"]  # the server's own store answered
        assert got["diagnostics"]["db_path"]["used"] is False
    assert _search(c, db_path=str(other), query="zebra", mode="lexical")["results"] == []
    assert not missing.parent.exists()  # nothing was created where the caller pointed
    assert "diagnostics" not in plain or "db_path" not in plain["diagnostics"]


def test_lexical_breakdown_is_exactly_fts5_bm25(indexed: tuple[str, McpClient, Path]) -> None:
    """AC-001: `{"bm25": x}` only, with SQLite FTS5's convention: negative, lower is better,
    results in ascending bm25 order (ORDER BY bm25(...))."""
    _, c, _ = indexed
    out = _search(c, query="cache ttl", top_k=5, mode="lexical")
    assert out["mode"] == "lexical" and out["count"] >= 2
    scores = [r["score_breakdown"]["bm25"] for r in out["results"]]
    assert all(set(r["score_breakdown"]) == {"bm25"} for r in out["results"])
    assert all(isinstance(s, float) and s < 0 for s in scores)
    assert scores == sorted(scores)  # best (lowest) first
    assert "ttl" in out["results"][0]["content"].lower()


def test_semantic_breakdown_is_exactly_cosine_descending(indexed: tuple[str, McpClient, Path]) -> None:
    """AC-002 with the seed's own example call (`"cache ttl", top_k=5, mode="semantic"`)."""
    _, c, _ = indexed
    out = _search(c, query="cache ttl", top_k=5, mode="semantic")
    assert 0 < out["count"] <= 5
    cos = [r["score_breakdown"]["cosine"] for r in out["results"]]
    assert all(set(r["score_breakdown"]) == {"cosine"} for r in out["results"])
    assert all(-1.0 <= x <= 1.0 for x in cos) and cos == sorted(cos, reverse=True)


def test_hybrid_breakdown_is_rrf_k60_ranks_from_one(indexed: tuple[str, McpClient, Path]) -> None:
    """AC-003/AC-007: `{rrf, lexical_rank, semantic_rank}` only; rrf = Σ 1/(60 + rank) over the
    lists a chunk is in (ranks from 1, null when absent); descending rrf order."""
    _, c, _ = indexed
    out = _search(c, query="cache ttl eviction gardening", top_k=5, mode="hybrid")
    assert out["count"] > 0
    for r in out["results"]:
        b = r["score_breakdown"]
        assert set(b) == {"rrf", "lexical_rank", "semantic_rank"}
        ranks = [x for x in (b["lexical_rank"], b["semantic_rank"]) if x is not None]
        assert ranks and all(isinstance(x, int) and x >= 1 for x in ranks)
        assert b["rrf"] == pytest.approx(sum(1 / (RRF_K + x) for x in ranks))
    rrfs = [r["score_breakdown"]["rrf"] for r in out["results"]]
    assert rrfs == sorted(rrfs, reverse=True)
    lex_ranks = sorted(r["score_breakdown"]["lexical_rank"] for r in out["results"]
                       if r["score_breakdown"]["lexical_rank"] is not None)
    assert lex_ranks[0] == 1  # ranks start at 1


def test_candidates_are_top_k_times_two_per_modality(indexed: tuple[str, McpClient, Path]) -> None:
    """REQ-006: with top_k=1 each modality contributes its first 2 candidates, so no rank above 2
    can appear; with top_k=3, none above 6."""
    _, c, _ = indexed
    for top_k in (1, 3):
        out = _search(c, query="widget pile number", top_k=top_k, mode="hybrid", collection="many")
        assert out["count"] == top_k
        for r in out["results"]:
            b = r["score_breakdown"]
            assert all(x is None or x <= 2 * top_k for x in (b["lexical_rank"], b["semantic_rank"]))


def test_any_positive_top_k_is_served_clamped_and_said(indexed: tuple[str, McpClient, Path]) -> None:
    """AC-005: any positive top_k is accepted and count <= top_k; above the server's limit the
    answer holds at most the limit and says so."""
    _, c, _ = indexed
    for mode in ("lexical", "semantic", "hybrid"):
        out = _search(c, query="widget", top_k=500, mode=mode, collection="many")
        assert out["count"] == 100 and out["diagnostics"]["top_k"] == {
            "requested": 500, "applied": 100, "reason": out["diagnostics"]["top_k"]["reason"]}
        assert "VIBE_MCP_MAX_TOP_K" in out["diagnostics"]["top_k"]["reason"]
    huge = _search(c, query="widget", top_k=10**12, mode="lexical", collection="many")
    assert huge["count"] == 100
    small = _search(c, query="widget", top_k=7, mode="lexical", collection="many")
    assert small["count"] == 7 and "diagnostics" not in small
    for bad in (0, -5):
        assert c.error("search_rifflux", {"query": "widget", "top_k": bad}) == "invalid_params"


def test_defaults_are_hybrid_and_ten(indexed: tuple[str, McpClient, Path]) -> None:
    _, c, _ = indexed
    out = _search(c, query="widget", collection="many")
    assert out["mode"] == "hybrid" and out["count"] == 10 and out["query"] == "widget"


def test_each_modality_is_asked_for_top_k_times_two_then_fused_by_rrf(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """REQ-006 and RRF-001..003 on the real engines, in process: each enabled leg is queried for
    exactly `top_k * 2` candidates (a disabled one not at all), and the hybrid answer is the RRF
    (k=60, ranks from 1) of the lexical and semantic rankings of that depth, truncated to top_k."""
    root = tmp_path / "files"
    root.mkdir()
    for i in range(30):
        # every chunk a different mix, so no two tie in either leg (a tie at the cut could go either way)
        (root / f"w{i:02d}.md").write_text(f"# W{i}\n\n{'widget ' * (1 + i)}pile {i} {'gear ' * (i % 5)}\n")
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                       mcp_reindex_roots=[root]))
    alice = Principal("ta", ("user:alice",), frozenset({"read", "write"}))
    registry = SqliteCitationRegistry(tmp_path / "cit.sqlite3")
    try:
        assert Reindexer(c).run(alice, str(root), None, False, None)["indexed_files"] == 30
        asked: list[tuple[str, int]] = []
        lex_search, vec_search = c.lexical.search, c.vectors.search

        def lexical(flt: Any, text: str, limit: int) -> Any:
            asked.append(("lexical", limit))
            return lex_search(flt, text, limit)

        def vectors(space: str, flt: Any, vec: list[float], limit: int, **kw: Any) -> Any:
            asked.append(("semantic", limit))
            return vec_search(space, flt, vec, limit, **kw)

        monkeypatch.setattr(c.lexical, "search", lexical)  # recorders around the real engines
        monkeypatch.setattr(c.vectors, "search", vectors)
        s = ChunkSearch(c, registry)
        scope = Scope((c.settings.mcp_collection,))
        for top_k in (1, 4):
            legs = {}
            for mode in ("lexical", "semantic"):
                asked.clear()
                legs[mode] = [f.key for f in s.run(alice, "widget gear", mode, top_k * 2, scope).ranking]
                assert asked == [(mode, top_k * 4)]  # asked alone for 2 * (2 * top_k): its full ranking
            asked.clear()
            fused = s.run(alice, "widget gear", "hybrid", top_k, scope).ranking
            assert sorted(asked) == [("lexical", top_k * 2), ("semantic", top_k * 2)]
            lex = {k: i for i, k in enumerate(legs["lexical"][:top_k * 2], 1)}
            sem = {k: i for i, k in enumerate(legs["semantic"][:top_k * 2], 1)}
            want = sorted(((sum(1 / (RRF_K + r) for r in (lex.get(k), sem.get(k)) if r is not None), k)
                           for k in set(lex) | set(sem)), key=lambda x: (-x[0], x[1].collection, x[1].doc_id))
            assert [(f.key, f.lexical_rank, f.semantic_rank) for f in fused] == \
                [(k, lex.get(k), sem.get(k)) for _, k in want[:top_k]]
            assert [f.score for f in fused] == pytest.approx([x for x, _ in want[:top_k]])
    finally:
        registry.close()
        c.store.close()


# --- reindex ------------------------------------------------------------------------------------


def test_reindex_paths_win_over_path_and_aggregate(indexed: tuple[str, McpClient, Path]) -> None:
    """AC-008/009: with both, only `paths` is read (a `path` outside the roots is not even
    looked at); counts are summed over the locations and `indexed_paths` lists them."""
    _, c, root = indexed
    out = c.ok("reindex", {"path": "/etc", "paths": [str(root / "notes"), str(root / "other")], "force": True})
    assert (out["indexed_files"], out["skipped_files"]) == (len(NOTES) + 1, 0)
    assert out["indexed_paths"] == [str(root / "notes"), str(root / "other")]
    assert {"embedding_model", "embedding_backend"} <= set(out)
    again = c.ok("reindex", {"paths": [str(root / "notes"), str(root / "other")]})
    assert (again["indexed_files"], again["skipped_files"]) == (0, len(NOTES) + 1)  # unchanged: skipped


def test_reindex_empty_paths_uses_path(indexed: tuple[str, McpClient, Path]) -> None:
    """Edge case `paths=[]`: `path` is used, and the single-location answer has no indexed_paths."""
    _, c, root = indexed
    out = c.ok("reindex", {"path": str(root / "other"), "paths": [], "force": True})
    assert (out["indexed_files"], out["skipped_files"]) == (1, 0) and "indexed_paths" not in out
    assert c.error("reindex", {"path": "", "paths": []}) == "invalid_params"  # empty is not omitted


def test_reindex_without_locations_reads_the_working_directory_only_when_allowed(
        indexed: tuple[str, McpClient, Path]) -> None:
    """AC-010: no path and no paths = the server's working directory. The stdio server runs in
    <root>/notes, an allowed root; the served app's working directory is not, and the refusal
    names the setting that would allow it."""
    kind, c, _ = indexed
    args: dict[str, Any]
    for args in ({}, {"paths": []}, {"path": None, "paths": None}):
        err, body = c.call("reindex", args)
        if kind == "stdio":
            assert not err and body["indexed_files"] + body["skipped_files"] == len(NOTES), body
        else:
            assert err and body["error"]["code"] == "invalid_params"
            assert "VIBE_MCP_REINDEX_ROOTS" in body["error"]["message"]
