"""The "disagree" probe ordered by the free semantic proxy (TouchPolicy.auto_disagree_proxy):
`plan` embeds what the proxy ranks first, at the lexical dig's spend; the planner hands it a
ranking of this query's own cold, eligible candidates only; the proxy learns its map from what
is embedded; and the wiring degrades to the lexical probe without the local model package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from services.planner.touch import COLD, READY, ProxyMap, TouchPolicy, TouchProxy, plan
from shared.model import DocKey, Principal, StoredDoc
from tests.unit.test_touch_policy import ALICE, PLENTY, _agree_and_disagree, _AgreeOrNotEmbedder, _first_reads, keys

STEP4 = TouchPolicy("adaptive", depth_factor=1.0, min_depth=10, dig_step=4, dig_factor=2.0, reach_best=0)


def _deep_page_repeat() -> tuple[list[DocKey], list[DocKey], dict[DocKey, str]]:
    """Lexical top 12 embedded, the page drawing on two of its deepest: a plan that digs."""
    lex = keys(100)
    state = {k: (READY if i < 12 else COLD) for i, k in enumerate(lex)}
    return lex, [*lex[:8], lex[10], lex[11]], state


def test_a_proxy_probe_embeds_what_the_proxy_ranks_first_at_the_lexical_digs_spend() -> None:
    lex, page, state = _deep_page_repeat()
    lexical = plan(STEP4, 10, lex, page, state, PLENTY, settled=False)
    assert lexical.dug and lexical.keys == lex[12:16]  # the lexical probe: the next four down
    ranked = [lex[80], lex[3], lex[50], lex[13], lex[97], lex[60], lex[40]]  # lex[3] is ready: skipped
    proxied = plan(STEP4, 10, lex, page, state, PLENTY, settled=False, probe_order=lambda: ranked)
    assert proxied.keys == [lex[80], lex[50], lex[13], lex[97]]  # in the proxy's order, as many as the dig
    assert proxied.probe == proxied.keys and proxied.dug and proxied.depth == 10  # remembered as the probe
    # the lexical dig reaching one cold candidate (the others pending): the proxy picks one
    fewer = {**state, lex[13]: "pending", lex[14]: "pending", lex[15]: "pending"}
    assert plan(STEP4, 10, lex, page, fewer, PLENTY, settled=False, probe_order=lambda: ranked).keys == [lex[80]]


def test_the_proxy_is_asked_only_when_the_plan_digs_and_an_empty_ranking_digs_lexically() -> None:
    lex, page, state = _deep_page_repeat()

    def never() -> list[DocKey]:
        raise AssertionError("asked without a dig")

    stable = [*lex[:7], lex[9]]  # one document of the deepest 40%: stable
    assert plan(STEP4, 10, lex, stable, state, PLENTY, settled=False, probe_order=never).keys == []
    assert plan(STEP4, 10, lex, page, state, PLENTY, settled=True, probe_order=never).keys == []  # settled
    assert plan(STEP4, 10, lex, page, state, 0, settled=False, probe_order=never).keys == []  # tight budget
    # `reach` cutting the dig to nothing cuts the probe too: the same spend as the lexical one
    assert plan(STEP4, 10, lex, page, state, PLENTY, reachable=10, settled=False, probe_order=never).keys == []
    # too little learned yet (no ranking): the lexical dig
    assert plan(STEP4, 10, lex, page, state, PLENTY, settled=False, probe_order=lambda: []).keys == lex[12:16]


class _Rows:
    """A SemanticProxy over fixed rows per text (a fake of shared/adapters/static_proxy.py)."""

    def __init__(self, rows: dict[str, list[float]]):
        self.rows = rows
        self.asked: list[str] = []

    @property
    def dim(self) -> int:
        return len(next(iter(self.rows.values())))

    def vectors(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> NDArray[np.float32]:
        self.asked += texts
        return np.asarray([self.rows[t] for t in texts], dtype=np.float32)


def _doc(i: int, collection: str = "c") -> StoredDoc:
    return StoredDoc(DocKey("t", collection, f"d{i}"), {"body": f"t{i}"}, ["user:a"], None, f"h{i}", 0.0)


def test_the_proxy_map_learns_the_embedders_space_from_what_is_embedded() -> None:
    """Proxy rows a fixed linear map away from the real vectors: once enough embedded documents
    are learned, the estimates of cold ones order them as their real cosine with the query does."""
    rng = np.random.default_rng(7)
    mix = rng.normal(size=(8, 6))
    proxy_rows = rng.normal(size=(80, 8))
    real = proxy_rows @ mix
    rows = {f"t{i}": list(map(float, proxy_rows[i])) for i in range(80)}
    tp = TouchProxy(_Rows(rows), lambda d: str(d.fields["body"]), ProxyMap(ridge=1e-3, min_docs=30))
    ready, cold = [_doc(i) for i in range(40)], [_doc(i) for i in range(40, 80)]
    query = list(map(float, rng.normal(size=6)))
    vectors = {d.key: list(map(float, real[i])) for i, d in enumerate(ready)}
    assert tp.estimates("t\x1fs", ready[:20], lambda ks: {k: vectors[k] for k in ks}, cold, query) == {}  # too few
    est = tp.estimates("t\x1fs", ready, lambda ks: {k: vectors[k] for k in ks}, cold, query)
    q = np.asarray(query)
    truth = {d.key: float(real[40 + i] @ q / np.linalg.norm(real[40 + i]) / np.linalg.norm(q))
             for i, d in enumerate(cold)}
    assert sorted(est, key=lambda k: -est[k]) == sorted(truth, key=lambda k: -truth[k])
    # another tenant's scope has learned nothing
    assert tp.estimates("u\x1fs", [], lambda ks: {}, cold, query) == {}


def test_a_document_its_embed_job_would_not_send_is_never_read_nor_estimated() -> None:
    rows = {f"t{i}": [1.0, float(i)] for i in range(40)}
    px = _Rows(rows)
    tp = TouchProxy(px, lambda d: None if d.key.doc_id == "d35" else str(d.fields["body"]), ProxyMap(min_docs=2))
    ready = [_doc(i) for i in range(30)]
    est = tp.estimates("t\x1fs", ready, lambda ks: {k: [1.0, 0.5] for k in ks},
                       [_doc(35), _doc(36)], [1.0, 0.5])
    assert set(est) == {DocKey("t", "c", "d36")} and "t35" not in px.asked


class _WordRows:
    """The fake proxy for the planner test: a document's row is its real vector (so the map is
    learnable), from the same text the embedder reads."""

    def __init__(self, emb: _AgreeOrNotEmbedder):
        self.emb = emb
        self.asked: list[str] = []

    @property
    def dim(self) -> int:
        return self.emb.dim

    def vectors(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> NDArray[np.float32]:
        self.asked += texts
        return np.asarray(self.emb.embed(list(texts)), dtype=np.float32)


def test_a_disagreeing_collections_probe_is_the_proxys_ranking_of_the_callers_cold_candidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real planner: once "disagree" (three first reads counted), a read that digs hands `plan`
    the proxy's ranking of its own lexical candidates (cold ones, best estimate first: on "flap"
    the semantic leg prefers the longer documents, which BM25 ranks last); "agree" never asks the
    proxy. Documents another principal may read (same words) are never ranked nor read."""
    import services.planner.planner as planner_mod
    from services.wiring import _proxy_text, build
    from shared.config import Settings

    emb = _AgreeOrNotEmbedder()
    c = build(Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000,
                       touch_follow_up="auto"), emb)
    assert c.planner.proxy is None  # the setting is off
    c.planner.cfg.touch = replace(c.planner.cfg.touch, auto_after=3, auto_disagree_proxy=True,
                                  auto_disagree_proxy_within=100)
    px = _WordRows(emb)
    c.planner.proxy = TouchProxy(px, _proxy_text(c.handler.policy, c.handler.embed_fields), ProxyMap(min_docs=3))
    rankings: list[tuple[int, list[DocKey]]] = []
    real_plan = planner_mod.plan

    def watched(policy: TouchPolicy, *args: Any, **kw: Any) -> Any:
        order = args[8] if len(args) > 8 else kw.get("probe_order")
        if order is not None:
            got = list(order())
            rankings.append((policy.dig_step, got))
            return real_plan(policy, *args[:8], lambda: got)
        return real_plan(policy, *args, **kw)

    monkeypatch.setattr(planner_mod, "plan", watched)
    c.start()
    try:
        _agree_and_disagree(c, ALICE)
        admin = Principal("t1", ("user:admin",), frozenset({"read", "write", "admin"}))
        hidden = [{"_id": f"h{i}", "body": " ".join(["flap", "secret", *(f"filler{j}" for j in range(i))]),
                   "_acl": ["user:admin"]} for i in range(40, 80)]  # longer than alice's: the proxy's favourites
        c.docs.put([c.docs.parse(admin, "disagree", d["_id"], d) for d in hidden])
        _first_reads(c, ALICE, "agree", "wing", [])
        assert rankings == []  # "agree": the lexical dig, the proxy never asked
        _first_reads(c, ALICE, "disagree", "flap", [])
        _first_reads(c, ALICE, "disagree", "flap four", [])
        assert rankings, "no proxy-ordered probe in the disagree state"
        space = c.settings.space
        for _, ranked in rankings:
            assert ranked and all(k.doc_id.startswith("disagree") for k in ranked)  # alice's only
            sides = c.store.sidecars(ranked, space)
            n = [int(k.doc_id.removeprefix("disagree")) for k in ranked]
            assert n == sorted(n, reverse=True)  # the longest (closest to the query) first, not lexical order
            assert all(s.status.value in ("none", "queued", "ready") for s in sides.values())
        assert px.asked and not any("secret" in t for t in px.asked)  # no text of the admin's longer documents was read
    finally:
        c.stop()


def test_the_proxy_probe_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.wiring import _touch_policy
    from shared.config import Settings

    assert not _touch_policy(Settings()).auto_disagree_proxy
    monkeypatch.setenv("VIBE_TOUCH_AUTO_DISAGREE_PROXY", "true")
    monkeypatch.setenv("VIBE_TOUCH_AUTO_DISAGREE_PROXY_WITHIN", "50")
    policy = _touch_policy(Settings())
    assert (policy.auto_disagree_proxy, policy.auto_disagree_proxy_within, policy.proxy_probe) == (True, 50, False)
