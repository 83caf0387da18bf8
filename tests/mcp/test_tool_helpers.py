"""Pure logic of the agent tools: chunking, cosine, RRF/score breakdowns, citation
normalization, inner_voice allocation/floor/dedupe, reindex precedence, config clamping."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.mcp.chunking import markdown_chunks, material_chunks, windows
from services.mcp.citations import CitationNormalizer, Passage, cited_numbers, normalize, render_context
from services.mcp.core import cosine
from services.mcp.extract import sanitize_task
from services.mcp.inner_voice import Cand, adapt_floor, allocate, config, dedupe
from services.mcp.reindex import locations
from services.mcp.search import breakdown
from services.planner.fusion import minmax_weighted, rrf, single
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.config import Settings
from shared.model import DocKey, Hit, StoredDoc
from shared.text.hashing import cap_text


def k(i: str) -> DocKey:
    return DocKey("t", "kb", i)


def test_cosine_zero_denominator_is_zero() -> None:
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    assert cosine([1.0, 0.0], [0.0, 0.0]) == 0.0
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 1.0]) == pytest.approx(0.0)


def test_rrf_matches_seed_002_example() -> None:
    # lexical c1=1, c2=2; semantic c2=1, c3=2 (Rifflux's worked example)
    fused = rrf([Hit(k("c1"), 5.0), Hit(k("c2"), 4.0)], [Hit(k("c2"), 0.9), Hit(k("c3"), 0.8)], 60)
    scores = {f.key.doc_id: f.score for f in fused}
    assert scores["c2"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c1"] == pytest.approx(1 / 61)
    assert scores["c3"] == pytest.approx(1 / 62)
    assert [f.key.doc_id for f in fused] == ["c2", "c1", "c3"]  # descending RRF, not raw-score averaging
    by = {f.key.doc_id: breakdown("hybrid", f) for f in fused}
    assert by["c2"] == {"rrf": pytest.approx(1 / 62 + 1 / 61), "lexical_rank": 2, "semantic_rank": 1}
    assert by["c1"]["semantic_rank"] is None and by["c3"]["lexical_rank"] is None


def test_rrf_edge_cases_one_or_both_lists_empty() -> None:
    assert rrf([], [], 60) == []
    only_sem = rrf([], [Hit(k("a"), 0.5)], 60)
    assert breakdown("hybrid", only_sem[0]) == {"rrf": pytest.approx(1 / 61), "lexical_rank": None,
                                                "semantic_rank": 1}
    only_lex = rrf([Hit(k("a"), 2.0)], [], 60)
    assert breakdown("hybrid", only_lex[0])["semantic_rank"] is None


def test_breakdown_shapes_per_mode() -> None:
    assert breakdown("lexical", single([Hit(k("a"), 3.5)], "lexical")[0]) == {"bm25": -3.5}  # FTS5: lower is better
    assert breakdown("semantic", single([Hit(k("a"), 0.7)], "semantic")[0]) == {"cosine": 0.7}


def test_markdown_chunks_follow_headings_and_overlap() -> None:
    text = "# A\nintro\n## B\n" + " ".join(f"word{i}." for i in range(400)) + "\n```\n# not a heading\n```\n# C\nend"
    chunks = markdown_chunks(text, size=300, overlap=60)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].heading_path == "A"
    assert {c.heading_path for c in chunks} == {"A", "A > B", "C"}  # fenced '#' line is not a heading
    b = [c.content for c in chunks if c.heading_path == "A > B"]
    assert len(b) > 2 and all(len(x) <= 300 for x in b)
    assert b[0].split()[-1] in b[1]  # consecutive windows overlap


def test_windows_short_text_is_one_window() -> None:
    assert windows("short", 100, 20) == ["short"]


def test_material_chunks_paragraphs_then_sentences() -> None:
    long_para = " ".join(f"Sentence number {i} is here." for i in range(100))
    mats = material_chunks("First para.\n\n  second\tpara \x07 text \n\n" + long_para, cap=200)
    assert mats[0].cleaned == "First para."
    assert mats[1].original.startswith("second\tpara") and mats[1].cleaned == "second para text"
    rest = mats[2:]
    assert len(rest) > 5 and all(len(m.cleaned) <= 200 for m in rest)
    assert all(m.cleaned.endswith(".") for m in rest)  # split on sentence boundaries


def test_normalizer_handles_tokens_split_across_chunks() -> None:
    n = CitationNormalizer()
    out = "".join(n.feed(part) for part in ["March 10 [", "1", "2] and [3", "] end [", "x] [9"]) + n.flush()
    assert out == "March 10 [citation:12] and [citation:3] end [x] [9"
    assert normalize("a [1] b [citation:2] c [] d") == "a [citation:1] b [citation:2] c [] d"
    assert cited_numbers("x [3] y [citation:1] z [3]") == [3, 1]
    # only real citations: n >= 1 without leading zeros, not an index glued to what it follows
    assert normalize("[0] [007] a[1] x_2[3] f(x)[1] m[1][2] 10[4]") == "[0] [007] a[1] x_2[3] f(x)[1] m[1][2] 10[4]"
    assert normalize("see [1][2], and [12].") == "see [citation:1][citation:2], and [citation:12]."
    assert cited_numbers("[0] [007] a[1] [citation:0] [5]") == [5]
    n = CitationNormalizer()  # an index split across chunks is still an index
    assert "".join(n.feed(part) for part in ["arr", "[1", "]", "[2] ok [", "3]"]) + n.flush() == \
        "arr[1][2] ok [citation:3]"


def test_retrieved_context_puts_only_n_next_to_passages() -> None:
    text = render_context([Passage(1, "Q3 Notes", "", "We agreed on March."), Passage(2, "Q3 Notes", "", "Next"),
                           Passage(3, "Timeline", "", "Dates floated")])
    lines = text.splitlines()
    assert lines[0] == "<retrieved_context>" and lines[-1] == "</retrieved_context>"
    assert "  [1] We agreed on March." in lines and "  [3] Dates floated" in lines
    assert sum(1 for line in lines if line.startswith("Document:")) == 2


def test_registry_find_or_create_monotonic_and_durable(tmp_path: Path) -> None:
    reg = SqliteCitationRegistry(tmp_path / "c.sqlite3")
    a = reg.register("o", "conv", "kb_chunk", {"collection": "kb", "id": "1"}, {"title": "A"})
    b = reg.register("o", "conv", "kb_chunk", {"id": "2", "collection": "kb"}, {"title": "B"})
    assert (a, b) == (1, 2)
    assert reg.register("o", "conv", "kb_chunk", {"id": "1", "collection": "kb"}, {"title": "changed"}) == 1
    assert reg.register("o", "other", "kb_chunk", {"collection": "kb", "id": "2"}, {}) == 1  # per conversation
    assert reg.register("o2", "conv", "kb_chunk", {"collection": "kb", "id": "9"}, {}) == 1  # per owner
    reg.close()
    again = SqliteCitationRegistry(tmp_path / "c.sqlite3")
    entry = again.resolve("o", "conv", 1)
    assert entry is not None and entry.locator == {"collection": "kb", "id": "1"} and entry.display == {"title": "A"}
    assert again.resolve("o", "conv", 99) is None
    assert again.register("o", "conv", "web_result", {"url": "u"}, {}) == 3


def test_reindex_location_precedence(tmp_path: Path) -> None:
    assert locations("a", ["b", "c"], tmp_path) == [tmp_path / "b", tmp_path / "c"]
    assert locations("a", [], tmp_path) == [tmp_path / "a"]
    assert locations(None, None, tmp_path) == [tmp_path]


def _cand(table: str, i: str, score: float, h: str, kg: bool) -> Cand:
    return Cand(table, StoredDoc(DocKey("t", table, i), {}, ["*"], None, h, 0.0), score, kg, "x", h)


def test_allocate_mix_guarantee_and_backfill() -> None:
    assert allocate(10, 0.6, 20, 20) == (6, 4)
    assert allocate(10, 0.6, 2, 20) == (2, 8)  # KG underflows: thoughts backfill
    assert allocate(10, 0.6, 20, 1) == (9, 1)
    assert allocate(10, 0.99, 20, 20) == (9, 1)  # ≥1 per source when 0 < mix < 1
    assert allocate(10, 0.01, 20, 20) == (1, 9)
    assert allocate(10, 1.0, 20, 20) == (10, 0)  # KG-only
    assert allocate(10, 0.0, 20, 20) == (0, 10)
    assert allocate(10, 1.0, 3, 20) == (3, 0)  # no backfill from an excluded source


def test_floor_adapts_down_to_min_floor_only() -> None:
    kg = [_cand("kg", "a", 0.5, "h1", True)]
    th = [_cand("thoughts", "b", 0.2, "h2", False)]
    assert adapt_floor(0.3, 0.15, [kg, th]) == pytest.approx(0.2)
    low = [_cand("thoughts", "b", 0.05, "h2", False)]
    assert adapt_floor(0.3, 0.15, [kg, low]) == pytest.approx(0.15)
    assert adapt_floor(0.3, 0.15, [kg, []]) == pytest.approx(0.3)


def test_dedupe_by_table_id_then_content_hash() -> None:
    kg = [_cand("kg", "a", 0.9, "same", True), _cand("kg", "b", 0.5, "hb", True)]
    th = [_cand("thoughts", "c", 0.8, "same", False), _cand("thoughts", "d", 0.4, "hd", False)]
    kg2, th2 = dedupe(kg, th)
    assert [c.doc.key.doc_id for c in kg2] == ["a", "b"] and [c.doc.key.doc_id for c in th2] == ["d"]


def test_cap_text_sentence_boundary_800() -> None:
    text = " ".join(["This is a sentence that goes on."] * 60)
    capped = cap_text(text, 800)
    assert len(capped) <= 800 and capped.endswith(".")
    assert cap_text("x" * 900, 800) == "x" * 800


def test_inner_voice_config_clamps_and_warns() -> None:
    cfg, warns = config(Settings(inner_voice_mix=1.7, inner_voice_topk_default=99, inner_voice_min_floor=0.0,
                                 inner_voice_max_candidates_per_source=3))
    assert (cfg.mix, cfg.top_k, cfg.min_floor, cfg.max_candidates) == (1.0, 50, 0.15, 150)
    assert len(warns) == 4


def test_weighted_fusion_and_task_ids() -> None:
    lex = [Hit(k("a"), 10.0), Hit(k("b"), 5.0)]
    sem = [Hit(k("b"), 0.9), Hit(k("a"), 0.1)]
    out = minmax_weighted(lex, sem, {k("a"): 1.0, k("b"): 2.0})
    assert [f.key.doc_id for f in out] == ["b", "a"]  # 0.65 semantic outweighs 0.35 lexical
    assert sanitize_task("  t-1 ") == "t-1"
    with pytest.raises(Exception, match="task_id"):
        sanitize_task("../etc")


def test_a_registry_store_outage_is_a_typed_db_error() -> None:
    import redis

    from services.mcp.invoke import _failure

    assert _failure(redis.ConnectionError("refused"), "search").code == "db_error"


# --- hardening ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_heading_parse_is_linear_on_pathological_lines() -> None:
    """`^(#{1,6})\\s+(.*?)\\s*#*\\s*$` took 24 s on one 3,200-character line of
    this shape (n=1,600) and grows cubically: these 16,000-character lines would take about an
    hour each. The plain-string parse does them at once (the timeout bounds it, no clock
    assertion)."""
    from services.mcp.chunking import heading

    n = 8_000
    evil = ["#" + " " * n + "x" + " " * n + "\x00", "# " + "\t" * n + "#" * n + "\t" * n + "#\x01"]
    text = "\n".join(evil * 3 + ["# Real", "body text"])
    chunks = markdown_chunks(text, size=1200, overlap=200)
    assert chunks and chunks[-1].heading_path == "Real"
    assert heading("## B ##") == (2, "B") and heading("# C#") == (1, "C#") and heading("#x") is None
    assert heading("####### seven") is None and heading("# ") == (1, "") and heading("#\tTab\t#  ") == (1, "Tab")


def test_reindex_roots_accept_plain_paths_pathsep_lists_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain path used to crash start-up with a JSON decode traceback."""
    import os

    from pydantic import ValidationError

    cases = {"/some/path": ["/some/path"], f"/a{os.pathsep}/b": ["/a", "/b"], '["/x", "/y"]': ["/x", "/y"],
             '"/z"': ["/z"], "": []}
    for raw, want in cases.items():
        monkeypatch.setenv("VIBE_MCP_REINDEX_ROOTS", raw)
        assert Settings().mcp_reindex_roots == [Path(w) for w in want]
    for bad in ('{"a": 1}', "[1, 2]", "[not json", f"/a{os.pathsep}{os.pathsep}/b"):
        monkeypatch.setenv("VIBE_MCP_REINDEX_ROOTS", bad)
        with pytest.raises(ValidationError, match="VIBE_MCP_REINDEX_ROOTS"):
            Settings()


def test_task_names_are_keyed_by_the_server_secret() -> None:
    """Names used to be blake3(tenant, principals, task), computable by anyone."""
    import blake3

    from services.core.reserved import is_reserved_collection
    from services.core.secret import key_ref, task_names

    a, b = b"a" * 32, b"b" * 32
    col, token = task_names(a, key_ref(a, "k-alice"), "t")
    assert is_reserved_collection(col) and is_reserved_collection(col.upper())
    assert (col, token) != task_names(b, key_ref(b, "k-alice"), "t")  # another secret, other names
    assert (col, token) != task_names(a, key_ref(a, "k-alice2"), "t")  # another key, other names
    assert col.removeprefix("mcp-task-") not in token  # the collection name does not give the token away
    owner = blake3.blake3(b"ta\x1fgroup:eng\x1fuser:alice").hexdigest()[:32]
    old = blake3.blake3(f"{owner}\x1ft".encode()).hexdigest()[:24]
    assert old not in col and old not in token
    assert not is_reserved_collection("kb") and not is_reserved_collection("mcp-tasks")


def test_server_secret_file_is_created_0600_once_and_the_setting_wins(tmp_path: Path) -> None:
    import stat

    from services.core.secret import SECRET_FILE, server_secret

    s = Settings(data_dir=tmp_path / "d")
    first = server_secret(s)
    path = tmp_path / "d" / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) >= 32
    assert server_secret(s) == first  # kept, not re-made
    path.chmod(0o644)
    assert server_secret(s) == first and stat.S_IMODE(path.stat().st_mode) == 0o600  # tightened
    assert server_secret(Settings(data_dir=tmp_path / "d", mcp_task_secret="x" * 20)) == b"x" * 20
    assert server_secret(Settings(data_dir=tmp_path / "e")) != first


def test_material_budget_is_per_key_and_day_and_refuses_without_charging(tmp_path: Path) -> None:
    from shared.adapters.mcp_audit_sqlite import SqliteMaterialBudget
    from shared.agent_ports import BudgetExceeded

    b = SqliteMaterialBudget(tmp_path / "a.sqlite3")
    b.charge("k1", "2030-01-01", 600, 3, 1000, 5)
    with pytest.raises(BudgetExceeded) as e:
        b.charge("k1", "2030-01-01", 500, 1, 1000, 5)
    assert (e.value.quota, e.value.used, e.value.limit) == ("materials_chars_per_day", 600, 1000)
    with pytest.raises(BudgetExceeded, match="chunks"):
        b.charge("k1", "2030-01-01", 10, 3, 1000, 5)
    assert b.used("k1", "2030-01-01") == (600, 3)  # refusals add nothing
    b.charge("k2", "2030-01-01", 1000, 5, 1000, 5)  # another key has its own budget
    b.charge("k1", "2030-01-02", 1000, 5, 1000, 5)  # and so has another day
    b.close()


def test_rerank_reply_parsing_is_strict() -> None:
    from shared.adapters.rerank_http import scores

    assert scores({"results": [{"index": 1, "relevance_score": 0.2}, {"index": 0, "relevance_score": 0.9}]}, 2) \
        == [0.9, 0.2]  # Cohere: by index, whatever the reply's order
    assert scores([{"index": 0, "score": 1}, {"index": 1, "score": -2.5}], 2) == [1.0, -2.5]  # TEI
    for bad in ({"results": [{"index": 0, "relevance_score": 0.1}]},  # one passage unscored
                [{"index": 0, "score": 1}, {"index": 0, "score": 2}],  # repeated index
                [{"index": 0, "score": float("nan")}, {"index": 1, "score": 1}],
                [{"index": 2, "score": 1}, {"index": 1, "score": 1}],  # out of range
                [{"index": True, "score": 1}, {"index": 1, "score": 1}],
                {"error": "nope"}):
        with pytest.raises(ValueError):
            scores(bad, 2)


def test_seed_000_normalisation_order_and_bare_hex() -> None:
    from services.mcp.inner_voice import seed_hash, seed_normalize

    assert seed_normalize("  Ｆｅｄｅｒａｔｉｏｎ\t\nQUORUM\u200b ") == "federation quorum"
    assert seed_normalize("a \u200b b") == "a  b"  # control removal is the seed's last step
    h = seed_hash("Quorum lost.")
    assert len(h) == 64 and not h.startswith("blake3:") and h == seed_hash("  quorum   LOST.\n")


def test_bearer_identity_split_and_bracket_escape() -> None:
    from services.mcp.citations import escape
    from services.mcp.runtime import split_identity

    assert split_identity("plan-a@k-alice") == ("plan-a", "k-alice")
    assert split_identity("k-alice") == (None, "k-alice")
    assert split_identity("@k") == (None, "@k") and split_identity("a@") == (None, "a@")
    assert cited_numbers(escape("see [3] and [citation:4]")) == []
