"""The inner_voice (`inner_voice.retrieve`) and extract_key_info contracts by their own names and examples,
through the official MCP client over stdio and streamable HTTP.

inner_voice: the contract's configuration names (SURR_ENABLE_INNER_VOICE, SURR_INNER_VOICE_*, MCP_NO_LOG),
clamping at start, the exact snippet keys, `content_hash` as the contract defines it (checked
against an independent implementation of its normalisation), `origin` missing is not
human/green, integer `latency_ms`, `diagnostics.model` without our provider prefix.

extract_key_info: the answer is a list of strings; an embedder failure is retried and then
`embedder_unavailable` (never a lexical-only answer); `Bearer <identity>@<key>` gives the task
(a plain key without task_id uses the default task); task retention purges unused tasks.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import blake3
import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import KEYS, Served, served
from services.core.keyring import KeyRing
from services.mcp.runtime import build_runtime
from services.mcp.tools import Tools
from services.wiring import build
from shared.config import ApiKey, Settings
from tests.mcp.support import McpClient, http, stdio

SNIPPET_KEYS = {"id", "table", "source_type", "origin", "trust_tier", "created_at", "text", "score", "content_hash",
                "span_start", "span_end"}
SEED_REQUEST = {"query": "Patterns in Federation coordination failures", "top_k": 10, "mix": 0.6,
                "include_private": False, "exclude_tags": ["private"]}  # inner_voice's example request


def seed_hash(text: str) -> str:
    """The inner_voice contract's "Content Normalization", step by step as written, then blake3, bare hex."""
    t = unicodedata.normalize("NFKC", text)  # 1
    t = t.lower()  # 2
    t = re.sub(r"\s+", " ", t)  # 3
    t = t.strip()  # 4
    t = "".join(ch for ch in t if unicodedata.category(ch) not in ("Cc", "Cf"))  # 5
    return blake3.blake3(t.encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def voice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpClient]:
    root = Path(tmp_path_factory.mktemp("voice"))
    for folder, texts in {
        "kg": ["Federation coordination failures follow patterns of quorum loss.",
               "Patterns in federation coordination: leaders time out."],
        "thoughts": ["Coordination failures in the federation \u200bfollow  Patterns.\n\nI keep seeing them.",
                     "Federation coordination failures: patterns noted by the tool run."],
    }.items():
        (root / folder).mkdir()
        for i, text in enumerate(texts):
            (root / folder / f"n{i}.md").write_text(text)
    c = stdio(root / "data", VIBE_MCP_REINDEX_ROOTS=json.dumps([str(root)]), SURR_ENABLE_INNER_VOICE="1",
              SURR_INNER_VOICE_MIX="1.7", SURR_INNER_VOICE_TOPK_DEFAULT="99", MCP_NO_LOG="1")
    try:
        for folder in ("kg", "thoughts"):
            assert c.ok("reindex", {"path": str(root / folder), "collection": folder})["indexed_files"] == 2
        yield c
    finally:
        c.close()


def test_seed_000_example_request_by_the_seed_names(voice: McpClient) -> None:
    out = voice.ok("inner_voice.retrieve", {**SEED_REQUEST, "floor": 0.0})
    assert set(out) == {"snippets", "diagnostics"} and out["snippets"]
    for s in out["snippets"]:
        assert set(s) == SNIPPET_KEYS
        assert re.fullmatch(r"[0-9a-f]{64}", s["content_hash"]) and s["content_hash"] == seed_hash(s["text"])
        if s["table"] == "thoughts":  # reindexed notes carry no origin: nothing vouches for them
            assert (s["source_type"], s["origin"], s["trust_tier"]) == ("thought", "unknown", "red")
        else:
            assert s["trust_tier"] == "green" and s["source_type"] in ("kg_entity", "kg_observation")
    assert {s["table"] for s in out["snippets"]} == {"kg", "thoughts"}  # 0 < mix < 1: both sources
    d = out["diagnostics"]
    assert (d["provider"], d["model"], d["dim"], d["k_req"]) == ("hash", "v1@384", 384, 10)
    assert isinstance(d["latency_ms"], int) and d["k_ret"] == len(out["snippets"])
    assert voice.ok("snippets.retrieve", {**SEED_REQUEST, "floor": 0.0})["snippets"] == out["snippets"]  # alias


def test_seed_000_config_is_clamped_at_start(voice: McpClient) -> None:
    """SURR_INNER_VOICE_MIX=1.7 → 1.0 (KG only); SURR_INNER_VOICE_TOPK_DEFAULT=99 → 50."""
    out = voice.ok("inner_voice.retrieve", {"query": "federation coordination failures", "floor": 0.0})
    assert out["diagnostics"]["k_req"] == 50 and {s["table"] for s in out["snippets"]} == {"kg"}


def test_seed_000_names_and_vibe_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_ENABLE_INNER_VOICE", "1")
    monkeypatch.setenv("SURR_INNER_VOICE_MIN_FLOOR", "0.12")
    monkeypatch.setenv("SURR_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE", "99")
    monkeypatch.setenv("MCP_NO_LOG", "1")
    s = Settings()
    assert (s.enable_inner_voice, s.inner_voice_min_floor, s.inner_voice_max_candidates_per_source, s.mcp_no_log) \
        == (True, 0.12, 99, True)
    monkeypatch.setenv("VIBE_ENABLE_INNER_VOICE", "0")
    monkeypatch.setenv("VIBE_MCP_NO_LOG", "0")
    s = Settings()
    # VIBE_* wins when both are set, except the gate: a set SURR_ENABLE_INNER_VOICE alone decides it
    assert (s.enable_inner_voice, s.mcp_no_log) == (True, False)


def test_seed_004_embedder_failure_is_retried_then_embedder_unavailable(tmp_path: Path) -> None:
    with OpenAIProtocolServer(dim=32) as api:
        c = stdio(tmp_path / "data", VIBE_EMBEDDER="openai", VIBE_OPENAI_BASE_URL=api.base_url,
                  VIBE_OPENAI_API_KEY="x", VIBE_BREAKER_FAILURES="1000", VIBE_EXTRACT_EMBED_BACKOFF_SECONDS="0.01")
        try:
            args = {"query": "When is the launch?", "task_id": "launch",
                    "materials": "Launch is on March 10.\n\nThe budget is small."}
            api.fail_next(2, status=500)  # the materials' batch fails twice, the third attempt lands
            got, facts = c.extract(args)
            assert got[0] == "Launch is on March 10." and facts["ingested_chunks"] == 2
            api.fail_next(50, status=500)  # stored materials are ready: now the query embedding fails
            err, body = c.call("extract_key_info", args)
            assert err and body["error"]["code"] == "embedder_unavailable", body  # not a lexical-only answer
            api.clear()
            assert c.extract(args)[0][0] == "Launch is on March 10."
            api.fail_next(50, status=500)
            err, body = c.call("extract_key_info", {**args, "materials": "Fresh material nobody embedded."})
            assert err and body["error"]["code"] == "embedder_unavailable"
        finally:
            api.clear()
            c.close()


@pytest.fixture(scope="module")
def bearer_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("bearer")) / "data",
                env={"VIBE_EXTRACT_TASK_FROM_BEARER": "1"}) as s:
        yield s


def test_seed_004_task_from_bearer_identity(bearer_srv: Served) -> None:
    a, b, plain = http(bearer_srv.base, "plan-a@k-alice"), http(bearer_srv.base, "plan-b@k-alice"), \
        http(bearer_srv.base, "k-alice")
    try:
        got, facts = a.extract({"query": "launch date", "materials": "Launch is on March 10."})
        assert got == ["Launch is on March 10."] and facts["task_id"] == "plan-a"
        got, facts = b.extract({"query": "launch date", "materials": "Budget is small."})
        assert got == ["Budget is small."] and facts["task_id"] == "plan-b"  # plan-a's materials stay apart
        assert plain.extract({"query": "launch date", "materials": "x", "task_id": "plan-a"})[0][0] == \
            "Launch is on March 10."  # the same key naming the task explicitly reaches the same materials
        got, facts = plain.extract({"query": "launch date", "materials": "Nothing about dates."})
        assert got == ["Nothing about dates."] and (facts["task_id"], facts["task_from"]) == ("default", "default")
    finally:
        for c in (a, b, plain):
            c.close()


def test_seed_004_retention_purges_unused_tasks(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                 api_keys=[ApiKey(**k) for k in KEYS])
    c = build(s)
    c.start()
    try:
        ring = KeyRing(list(s.api_keys))
        rt = build_runtime(c, ring)
        t = Tools(rt)
        p = ring.lookup("k-alice")
        assert p is not None
        req = t.key_info.validate("launch", "Launch is on March 10.\n\nBudget is small.", None, None, "old", None)
        assert t.key_info.run(p, "ref-1", req)[0]
        col = {col for tenant, col in rt.tasks.stale(time.time() + 1)}
        assert len(col) == 1
        (name,) = col
        assert len(list(c.store.collection_keys(p.tenant, name))) == 2
        assert t.key_info.purge_before(time.time() - 3600) == 0  # used just now: kept
        assert t.key_info.purge_before(time.time() + 1) == 1
        assert list(c.store.collection_keys(p.tenant, name)) == [] and rt.tasks.stale(time.time() + 1) == []
    finally:
        c.stop()
