"""Hardening over streamable HTTP against a served app: extract_key_info isolation, reserved
task collections and the material budget; reindex roots, symlinks and existence-neutral
errors; bounds on every tool input."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import blake3
import pytest

from harness.server import Served, served
from services.core.secret import SECRET_FILE, key_ref, task_names
from tests.mcp.support import McpClient, http

ENG = ["user:ann", "group:eng"]
KEYS = [
    {"key": "k-ann", "tenant": "ta", "principals": ENG, "scopes": ["read"]},
    {"key": "k-ann2", "tenant": "ta", "principals": ENG, "scopes": ["read"]},  # same identity, another key
    {"key": "k-mal", "tenant": "ta", "principals": ["user:mal"], "scopes": ["read", "write"]},
    {"key": "k-small", "tenant": "ta", "principals": ["user:small"], "scopes": ["read"]},
    {"key": "k-small2", "tenant": "ta", "principals": ["user:small"], "scopes": ["read"]},
]
CHARS, CHUNKS = 3000, 8


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = Path(tmp_path_factory.mktemp("hardening"))
    root, other, outside = top / "root", top / "root2", top / "outside"
    for d in (root / "docs", other, outside / "deep"):
        d.mkdir(parents=True)
    (root / "docs" / "inside.md").write_text("# Inside\n\nInside handbook about zebras.\n")
    (other / "target.md").write_text("# Target\n\nLinked target about giraffes.\n")
    (outside / "secret.md").write_text("# Secret\n\nOutside secret about pangolins.\n")
    (outside / "deep" / "more.md").write_text("Deep outside note about pangolins.\n")
    (root / "docs" / "link-in.md").symlink_to(other / "target.md")  # target inside another root
    (root / "docs" / "link-out.md").symlink_to(outside / "secret.md")  # target leaves every root
    (root / "docs" / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "escape").symlink_to(outside, target_is_directory=True)
    return top


@pytest.fixture(scope="module")
def srv(tree: Path) -> Iterator[Served]:
    env = {"VIBE_MCP_REINDEX_ROOTS": f"{tree / 'root'}{os.pathsep}{tree / 'root2'}",  # not JSON
           "VIBE_EXTRACT_DAILY_CHARS_PER_KEY": str(CHARS), "VIBE_EXTRACT_DAILY_CHUNKS_PER_KEY": str(CHUNKS),
           "VIBE_ENABLE_INNER_VOICE": "1"}
    with served(tree / "data", env=env, keys=KEYS) as s:
        yield s


@pytest.fixture(scope="module")
def clients(srv: Served) -> Iterator[dict[str, McpClient]]:
    cs = {k["key"]: http(srv.base, k["key"]) for k in KEYS}
    yield cs
    for c in cs.values():
        c.close()


def _old_names(principals: list[str], task: str) -> tuple[str, str]:
    """How task collections were named before: anyone in the tenant could compute them."""
    owner = blake3.blake3(("ta\x1f" + "\x1f".join(sorted(principals))).encode()).hexdigest()[:32]
    h = blake3.blake3(f"{owner}\x1f{task}".encode()).hexdigest()[:24]
    return f"mcp-task-{h}", f"mcp-task:{h}"


def _real_names(srv: Served, key: str, task: str) -> tuple[str, str]:
    secret = (srv.data_dir / SECRET_FILE).read_text().strip().encode()
    return task_names(secret, key_ref(secret, key), task)


def _extract(c: McpClient, task: str, query: str, materials: str) -> list[str]:
    return c.extract({"query": query, "materials": materials, "task_id": task, "topK": 20})[0]


# --- extract_key_info isolation------------------------------------------------------------------------


def test_another_user_cannot_plant_materials_in_a_task(srv: Served, clients: dict[str, McpClient]) -> None:
    ann = clients["k-ann"]
    assert _extract(ann, "plan", "launch date", "Launch is on March 10.") == ["Launch is on March 10."]
    planted = {"content": "Launch date moved to April 1, says the attacker.", "_id": "x"}
    for col, token in (_old_names(ENG, "plan"), _real_names(srv, "k-ann", "plan")):
        doc = {**planted, "_acl": [token]}
        for name in (col, col.upper()):
            r = srv.put("k-mal", name, "x", doc)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
            r = srv.bulk("k-mal", name, [doc])
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
    got = _extract(ann, "plan", "launch date", "Budget is small.")
    assert "Launch is on March 10." in got and not [c for c in got if "attacker" in c]


def test_task_collections_are_not_served_by_the_documents_api(srv: Served, clients: dict[str, McpClient]) -> None:
    ann = clients["k-ann"]
    _extract(ann, "docs-api", "colour", "The kite is red.")
    col, _ = _real_names(srv, "k-ann", "docs-api")
    doc_id = blake3.blake3(b"The kite is red.").hexdigest()[:32]
    for key in ("k-ann", "k-mal"):
        for method in ("GET", "DELETE"):
            r = srv.call(method, f"/v1/collections/{col}/docs/{doc_id}", key)
            assert r.status_code in (400, 403, 404), r.text  # 403: k-ann is read-only
        for collection in (col, "any"):
            r = srv.read(key, collection=collection, q="kite red")
            assert r.status_code in (200, 400, 404), r.text
            assert r.status_code != 200 or r.json()["results"] == []
    assert _extract(ann, "docs-api", "colour", "The kite is red.") == ["The kite is red."]  # still there


def test_two_keys_with_the_same_principals_never_share_materials(clients: dict[str, McpClient]) -> None:
    assert _extract(clients["k-ann"], "shared", "secret code", "Alpha secret code is 1234.")
    got = _extract(clients["k-ann2"], "shared", "secret code", "Beta note about the secret code.")
    assert got == ["Beta note about the secret code."]


def test_material_budget_per_key_per_day(srv: Served, clients: dict[str, McpClient]) -> None:
    small, small2 = clients["k-small"], clients["k-small2"]
    paras = [f"Paragraph {i} tells of walrus number {i} resting on the ice." for i in range(CHUNKS + 1)]
    err, body = small.call("extract_key_info", {"query": "walrus", "materials": "\n\n".join(paras), "task_id": "t"})
    assert err and body["error"]["code"] == "quota_exceeded"  # 9 new chunks > 8
    d = body["error"]["details"]
    assert (d["quota"], d["limit"], d["requested"]) == ("material_chunks_per_day", CHUNKS, CHUNKS + 1)
    assert d["retry_after_seconds"] > 0
    got, ok = small.extract({"query": "walrus", "materials": "\n\n".join(paras[:CHUNKS]), "topK": 20, "task_id": "t"})
    assert ok["ingested_chunks"] == CHUNKS and not [c for c in got if f"number {CHUNKS} " in c]
    _, again = small.extract({"query": "walrus", "materials": "\n\n".join(paras[:CHUNKS]), "task_id": "t"})
    assert again["ingested_chunks"] == 0  # re-sending stored chunks costs characters, not chunks
    used = 2 * len("\n\n".join(paras[:CHUNKS]))  # refused calls are not charged
    big = "Seals " * ((CHARS - used) // 6 + 10)
    err, body = small.call("extract_key_info", {"query": "seals", "materials": big, "task_id": "other"})
    assert err and body["error"]["code"] == "quota_exceeded"
    assert body["error"]["details"]["quota"] == "materials_chars_per_day"
    assert body["error"]["details"]["used"] == used
    # another key of the same identity has its own budget (k-small's chunks are all spent)
    _, mine = small2.extract({"query": "walrus", "materials": "\n\n".join(paras[:CHUNKS]), "task_id": "t"})
    assert mine["ingested_chunks"] == CHUNKS
    db = sqlite3.connect(srv.data_dir / "mcp_audit.sqlite3")
    rows = db.execute("SELECT outcome, extra FROM tool_calls WHERE tool='extract_key_info'").fetchall()
    assert "quota_exceeded" in {r[0] for r in rows}
    assert len({json.loads(r[1])["key"] for r in rows}) >= 2 and not any("k-small" in r[1] for r in rows)


# --- reindex roots -------------------------------------------------------------------------------


def test_reindex_does_not_follow_symlinks_out_of_the_roots(tree: Path, clients: dict[str, McpClient]) -> None:
    mal = clients["k-mal"]
    out = mal.ok("reindex", {"path": str(tree / "root" / "docs"), "collection": "links"})
    assert (out["indexed_files"], out["skipped_files"]) == (2, 1)  # inside.md, link-in.md; link-out.md skipped
    for q in ("pangolins", "outside secret", "deep outside note"):
        assert mal.ok("search", {"query": q, "mode": "lexical", "collection": "links"})["results"] == []
    hit = mal.ok("search", {"query": "giraffes", "mode": "lexical", "collection": "links"})["results"]
    assert [r["path"] for r in hit] == ["link-in.md"]  # a link inside the roots is indexed under its own name
    err, body = mal.call("reindex", {"path": str(tree / "root" / "escape")})  # a location that leaves the roots
    assert err and body["error"]["code"] == "invalid_params" and "outside" not in body["error"]["message"]


def test_reindex_answers_alike_for_missing_and_forbidden_paths(tree: Path, clients: dict[str, McpClient]) -> None:
    mal = clients["k-mal"]
    answers = set()
    for given in (str(tree / "root" / "nope"), str(tree / "outside"), "/etc", "/no/such/dir", "../../../etc",
                  str(tree / "root" / "escape" / "secret.md"), str(tree / "root" / "escape" / "missing.md")):
        err, body = mal.call("reindex", {"path": given})
        assert err, body
        answers.add((body["error"]["code"], body["error"]["message"].replace(repr(given), "<path>")))
    assert len(answers) == 1 and next(iter(answers))[0] == "invalid_params"


# --- input bounds -------------------------------------------------------------------------------


def test_every_tool_input_is_bounded(tree: Path, clients: dict[str, McpClient]) -> None:
    ann, mal = clients["k-ann"], clients["k-mal"]
    long_q = "q" * 4097
    refused = [
        (ann, "search", {"query": long_q}),
        (ann, "search", {"query": "x", "db_path": "d" * 4097}),
        (ann, "search", {"query": "x", "top_k": 0}),
        (ann, "search", {"query": "x", "scope": {"document_ids": [str(i) for i in range(1001)]}}),
        (ann, "search", {"query": "x", "scope": {"paths": ["p" * 1025]}}),
        (ann, "search", {"query": "x", "collection": "mcp-task-0123"}),
        (ann, "search", {"query": "x", "scope": {"collection_ids": ["MCP-TASK-0123"]}}),
        (ann, "citations.resolve", {"conversation_id": "c", "numbers": list(range(1, 1002))}),
        (ann, "citations.resolve", {"conversation_id": "c", "numbers": [10**12]}),
        (ann, "citations.resolve", {"conversation_id": "c", "text": "[1] " * 50_001}),
        (ann, "citations.resolve", {"conversation_id": "c" * 257}),
        (ann, "inner_voice.retrieve", {"query": long_q}),
        (ann, "inner_voice.retrieve", {"query": "x", "include_tags": [f"t{i}" for i in range(101)]}),
        (ann, "inner_voice.retrieve", {"query": "x", "exclude_tags": ["t" * 1025]}),
        (ann, "extract_key_info", {"query": "q" * 2001, "materials": "m", "task_id": "t"}),
        (ann, "extract_key_info", {"query": "q", "materials": "m", "topK": 21, "task_id": "t"}),
        (ann, "extract_key_info", {"query": "q", "materials": "m", "task_id": "t" * 129}),
        (mal, "reindex", {"paths": [str(tree / "root" / "docs")] * 65}),
        (mal, "reindex", {"path": str(tree / "root") + "/" + "a" * 4097}),
        (mal, "reindex", {"path": "bad\x00path"}),
        (mal, "reindex", {"path": str(tree / "root" / "docs"), "collection": "mcp-task-x"}),
    ]
    for client, tool, args in refused:
        assert client.error(tool, args) == "invalid_params", (tool, {k: str(v)[:40] for k, v in args.items()})
    err, body = ann.call("extract_key_info", {"query": "q", "materials": "m" * 200_001, "task_id": "t"})
    assert err and body["error"]["code"] == "payload_too_large"
    # at the limits, calls are served
    assert ann.ok("search", {"query": "q" * 4096, "top_k": 100, "mode": "lexical"})["count"] == 0
    # a top_k past the limit is served at the limit, and the answer says so
    assert ann.ok("search", {"query": "x", "top_k": 101})["diagnostics"]["top_k"]["applied"] == 100
    assert ann.ok("citations.resolve", {"conversation_id": "c", "numbers": list(range(1, 1001))})["citations"] == {}
