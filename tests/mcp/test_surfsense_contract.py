"""A SurfSense agent, calling `search_knowledge_base(query, scope?)` exactly as the SurfSense
citation architecture describes, works unchanged against this server, over stdio and over
streamable HTTP, with the official MCP client.

Each test fails on one item: the scope with every kind of id (document, folder, connector,
thread) accepted, each a constraint that only narrows what the caller may read; folder ids as
ids (not path prefixes); the text a model reads carrying `[n]` as the only number next to each
passage (no document or chunk ids); and `[n]` → `[citation:n]` rewriting only real citations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, served
from tests.mcp.support import McpClient, http, stdio

DOCS: list[dict[str, Any]] = [  # seed passages; connector-synced and chat documents
    {"_id": "42", "title": "Q3 Launch Notes", "content": "We agreed to push launch to March 10."},
    {"_id": "43", "title": "Timeline", "content": "Dates floated for the launch were Mar 10 and Mar 17."},
    {"_id": "slack-9001", "content": "Launch retro thread: the launch slipped because of QA.", "connector_id": 3,
     "thread_id": 7},
    {"_id": "slack-9002", "content": "Launch budget approved in the sales channel.", "connector_id": 3,
     "thread_id": 8, "_acl": ["group:sales"]},  # alice may not read it
    {"_id": "spec-1", "title": "Launch Spec", "content": "The launch spec lists March 17 as the fallback.",
     "folder_id": 7},
    {"_id": "spec-2", "title": "Launch Spec v2", "content": "The launch spec v2 keeps March 10.",
     "folder_id": "specs"},
]
SEED_SCOPE = {"document_ids": [42], "folder_ids": [], "connector_ids": [], "thread_ids": []}
INTRO = "Excerpts retrieved from the user's knowledge base for this query."


def _files(root: Path) -> None:
    (root / "notes" / "specs").mkdir(parents=True)
    (root / "notes" / "plan.md").write_text("# Plan\n\nThe launch plan targets March 10.\n")
    (root / "notes" / "specs" / "api.md").write_text("# API\n\nThe launch API freeze is on March 3.\n")


@pytest.fixture(scope="module", params=["stdio", "http"])
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[McpClient, McpClient | None, Path]]:
    """(alice, bob or None, corpus root). Documents are written through the HTTP API first;
    the stdio server then opens the same data directory, as a local agent host would."""
    root = Path(tmp_path_factory.mktemp(f"seed001-{request.param}"))
    _files(root)
    env = {"VIBE_MCP_REINDEX_ROOTS": json.dumps([str(root)])}
    data = root / "data"
    if request.param == "stdio":
        with served(data, env=env) as s:
            _write(s)
        c = stdio(data, cwd=root, **env)
        try:
            yield c, None, root
        finally:
            c.close()
    else:
        with served(data, env=env) as s:
            _write(s)
            alice, bob = http(s.base, "k-alice"), http(s.base, "k-bob")
            try:
                yield alice, bob, root
            finally:
                alice.close()
                bob.close()


def _write(s: Served) -> None:
    r = s.bulk("k-alice", "kb", DOCS)
    assert r.status_code == 200 and all(x.get("ok", True) for x in r.json().get("results", [])), r.text


def _skb(c: McpClient, **args: Any) -> dict[str, Any]:
    out = c.ok("search_knowledge_base", {"rerank": False, **args})
    assert out["count"] == len(out["results"])
    return out


def _docs(c: McpClient, scope: dict[str, Any], query: str = "launch") -> set[str]:
    return {r["document_id"] for r in _skb(c, query=query, scope=scope)["results"]}


def test_seed_scope_verbatim_pins_the_document_and_still_ranks(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    alice, _, _ = rig
    out = _skb(alice, query="When is the launch?", scope=SEED_SCOPE, conversation_id="seed-verbatim")
    assert [r["document_id"] for r in out["results"]] == ["42"] and out["results"][0]["n"] == 1
    lines = out["context"].splitlines()
    assert lines[:3] == ["<retrieved_context>", INTRO, "Cite a passage with its [n]."]
    assert 'Document: "Q3 Launch Notes" (kb)' in lines and "  [1] We agreed to push launch to March 10." in lines


def test_connector_and_thread_ids_are_accepted_and_only_narrow(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    """A connector id is the `connector_id` a document carries, a thread id its `thread_id`;
    integer and string ids are one id; a document the caller may not read never appears, however
    it is scoped; an unknown id matches nothing."""
    alice, bob, _ = rig
    for scope in ({**SEED_SCOPE, "document_ids": [], "connector_ids": [3]}, {"connector_ids": ["3"]},
                  {"thread_ids": [7]}, {"thread_ids": ["7"], "connector_ids": [3]}):
        assert _docs(alice, scope) == {"slack-9001"}, scope
    assert _docs(alice, {"thread_ids": [8]}) == set()  # slack-9002 is in thread 8, but not alice's to read
    assert _docs(alice, {"connector_ids": [999]}) == set() and _docs(alice, {"thread_ids": ["nope"]}) == set()
    if bob is not None:  # bob may read both
        assert _docs(bob, {"connector_ids": [3]}) == {"slack-9001", "slack-9002"}
        assert _docs(bob, {"thread_ids": [8]}) == {"slack-9002"}


def test_scope_kinds_are_and_ed(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    alice, _, _ = rig
    assert _docs(alice, {"document_ids": ["slack-9001"], "thread_ids": [7]}) == {"slack-9001"}
    assert _docs(alice, {"document_ids": [42], "thread_ids": [7]}) == set()
    assert _docs(alice, {"connector_ids": [3], "folder_ids": [7]}) == set()


def test_folder_ids_are_ids_not_paths(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    """An API document's folder is its `folder_id`; a reindexed file's folder ids come back in
    results, and a folder's id covers its subfolders. A path given as a folder id matches
    nothing (paths have their own key)."""
    alice, _, root = rig
    assert _docs(alice, {"folder_ids": [7]}) == {"spec-1"} and _docs(alice, {"folder_ids": ["7"]}) == {"spec-1"}
    assert _docs(alice, {"folder_ids": ["specs"]}) == {"spec-2"}
    assert alice.ok("reindex", {"path": str(root / "notes"), "collection": "notes"})["indexed_files"] == 2
    plan = _skb(alice, query="launch plan targets", collection="notes", scope={"paths": ["plan.md"]})["results"][0]
    api = _skb(alice, query="launch API freeze", collection="notes", scope={"paths": ["specs"]})["results"][0]
    assert isinstance(plan["folder_id"], int) and isinstance(api["folder_id"], int)
    assert plan["folder_id"] != api["folder_id"]
    titles = {r["title"] for r in _skb(alice, query="launch", collection="notes",
                                       scope={"folder_ids": [plan["folder_id"]]})["results"]}
    assert titles == {"plan.md", "specs/api.md"}  # the notes folder holds the specs subfolder
    only = _skb(alice, query="launch", collection="notes", scope={"folder_ids": [str(api["folder_id"])]})
    assert {r["title"] for r in only["results"]} == {"specs/api.md"}
    for path_like in (["specs"], ["notes"], ["/"], [str(root / "notes")]):
        assert _skb(alice, query="launch", collection="notes", scope={"folder_ids": path_like})["results"] == []


def test_the_text_a_model_reads_has_only_n_next_to_passages(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    """The tool result's text is the `<retrieved_context>` alone: no document ids, chunk ids or
    scores (an untitled document is not labelled by its key); `[n]` is its only bracketed
    integer, and every `[n]` is one of the returned passages."""
    alice, _, _ = rig
    res = alice.raw("search_knowledge_base", {"query": "launch retro thread QA", "conversation_id": "read-1",
                                               "rerank": False})
    assert not res.is_error and res.structured_content is not None
    body = res.structured_content
    texts = [b.text for b in res.content]  # type: ignore[union-attr]
    assert texts == [body["context"]]
    text = texts[0]
    assert any(r["document_id"] == "slack-9001" for r in body["results"])
    for r in body["results"]:
        assert r["document_id"] not in text and r["chunk_id"] not in text
    assert "9001" not in text and '"score"' not in text and "Untitled document" in text
    assert sorted(int(n) for n in re.findall(r"(?<!\\)\[(\d+)\]", text)) == sorted(r["n"] for r in body["results"])
    for line in text.splitlines():
        if line.startswith("  ["):  # a passage line: its number, then the passage text
            assert re.match(r"  \[\d+\] \S", line)


def test_reindexed_chunks_show_no_chunk_ids(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    alice, _, root = rig
    alice.ok("reindex", {"path": str(root / "notes"), "collection": "notes"})
    res = alice.raw("search_knowledge_base", {"query": "launch", "collection": "notes", "rerank": False})
    body = res.structured_content
    assert body is not None and body["results"]
    text = res.content[0].text  # type: ignore[union-attr]
    assert all(r["chunk_id"] not in text and r["document_id"] not in text for r in body["results"])
    assert 'Document: "plan.md" (notes)' in text


def test_only_real_citations_are_normalised(rig: tuple[McpClient, McpClient | None, Path]) -> None:
    alice, _, _ = rig
    _skb(alice, query="launch", conversation_id="norm-1")
    text = "Launch is March 10 [1][2]; see a[1], x[2][3], [0] and [007]."
    res = alice.ok("citations.resolve", {"conversation_id": "norm-1", "text": text})
    assert res["normalized_text"] == "Launch is March 10 [citation:1][citation:2]; see a[1], x[2][3], [0] and [007]."
    assert sorted(res["citations"]) == ["1", "2"] and res["unknown"] == []
