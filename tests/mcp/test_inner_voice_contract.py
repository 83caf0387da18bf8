"""An inner_voice client that follows its manual to the letter, through the official MCP client
over streamable HTTP (a served app's /mcp) and stdio (`vibe-semantic mcp`).

- the gate: `SURR_ENABLE_INNER_VOICE=1` and only the exact string "1" turns the tool on; when
  that variable is set it alone decides (`VIBE_ENABLE_INNER_VOICE` is not consulted);
- the manual's example request, argument for argument: the exact snippet keys, the trust-tier
  mapping, 6 KG / 4 thought slots, `exclude_tags`, private thoughts left out, one snippet per
  content hash;
- KG entities, KG observations and thoughts are three sources, each with its own candidate cap
  (a crowd of close entities does not starve observations) and filters that cannot cut a
  source short (private thoughts ranked first do not hide the public ones behind them);
- `MCP_NO_LOG=1`: no audit row and no per-call log line, while the call counters still count.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, served
from tests.mcp.support import McpClient, http, stdio

QUERY = "Patterns in Federation coordination failures"
SEED_REQUEST: dict[str, Any] = {"query": QUERY, "top_k": 10, "mix": 0.6, "include_private": False,
                                "exclude_tags": ["private"]}  # the manual's example, verbatim
SNIPPET_KEYS = {"id", "table", "source_type", "origin", "trust_tier", "created_at", "text", "score", "content_hash",
                "span_start", "span_end"}
DIAGNOSTIC_KEYS = {"provider", "model", "dim", "k_req", "k_ret", "kg_candidates", "thought_candidates", "floor_used",
                   "latency_ms"}
TIERS = {"human": "green", "logged": "green", "tool": "amber", "model": "red"}
ENTITIES = 10
PRIVATE = 12


def _kg() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [{"_id": f"e{i}", "text": f"{QUERY}: entity {i} quorum", "kind": "entity"}
                                  for i in range(ENTITIES)]
    docs += [{"_id": f"o{i}", "text": f"Observation {i}: federation coordination failures recur",
              "kind": "observation"} for i in range(2)]
    docs.append({"_id": "dupk", "text": "Quorum loss stalls federation coordination failures."})
    return docs


def _thoughts() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"_id": f"th-{o}", "text": f"{QUERY}, noted by a {o} source", "origin": o} for o in TIERS]
    docs += [{"_id": "tagged", "text": f"{QUERY} tagged private", "origin": "human", "tags": ["private"]},
             {"_id": "dupt", "text": "QUORUM  loss stalls Federation coordination failures.", "origin": "human"},
             {"_id": "zeta-public", "text": "zeta diary public entry", "origin": "human"}]
    docs += [{"_id": f"zeta-{i}", "text": f"zeta diary {i}", "origin": "human", "is_private": True}
             for i in range(PRIVATE)]
    return docs


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("seed000"))
    # VIBE_ENABLE_INNER_VOICE=0 does not matter: SURR_ENABLE_INNER_VOICE is set, so it alone decides
    env = {"SURR_ENABLE_INNER_VOICE": "1", "VIBE_ENABLE_INNER_VOICE": "0", "MCP_NO_LOG": "1"}
    with served(root / "data", env=env) as s:
        for col, docs in (("kg", _kg()), ("thoughts", _thoughts())):
            assert s.call("POST", "/semantic/promote", "k-admin-a", {"collection": col}).status_code == 200
            assert s.bulk("k-admin-a", col, docs).status_code == 200
            for d in docs:  # inner_voice ranks by vectors only: wait for every embedding
                assert s.wait_status("k-admin-a", col, d["_id"], "ready") == "ready"
        yield s


@pytest.fixture(scope="module")
def bob(srv: Served) -> Iterator[McpClient]:
    c = http(srv.base, "k-bob")
    yield c
    c.close()


def _check_shape(out: dict[str, Any]) -> None:
    assert set(out) == {"snippets", "diagnostics"}
    for s in out["snippets"]:
        assert set(s) == SNIPPET_KEYS
        assert re.fullmatch(r"[0-9a-f]{64}", s["content_hash"])  # bare blake3 hex, as the manual shows
        assert len(s["text"]) <= 800 and 0 <= s["span_start"] <= s["span_end"] == len(s["text"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["created_at"])
    d = out["diagnostics"]
    assert set(d) >= DIAGNOSTIC_KEYS and d["k_ret"] == len(out["snippets"]) and isinstance(d["latency_ms"], int)
    scores = [s["score"] for s in out["snippets"]]
    assert scores == sorted(scores, reverse=True)  # global re-rank by score


def test_the_example_request_over_http(bob: McpClient) -> None:
    out = bob.ok("inner_voice.retrieve", SEED_REQUEST)
    _check_shape(out)
    snippets = out["snippets"]
    tables = [s["table"] for s in snippets]
    assert (tables.count("kg"), tables.count("thoughts")) == (6, 4)  # round(0.6 x 10) KG slots
    assert len({s["content_hash"] for s in snippets}) == len(snippets)
    ids = {s["id"] for s in bob.ok("inner_voice.retrieve", {**SEED_REQUEST, "top_k": 50, "floor": 0.0})["snippets"]}
    assert "t:tagged" not in ids  # exclude_tags ["private"]
    assert not ids & {f"t:zeta-{i}" for i in range(PRIVATE)}  # include_private false
    assert not {"kg:dupk", "t:dupt"} <= ids and {"kg:dupk", "t:dupt"} & ids  # one per content hash
    for s in bob.ok("inner_voice.retrieve", {**SEED_REQUEST, "top_k": 50, "floor": 0.0})["snippets"]:
        if s["table"] == "thoughts":
            assert s["trust_tier"] == TIERS[s["origin"]]
        else:
            assert s["trust_tier"] == "green"
            assert s["source_type"] == ("kg_observation" if s["id"].startswith("kg:o") else "kg_entity")
    assert bob.ok("snippets.retrieve", SEED_REQUEST)["snippets"] == snippets  # the alternative name


def test_entities_and_observations_are_separate_sources_each_with_its_own_cap(bob: McpClient) -> None:
    """top_k 2: each source takes min(3 x 2, 150) = 6 candidates. Ten entities are all closer to
    the query than the two observations; one shared KG cap would have held entities only."""
    d = bob.ok("inner_voice.retrieve", {"query": QUERY, "top_k": 2, "mix": 1.0, "floor": 0.0})["diagnostics"]
    assert (d["kg_entity_candidates"], d["kg_observation_candidates"]) == (6, 2)
    assert d["kg_candidates"] == 8
    obs = bob.ok("inner_voice.retrieve", {"query": "Observation federation coordination failures recur",
                                          "top_k": 2, "mix": 1.0, "floor": 0.0})["snippets"]
    assert [s["source_type"] for s in obs] == ["kg_observation", "kg_observation"]


def test_private_thoughts_ranked_first_do_not_hide_the_public_one(bob: McpClient) -> None:
    """Twelve private thoughts outrank the one public thought; the first engine query (3 x the
    cap of 3) holds private ones only, so the source widens its query instead of coming back empty."""
    out = bob.ok("inner_voice.retrieve", {"query": "zeta diary", "top_k": 1, "mix": 0.0, "floor": 0.0})
    assert [s["id"] for s in out["snippets"]] == ["t:zeta-public"]
    mine = bob.ok("inner_voice.retrieve", {"query": "zeta diary", "top_k": 1, "mix": 0.0, "floor": 0.0,
                                           "include_private": True})["snippets"]
    assert mine[0]["id"].startswith("t:zeta-") and mine[0]["id"] != "t:zeta-public"


def test_mcp_no_log_keeps_counters_only(srv: Served, bob: McpClient) -> None:
    before = _calls(srv, "inner_voice.retrieve")
    bob.ok("inner_voice.retrieve", SEED_REQUEST)
    assert bob.error("inner_voice.retrieve", {"query": "   "}) == "invalid_params"
    assert _calls(srv, "inner_voice.retrieve") == before + 2  # the counters still count
    audit = srv.data_dir / "mcp_audit.sqlite3"
    assert _audit_rows(audit) == 0  # no audit row
    lines = [json.loads(x) for x in srv.log().splitlines() if x.startswith("{")]
    assert not [x for x in lines if x.get("msg") in ("tool call", "inner_voice.retrieve")]  # no call log line
    assert not [x for x in lines if x.get("path") == "/mcp"]  # nor an access line per call
    assert [x for x in lines if x.get("logger") == "vibe.access"]  # other requests are still logged


def _calls(srv: Served, tool: str) -> float:
    body = srv.call("GET", "/metrics", None).text
    pat = re.compile(rf'^tool_calls_total\{{[^}}]*tool="{re.escape(tool)}"[^}}]*\}} ([0-9.e+]+)$', re.M)
    return sum(float(m) for m in pat.findall(body))


def _audit_rows(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(path)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name='tool_calls'").fetchone():
            return 0
        return int(db.execute("SELECT count(*) FROM tool_calls").fetchone()[0])
    finally:
        db.close()


# --- stdio -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = Path(tmp_path_factory.mktemp("seed000-notes"))
    for folder, texts in {"kg": [f"{QUERY}: quorum loss {i}." for i in range(8)],
                          "thoughts": [f"{QUERY}: I keep seeing them ({i})." for i in range(8)]}.items():
        (root / folder).mkdir()
        for i, text in enumerate(texts):
            (root / folder / f"n{i}.md").write_text(text)
    return root


@pytest.mark.parametrize("value", ["true", "yes", " 1", "0"])
def test_only_the_string_1_opens_the_gate_over_stdio(tmp_path: Path, value: str) -> None:
    c = stdio(tmp_path / "data", SURR_ENABLE_INNER_VOICE=value, VIBE_ENABLE_INNER_VOICE="1")
    try:
        assert c.error("inner_voice.retrieve", SEED_REQUEST) == "feature_disabled"
    finally:
        c.close()


def test_the_example_request_over_stdio_and_the_audit_row_without_mcp_no_log(notes: Path) -> None:
    data = notes / "data"
    c = stdio(data, VIBE_MCP_REINDEX_ROOTS=json.dumps([str(notes)]), SURR_ENABLE_INNER_VOICE="1",
              VIBE_ENABLE_INNER_VOICE="0")
    try:
        for folder in ("kg", "thoughts"):
            assert c.ok("reindex", {"path": str(notes / folder), "collection": folder})["indexed_files"] == 8
        out = c.ok("inner_voice.retrieve", SEED_REQUEST)
        _check_shape(out)
        tables = [s["table"] for s in out["snippets"]]
        assert (tables.count("kg"), tables.count("thoughts")) == (6, 4)
        assert out["diagnostics"]["k_req"] == 10
    finally:
        c.close()
    assert _audit_rows(data / "mcp_audit.sqlite3") >= 3  # logging on: every call has its audit row
