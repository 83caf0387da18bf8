"""The adaptive touch policy (services/planner/touch.py `plan`): what a query spends embedding on."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from services.planner.touch import COLD, OTHER, PENDING, READY, frontier, plan, reach, touch_state, unstable
from services.planner.touch_memory import PageMemory, query_key
from services.planner.touch_policy import TouchPolicy
from shared.model import DocKey, Principal, SemanticStatus
from tests.support.words import WordEmbedder

if TYPE_CHECKING:
    from services.wiring import Container

POLICY = TouchPolicy("adaptive", depth_factor=2.0, min_depth=10, dig_step=10, dig_factor=3.0, dig_max=60,
                     stable_zone=0.5, unstable_least=1, reserve=4.0)
PLENTY = 10**6


def keys(n: int, prefix: str = "d") -> list[DocKey]:
    return [DocKey("t", "c", f"{prefix}{i}") for i in range(n)]


def test_first_pass_embeds_page_cold_first_then_lexical_top_in_order() -> None:
    lex = keys(100)
    page = [lex[5], lex[0], lex[3]]
    state = {k: COLD for k in lex}
    state[lex[3]] = READY
    p = plan(POLICY, 10, lex, page, state, PLENTY)
    assert p.keys[:2] == [lex[5], lex[0]]  # page order, the ready one skipped
    assert p.keys[2:] == [k for k in lex[:20] if k not in (lex[5], lex[0], lex[3])]
    assert p.depth == 20 and not p.dug


def test_never_spends_on_pending_ready_or_ineligible() -> None:
    lex = keys(30)
    state = {k: COLD for k in lex}
    state.update({lex[1]: PENDING, lex[2]: READY, lex[4]: OTHER})
    chosen = plan(POLICY, 10, lex, [], state, PLENTY).keys
    assert lex[1] not in chosen and lex[2] not in chosen and lex[4] not in chosen
    assert lex[0] in chosen and lex[19] in chosen and lex[20] not in chosen


def test_a_stable_repeat_costs_nothing() -> None:
    lex = keys(100)
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    page = lex[:10]  # the page uses only the top half of what is embedded
    p = plan(POLICY, 10, lex, page, state, PLENTY)
    assert p.keys == [] and not p.dug


def test_an_unstable_repeat_digs_one_step_deeper_and_no_further_than_dig_max() -> None:
    lex = keys(100)
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    page = [*lex[:9], lex[17]]  # the page draws on the deepest half of the embedded prefix
    p = plan(POLICY, 10, lex, page, state, PLENTY)
    assert p.dug and p.keys == lex[20:30]
    state = {k: (READY if i < 55 else COLD) for i, k in enumerate(lex)}
    p = plan(POLICY, 10, lex, [*lex[:9], lex[50]], state, PLENTY)
    assert p.keys == lex[55:60] and p.depth == 60
    state = {k: (READY if i < 60 else COLD) for i, k in enumerate(lex)}
    assert plan(POLICY, 10, lex, [*lex[:9], lex[59]], state, PLENTY).keys == []  # at the bottom: no further
    shallow = TouchPolicy("adaptive", depth_factor=1.0, min_depth=10, dig_factor=2.0)
    state = {k: (READY if i < 15 else COLD) for i, k in enumerate(lex)}
    assert plan(shallow, 10, lex, [*lex[:8], lex[10], lex[12]], state, PLENTY).keys == lex[15:20]  # 2 x depth 10
    assert plan(shallow, 10, lex, [*lex[:9], lex[12]], state, PLENTY).keys == []  # one deep document: stable


def test_tight_budget_spends_on_the_page_and_never_digs() -> None:
    lex = keys(100)
    state = {k: COLD for k in lex}
    page = lex[:10]
    p = plan(POLICY, 10, lex, page, state, available=0, settled=False)  # a repeat
    assert p.keys == lex[:10] and p.depth == 10 and not p.neighbours
    half = plan(POLICY, 10, lex, page, state, available=40, settled=False)  # half the reserve (4 x depth 20)
    assert half.keys == lex[:15]
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    assert plan(POLICY, 10, lex, [*lex[:9], lex[17]], state, available=50, settled=False).keys == []


def test_under_a_tight_budget_a_first_touch_embeds_only_its_pages_best_cold_document() -> None:
    """Most first-seen queries never come back (Zipf): under a tight budget their first touch
    takes one embedding, the page's best cold document, and the bucket keeps the rest for the
    queries that repeat. With room in the budget, or without page memory, nothing changes."""
    lex = keys(100)
    state = {k: COLD for k in lex}
    page = [lex[3], lex[0], lex[1]]
    assert plan(POLICY, 10, lex, page, state, available=40).keys == [lex[3]]
    assert plan(POLICY, 10, lex, page, state, available=40, settled=False).keys[:3] == page
    assert len(plan(POLICY, 10, lex, page, state, available=PLENTY).keys) == 20
    assert len(plan(replace(POLICY, remember=False), 10, lex, page, state, available=40).keys) == 15
    assert plan(replace(POLICY, first_under_budget=3), 10, lex, page, state, available=40).keys == page


def test_neighbours_only_with_room_and_when_asked() -> None:
    lex = keys(30)
    state = {k: COLD for k in lex}
    assert not plan(POLICY, 10, lex, [], state, PLENTY).neighbours
    with_nb = TouchPolicy("adaptive", neighbours=2)
    assert plan(with_nb, 10, lex, [], state, PLENTY).neighbours
    assert not plan(with_nb, 10, lex, [], state, 5).neighbours


def test_frontier_and_stability_helpers() -> None:
    lex = keys(10)
    assert frontier(lex, {k: READY for k in lex}) == 10
    assert frontier(lex, {lex[0]: READY, lex[1]: PENDING, lex[2]: COLD}) == 2
    assert frontier(lex, {}) == 10  # unknown sidecars are never spent on
    assert unstable(lex, [lex[7]], 10, 0.5) and not unstable(lex, [lex[4]], 10, 0.5)
    assert not unstable(lex, [DocKey("t", "c", "elsewhere")], 10, 0.5)
    assert not unstable(lex, lex, 0, 0.5)
    # `least`: one deep document on the page is not enough when two are asked for
    assert not unstable(lex, [lex[0], lex[8]], 10, 0.5, least=2)
    assert unstable(lex, [lex[6], lex[8]], 10, 0.5, least=2)


def test_a_page_using_fewer_than_unstable_least_deep_documents_does_not_dig() -> None:
    lex = keys(100)
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    one_deep = [*lex[:9], lex[17]]
    two_deep = [*lex[:8], lex[15], lex[17]]
    strict = replace(POLICY, unstable_least=2)
    assert plan(POLICY, 10, lex, one_deep, state, PLENTY).dug  # the old rule: one is enough
    assert not plan(strict, 10, lex, one_deep, state, PLENTY).dug
    p = plan(strict, 10, lex, two_deep, state, PLENTY)
    assert p.dug and p.keys == lex[20:30]


def test_status_mapping_follows_the_planners_cold_states() -> None:
    assert touch_state(SemanticStatus.NONE) == COLD and touch_state(SemanticStatus.STALE) == COLD
    assert touch_state(SemanticStatus.QUEUED) == PENDING and touch_state(SemanticStatus.READY) == READY
    assert touch_state(SemanticStatus.DENIED) == OTHER and touch_state(SemanticStatus.FAILED) == OTHER
    assert touch_state(SemanticStatus.STALE, cold=(SemanticStatus.NONE,)) == OTHER


def test_depth_policy_keeps_its_meaning() -> None:
    assert TouchPolicy("depth", 2.0, 10).depth(10, 500) == 20
    assert TouchPolicy("depth", 0.5, 5).depth(10, 500) == 5
    assert TouchPolicy("fixed").depth(10, 500) == 500


def test_reach_stops_where_even_the_best_semantic_score_cannot_lift_a_candidate_onto_the_page() -> None:
    lexical = [10.0, 9.0, 8.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    semantic = [0.9, 0.5, 0.4, 0.3]
    # With the best semantic z, a candidate reaches threshold 1.0 only while its lexical z is high enough.
    n = reach(lexical, semantic, threshold=1.0, weight=0.7)
    assert 0 < n < len(lexical)
    lm, ls = statistics.fmean(lexical), statistics.pstdev(lexical)
    sm, ss = statistics.fmean(semantic), statistics.pstdev(semantic)
    best = 0.7 * (0.9 - sm) / ss
    assert 0.3 * (lexical[n - 1] - lm) / ls + best >= 1.0 > 0.3 * (lexical[n] - lm) / ls + best
    assert reach(lexical, semantic, threshold=-10.0, weight=0.7) == len(lexical)  # everything can reach
    assert reach(lexical, semantic, threshold=10.0, weight=0.7) == 0  # nothing can
    assert reach(lexical, [], threshold=10.0, weight=0.7) == len(lexical)  # nothing known: no pruning
    assert reach(lexical, semantic, 1.0, 0.7, best=3) <= n  # a stricter semantic bound reaches less far


def test_reachable_depth_bounds_the_plan_but_never_below_the_page() -> None:
    lex = keys(50)
    state = {k: COLD for k in lex}
    assert plan(POLICY, 10, lex, [], state, PLENTY, reachable=14).keys == lex[:14]
    assert plan(POLICY, 10, lex, [], state, PLENTY, reachable=3).keys == lex[:10]
    assert plan(POLICY, 10, lex, [], state, PLENTY, reachable=None).keys == lex[:20]


def test_a_settled_repeat_neither_digs_nor_probes_similar_ones() -> None:
    lex = keys(100)
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    page = [*lex[:9], lex[17]]  # unstable by the zone rule
    similar_policy = replace(POLICY, depth_factor=2.0, dig_factor=3.0, similar=3, dig_step=10)
    like = [lex[70], lex[5], lex[40], lex[41], lex[42]]
    assert plan(similar_policy, 10, lex, page, state, PLENTY, settled=False, similar=like).keys == \
        [*lex[20:30], lex[70], lex[40], lex[41]]  # dig, then three similar cold ones (the ready one skipped)
    p = plan(similar_policy, 10, lex, page, state, PLENTY, settled=True, similar=like)
    assert p.keys == [] and not p.dug and p.probe == []


def test_similar_ones_are_probes_only_for_repeats_with_room() -> None:
    lex = keys(100)
    state = {k: COLD for k in lex}
    pol = TouchPolicy("adaptive", depth_factor=1.0, min_depth=10, similar=2)
    like = [lex[50], lex[3], lex[60], lex[61]]
    first = plan(pol, 10, lex, [], state, PLENTY, similar=like)  # first touch (settled None)
    assert first.keys == lex[:10] and first.probe == []
    again = plan(pol, 10, lex, [], state, PLENTY, similar=like, settled=False)
    assert again.keys == [*lex[:10], lex[50], lex[60]] and again.probe == [lex[50], lex[60]]
    eager_first = TouchPolicy("adaptive", similar=2, similar_first=True)
    assert plan(eager_first, 10, lex, [], state, PLENTY, similar=like).probe == [lex[50], lex[60]]
    assert plan(pol, 10, lex, [], state, available=0, similar=like, settled=False).probe == []  # tight budget


def test_page_memory_settles_a_repeat_whose_last_spend_did_not_reach_the_page() -> None:
    mem = PageMemory(size=2)
    a, b = keys(20, "a"), keys(20, "b")
    assert mem.settled("q", a[:10]) is None  # first touch
    mem.remember("q", a[:10], probe=[])
    assert mem.settled("q", a[:10]) is True  # the same documents: settled
    assert mem.settled("q", list(reversed(a[:10]))) is True  # order alone is no change
    assert mem.settled("q", [*a[:9], a[15]]) is False  # changed, and nothing was probed: look further
    mem.remember("q", [*a[:9], a[15]], probe=[a[16], a[17]])
    assert mem.settled("q", [*a[:9], a[12]]) is True  # changed, but no probe made it: the probing did not pay
    assert mem.settled("q", [*a[:9], a[17]]) is False  # a probe made it onto the page: keep going
    mem.remember("r", b[:10], [])
    mem.remember("s", b[:10], [])
    assert mem.settled("q", a[:10]) is None  # bounded: the oldest query is forgotten


def test_query_keys_never_collide_across_tenants_acls_or_collections() -> None:
    base = query_key("t1", ("user:a",), "c", "wing flutter", 10)
    assert base == query_key("t1", ("user:a",), "c", "wing flutter", 10)
    assert base == query_key("t1", ("user:a",), "c", "wing flutter", 10)
    others = {query_key("t2", ("user:a",), "c", "wing flutter", 10),
              query_key("t1", ("user:b",), "c", "wing flutter", 10),
              query_key("t1", ("user:a", "group:x"), "c", "wing flutter", 10),
              query_key("t1", ("user:a",), "d", "wing flutter", 10),
              query_key("t1", ("user:a",), "c", "wing flutters", 10),
              query_key("t1", ("user:a",), "c", "wing flutter", 20),
              query_key("t1c", ("user:a",), "", "wing flutter", 10)}
    assert base not in others and len(others) == 7


def test_reach_bounds_the_digs_of_a_query_only_until_it_keeps_coming_back() -> None:
    mem = PageMemory()
    a = keys(12, "a")
    policy = TouchPolicy(reach_best=10, reach_until=2)
    assert mem.touches("q") == 0 and policy.reaches(mem.touches("q"))  # the first touch
    mem.remember("q", a[:10], probe=[])
    assert mem.touches("q") == 1 and policy.reaches(mem.touches("q"))  # the first repeat: bounded
    mem.remember("q", a[:10], probe=[a[11]])
    assert mem.touches("q") == 2 and not policy.reaches(mem.touches("q"))  # asked again: digs as before
    assert mem.touches("other") == 0
    assert TouchPolicy(reach_best=10, reach_until=0).reaches(50)  # 0: every touch
    assert not TouchPolicy(reach_best=0).reaches(0)  # off


def test_page_memory_caps_the_probing_rounds_of_a_query() -> None:
    mem = PageMemory()
    a = keys(30, "a")
    mem.remember("q", a[:10], probe=[])  # the first touch probes nothing
    assert mem.settled("q", [*a[:9], a[20]], rounds=1) is False
    mem.remember("q", [*a[:9], a[20]], probe=[a[21]])  # one probing round
    assert mem.settled("q", [*a[:9], a[21]], rounds=0) is False  # uncapped: the probe paid, go on
    assert mem.settled("q", [*a[:9], a[21]], rounds=2) is False
    assert mem.settled("q", [*a[:9], a[21]], rounds=1) is True  # capped at one round


_WordEmbedder = WordEmbedder  # tests/support/words.py


WORDS = "wing flutter supersonic boundary layer heat transfer shock wave"
ALICE = Principal("t1", ("user:alice",), frozenset({"read", "write", "admin"}))
ADMIN = Principal("t1", ("user:admin",), frozenset({"read", "write", "admin"}))


def _alice_and_secret(c: Container, mine: int, secret: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`mine` documents only alice may read and `secret` ones only the admin may, on one topic."""
    docs = [{"_id": f"a{i}", "body": f"{WORDS} {i} " * 3, "_acl": ["user:alice"]} for i in range(mine)]
    hidden = [{"_id": f"s{i}", "body": f"{WORDS} secret {i} " * 3, "_acl": ["user:admin"]} for i in range(secret)]
    c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in docs])
    c.docs.put([c.docs.parse(ADMIN, "c", d["_id"], d) for d in hidden])
    return docs, hidden


def test_a_touch_with_probes_and_memory_spends_only_on_what_the_caller_may_read(tmp_path: Path) -> None:
    """Similar probes search lexically with the text of the semantic leg's hits, and page memory
    decides repeats: both must stay inside the caller's tenant + ACL filter."""
    from services.planner.planner import ReadRequest
    from services.wiring import build
    from shared.adapters.memory_queue import InProcessQueue
    from shared.config import Settings

    c = build(Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000), _WordEmbedder())
    c.planner.cfg.touch = TouchPolicy("adaptive", min_depth=2, depth_factor=0.2, similar=50, similar_first=True,
                                      similar_within=0, neighbours=3, dig_step=50, remember=False)
    c.start()
    try:
        alice, words = ALICE, WORDS
        other = Principal("t2", ("user:alice",), frozenset({"read", "write", "admin"}))
        mine, secret = _alice_and_secret(c, 6, 30)
        c.docs.put([c.docs.parse(other, "c", f"o{i}", {"body": f"{words} {i}"}) for i in range(30)])
        for _ in range(6):
            session = c.planner.open(alice, ReadRequest("c", "wing flutter shock", "hybrid", limit=3))
            assert isinstance(c.queue, InProcessQueue)
            assert c.queue.wait_idle(30)
            session.refresh()
        space = c.settings.space
        touched_mine = c.store.sidecars([DocKey("t1", "c", d["_id"]) for d in mine], space)
        assert any(s.status != SemanticStatus.NONE for s in touched_mine.values())  # it did spend
        forbidden = [DocKey("t1", "c", d["_id"]) for d in secret] + [DocKey("t2", "c", f"o{i}") for i in range(30)]
        spent = {k for k, s in c.store.sidecars(forbidden, space).items() if s.status != SemanticStatus.NONE}
        assert spent == set()
    finally:
        c.stop()


def test_the_adaptive_numbers_are_the_policy_defaults_and_tuned_in_code(tmp_path: Path) -> None:
    """The composition root builds the policy from TouchPolicy's defaults (no setting restates
    them); a benchmark or test passes another to `build(touch=)`, and the reads use it."""
    from services.wiring import build, touch_policy
    from shared.config import Settings

    assert touch_policy(Settings()) == TouchPolicy()
    policy = touch_policy(Settings(), dig_step=5, dig_max=40, remember=False, probe_rounds=1, similar=4,
                          first_under_budget=2, reach_best=7, reach_until=3, stable_zone=0.25, unstable_least=3)
    got = (policy.dig_step, policy.dig_max, policy.remember, policy.probe_rounds, policy.similar,
           policy.first_under_budget, policy.reach_best, policy.reach_until, policy.stable_zone, policy.unstable_least)
    assert got == (5, 40, False, 1, 4, 2, 7, 3, 0.25, 3)
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32), touch=policy)
    try:
        assert c.planner.cfg.touch is policy
    finally:
        c.stop()


class _CountingEmbedder(_WordEmbedder):
    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().embed(texts)


def test_evicted_candidates_come_back_from_the_cold_store_without_budget_or_provider(tmp_path: Path) -> None:
    """Rehydration costs no provider call, so the evicted candidates a touch picks come back
    even with an empty bucket; documents never embedded still wait for budget, and the
    caller's ACL bounds what comes back."""
    from services.planner.planner import ReadRequest
    from services.wiring import build
    from shared.adapters.memory_budget import MemoryBudget
    from shared.adapters.memory_queue import InProcessQueue
    from shared.config import Settings
    from shared.model import EmbedJob

    emb = _CountingEmbedder()
    c = build(Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000), emb)
    c.start()
    try:
        alice = ALICE
        mine, secret = _alice_and_secret(c, 40, 10)
        space = c.settings.space
        embedded = [DocKey("t1", "c", f"a{i}") for i in range(30)] + [DocKey("t1", "c", d["_id"]) for d in secret]
        sides = c.store.sidecars(embedded, space)
        c.store.set_status(embedded, space, SemanticStatus.QUEUED, only_from=[SemanticStatus.NONE])
        c.queue.enqueue([EmbedJob(k, space, sides[k].content_hash) for k in embedded])
        assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
        assert c.lifecycle.evict(time.time() + 60, idle_seconds=0) == len(embedded)
        calls = emb.texts
        c.planner.budget = MemoryBudget(0)  # an empty bucket
        # one first touch (no page memory yet), where a tight budget would pick one document
        session = c.planner.open(alice, ReadRequest("c", "wing flutter shock", "hybrid", limit=3), streaming=True)
        session.complete_semantic()
        session.touch()
        assert c.queue.wait_idle(30)
        after = c.store.sidecars([*embedded, *(DocKey("t1", "c", f"a{i}") for i in range(30, 40))], space)
        back = {k.doc_id for k, s in after.items() if s.status == SemanticStatus.READY}
        assert len(back) >= 3 and back <= {f"a{i}" for i in range(30)}, back  # never a secret one
        assert all(after[DocKey("t1", "c", f"a{i}")].status == SemanticStatus.NONE for i in range(30, 40))
        assert emb.texts == calls  # no document text went to the provider (queries use embed_query)
    finally:
        c.stop()


def test_a_query_asked_again_and_again_digs_without_the_reach_bound(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner bounds a query's digs with `reach` on its first touches only (`reach_until`)."""
    import services.planner.spend as planner_module
    from services.planner.planner import ReadRequest
    from services.wiring import build, touch_policy
    from shared.adapters.memory_queue import InProcessQueue
    from shared.config import Settings

    bounded: list[int] = []
    real_reach = planner_module.reach

    def counted(*args: Any, **kw: Any) -> int:
        n = real_reach(*args, **kw)
        bounded.append(n)
        return n

    monkeypatch.setattr(planner_module, "reach", counted)
    s = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000)
    c = build(s, _WordEmbedder(), touch=touch_policy(s, reach_best=3, reach_until=2))
    c.start()
    try:
        _alice_and_secret(c, 40, 0)
        calls = []
        for _ in range(4):
            c.planner.open(ALICE, ReadRequest("c", "wing flutter shock", "hybrid", limit=3))  # JSON: touches
            assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
            calls.append(len(bounded))
        assert calls[1] >= 1  # the first repeat (semantic hits by then) is bounded
        assert calls[3] == calls[1]  # the third and fourth touches are not
    finally:
        c.stop()


def _streamed_read(c: Container, q: str) -> list[bool]:
    """One read as the SSE route runs it (routes_read._backfill): touch, wait for what it queued,
    then follow up while that queues more. Returns what each follow_up() answered."""
    from services.planner.planner import ReadRequest
    from shared.adapters.memory_queue import InProcessQueue

    session = c.planner.open(ALICE, ReadRequest("c", q, "hybrid", limit=3), streaming=True)
    session.complete_semantic()
    session.touch()
    answers = []
    while True:
        while session.awaits_backfill:
            assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
            session.refresh()
        answers.append(session.follow_up())
        if not answers[-1]:
            return answers


VOCAB = (WORDS + " body nose cone flow jet plate drag lift panel").split()
# A shallow touch whose every repeat with a changed page digs: what a follow-up does shows at once.
SHALLOW: dict[str, Any] = {"min_depth": 2, "depth_factor": 0.2, "dig_step": 4, "stable_zone": 1.0,
                           "unstable_least": 1, "reach_best": 0}


@pytest.mark.parametrize("follow", [False, True])
def test_a_streamed_first_read_follows_up_once_as_a_repeat_would(tmp_path: Path, follow: bool) -> None:
    """VIBE_TOUCH_FOLLOW_UP: once its first touch has landed, a query's first streamed read plans
    again as a repeat (a page that changed and is unstable digs), once; its second read does not
    follow up, and the follow-up, like any touch, spends only on documents the caller may read."""
    import random

    from services.wiring import build, touch_policy
    from shared.config import Settings

    s = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000, touch_follow_up=follow)
    c = build(s, _WordEmbedder(), touch=touch_policy(s, **SHALLOW))
    c.start()
    try:
        rnd = random.Random(0)  # varied documents: embedding the first touch's ones changes the page
        mine = [{"_id": f"a{i}", "body": " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(3, 12))),
                 "_acl": ["user:alice"]} for i in range(40)]
        c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in mine])
        _, secret = _alice_and_secret(c, 0, 20)
        space, keys = c.settings.space, [DocKey("t1", "c", d["_id"]) for d in mine]

        def embedded() -> int:
            return sum(1 for s in c.store.sidecars(keys, space).values() if s.status == SemanticStatus.READY)

        assert _streamed_read(c, "wing flutter shock") == ([True, False] if follow else [False])
        assert embedded() == (4 if follow else 3)  # the page (limit 3), then what the repeat's plan digs
        assert _streamed_read(c, "wing flutter shock") == [False]  # its second read: no follow-up
        spent = {k for k, s in c.store.sidecars([DocKey("t1", "c", d["_id"]) for d in secret], space).items()
                 if s.status != SemanticStatus.NONE}
        assert spent == set()
    finally:
        c.stop()


def test_no_follow_up_under_a_tight_budget(tmp_path: Path) -> None:
    """Under a tight budget a first touch embeds only its page's best cold document and keeps the
    bucket for queries that come back: a follow-up would spend it at once, so there is none."""
    import random

    from services.wiring import build, touch_policy
    from shared.config import Settings

    s = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=5, touch_follow_up=True)
    c = build(s, _WordEmbedder(), touch=touch_policy(s, **SHALLOW))
    c.start()
    try:
        rnd = random.Random(0)
        mine = [{"_id": f"a{i}", "body": " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(3, 12))),
                 "_acl": ["user:alice"]} for i in range(40)]
        c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in mine])
        assert _streamed_read(c, "wing flutter shock") == [False]
        ready = [s for s in c.store.sidecars([DocKey("t1", "c", d["_id"]) for d in mine], c.settings.space).values()
                 if s.status == SemanticStatus.READY]
        assert len(ready) == 1  # TouchPolicy.first_under_budget
    finally:
        c.stop()


# -- the "auto" follow-up (TouchPolicy.follow_up == "auto", touch.FollowUpSwitch) -------------


def test_disagreement_counts_the_lexical_top_left_out_over_what_the_embedded_share_predicts() -> None:
    from services.planner.touch_switch import AGREE_BASE, AGREE_SLOPE, disagreement

    lex = keys(20)
    assert disagreement(lex, lex, 0) == pytest.approx(-AGREE_BASE)  # the fused top is the lexical top
    fused = [*lex[:6], *lex[12:16]]  # leaves out four of the lexical top 10
    assert disagreement(lex, fused, 10) == pytest.approx(4 - AGREE_BASE - 10 * AGREE_SLOPE)
    assert disagreement(lex, fused, 45) == disagreement(lex, fused, 30)  # the prediction flattens


def test_the_follow_up_switch_is_per_tenant_and_collection_waits_for_enough_reads_and_is_bounded() -> None:
    from services.planner.touch_switch import FollowUpSwitch

    sw = FollowUpSwitch(size=2, window=4)
    for _ in range(2):
        sw.observe("t1", "agree", -1.0)
        sw.observe("t1", "disagree", 1.0)
    assert not sw.on("t1", "agree", after=3, below=0.0)  # too few reads yet
    sw.observe("t1", "agree", -1.0)
    sw.observe("t1", "disagree", 1.0)
    assert sw.on("t1", "agree", after=3, below=0.0)
    assert not sw.on("t1", "disagree", after=3, below=0.0)
    assert not sw.on("t2", "agree", after=3, below=0.0)  # another tenant's collection of that name
    for _ in range(4):  # its reads now disagree: off again (the mean weighs the last ~4 reads)
        sw.observe("t1", "agree", 1.0)
    assert not sw.on("t1", "agree", after=3, below=0.0)
    sw.observe("t2", "other", -1.0)  # a third collection: the least recently observed one goes
    assert len(sw) == 2
    one = FollowUpSwitch(size=1)
    one.observe("t1", "a", -1.0)
    assert one.on("t1", "a", after=1, below=0.0)
    one.observe("t1", "b", -1.0)
    assert len(one) == 1 and not one.on("t1", "a", after=1, below=0.0)  # dropped: off until seen again


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("1", True), ("0", False),
                                                 ("auto", "auto")])
def test_the_follow_up_setting_takes_true_false_or_auto(monkeypatch: pytest.MonkeyPatch, value: str,
                                                        expected: bool | str) -> None:
    from services.wiring import touch_policy
    from shared.config import Settings

    monkeypatch.setenv("VIBE_TOUCH_FOLLOW_UP", value)
    policy = touch_policy(Settings())
    assert policy.follow_up == expected and type(policy.follow_up) is type(expected)
    assert (policy.auto_dig_step, policy.auto_disagree, policy.auto_disagree_probe_rounds,
            policy.auto_disagree_dig_step) == (8, True, 1, 4)  # the policy's own numbers
    policy = touch_policy(Settings(), auto_dig_step=6, auto_disagree=False, auto_disagree_probe_rounds=2,
                          auto_disagree_dig_step=3)  # tuned in code, the follow-up switch still the operator's
    assert policy.follow_up == expected
    assert (policy.auto_dig_step, policy.auto_disagree, policy.auto_disagree_probe_rounds,
            policy.auto_disagree_dig_step) == (6, False, 2, 3)


class _AgreeOrNotEmbedder(_WordEmbedder):
    """Two topics, one word in documents of every length (BM25 ranks the shorter first): on
    "wing" the semantic leg ranks as the lexical one does (the shorter, the closer), on "flap"
    against it (the longer, the closer): a collection of each."""

    def _vec(self, text: str, query: bool) -> list[float]:
        words = text.lower().split()
        w, f, n = "wing" in words, "flap" in words, len(words) / 10
        v = [0.0] * self.dim
        if query:
            v[0], v[2] = float(w), float(f)
        else:
            v[0], v[1], v[2], v[3] = float(w), n * w, n * f, float(f)
        v[31] = 0.01
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vec(t, False) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text, True)


def _agree_and_disagree(c: Container, who: Principal) -> None:
    """A collection of each kind (`_AgreeOrNotEmbedder`) for `who`'s tenant, 60 documents each."""
    for col, word in (("agree", "wing"), ("disagree", "flap")):
        docs = [{"_id": f"{col}{i}", "body": " ".join([word, *(f"filler{j}" for j in range(i))]),
                 "_acl": ["user:alice"]} for i in range(1, 61)]
        c.docs.put([c.docs.parse(who, col, d["_id"], d) for d in docs])


def _first_reads(c: Container, who: Principal, col: str, word: str, touches: list[Any]) -> list[list[Any]]:
    """Four first reads as the SSE route runs them; what `touches` recorded for each one's touches."""
    from services.planner.planner import ReadRequest
    from shared.adapters.memory_queue import InProcessQueue

    out = []
    for q in (word, f"{word} one", f"{word} two", f"{word} three"):
        touches.clear()
        session = c.planner.open(who, ReadRequest(col, q, "hybrid", limit=10), streaming=True)
        session.complete_semantic()
        session.touch()
        while True:
            while session.awaits_backfill:
                assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
                session.refresh()
            if not session.follow_up():
                break
        out.append(list(touches))
    return out


def test_auto_follows_up_where_first_reads_agree_with_the_lexical_top_and_not_where_they_disagree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real planner: first reads of "agree" leave their lexical top about where it is, so once
    three of them are counted its reads follow up; those of "disagree" pull documents from below the
    lexical top onto the page, so (the disagree branch off) its reads never do. Another tenant's
    "agree" starts off."""
    from services.planner.planner import ReadSession
    from services.wiring import build, touch_policy
    from shared.config import Settings

    touches: list[int] = []  # the dig step of each touch planned (the follow-up's is auto_dig_step)
    real_touch = ReadSession._touch_adaptive

    def counted(self: ReadSession) -> None:
        touches.append(self._policy().dig_step)
        real_touch(self)

    monkeypatch.setattr(ReadSession, "_touch_adaptive", counted)
    s = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000, touch_follow_up="auto")
    c = build(s, _AgreeOrNotEmbedder(), touch=touch_policy(s, auto_disagree=False))
    c.planner.cfg.touch = replace(c.planner.cfg.touch, auto_after=3)
    c.start()
    try:
        bob = Principal("t2", ("user:alice",), frozenset({"read", "write", "admin"}))
        for who in (ALICE, bob):
            _agree_and_disagree(c, who)

        def reads(who: Principal, col: str, word: str) -> list[list[int]]:
            return _first_reads(c, who, col, word, touches)

        switch, below = c.planner.follow_ups, c.planner.cfg.touch.auto_below
        base, step = c.planner.cfg.touch.dig_step, c.planner.cfg.touch.auto_dig_step
        # "agree": once its third first read is counted, that read follows up (a second touch),
        # and from then on its touches dig auto_dig_step at a time
        assert reads(ALICE, "agree", "wing") == [[base], [base], [base, step], [step, step]]
        assert switch.on("t1", "agree", 3, below)
        assert reads(ALICE, "disagree", "flap") == [[base]] * 4  # never on
        assert not switch.on("t1", "disagree", 3, below)
        assert reads(bob, "agree", "wing")[:3] == [[base], [base], [base, step]]  # another tenant's "agree" learns anew
    finally:
        c.stop()


def test_the_switch_reports_unknown_then_agree_or_disagree_by_one_threshold() -> None:
    from services.planner.touch_switch import FollowUpSwitch

    sw = FollowUpSwitch(window=10)
    for i in range(5):
        assert sw.state("t1", "c", after=5, below=-0.05) == "unknown"  # too few reads yet
        sw.observe("t1", "c", 0.4)
        sw.observe("t1", "d", -0.4)
        assert (i < 4) == (sw.state("t1", "c", after=5, below=-0.05) == "unknown")
    assert sw.state("t1", "c", after=5, below=-0.05) == "disagree"  # at or above the threshold
    assert not sw.on("t1", "c", after=5, below=-0.05)
    assert sw.state("t1", "d", after=5, below=-0.05) == "agree" and sw.on("t1", "d", after=5, below=-0.05)
    assert sw.state("t1", "c", after=5, below=0.4) == "disagree"  # the threshold itself is "disagree"
    assert sw.state("t2", "c", after=5, below=-0.05) == "unknown"  # another tenant's collection
    for _ in range(30):  # its reads now agree: the running mean follows
        sw.observe("t1", "c", -1.0)
    assert sw.state("t1", "c", after=5, below=-0.05) == "agree"


def test_auto_follows_up_a_disagreeing_collection_with_one_probing_round_and_small_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real planner, the disagree branch on (default): once three first reads of "disagree" are
    counted (their fused top leaves the lexical top), its reads follow up too, with
    `auto_disagree_probe_rounds` probing rounds and `auto_disagree_dig_step` steps; "agree" keeps
    `auto_dig_step` and the default probing rounds."""
    from services.planner.planner import ReadSession
    from services.wiring import build, touch_policy
    from shared.config import Settings

    touches: list[tuple[int, int]] = []  # (dig step, probing rounds) of each touch planned
    real_touch = ReadSession._touch_adaptive

    def counted(self: ReadSession) -> None:
        policy = self._policy()
        touches.append((policy.dig_step, policy.probe_rounds))
        real_touch(self)

    monkeypatch.setattr(ReadSession, "_touch_adaptive", counted)
    s = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000, touch_follow_up="auto")
    c = build(s, _AgreeOrNotEmbedder(), touch=touch_policy(s, auto_disagree_probe_rounds=1, auto_disagree_dig_step=4))
    c.planner.cfg.touch = replace(c.planner.cfg.touch, auto_after=3)
    c.start()
    try:
        _agree_and_disagree(c, ALICE)

        def reads(col: str, word: str) -> list[list[tuple[int, int]]]:
            return _first_reads(c, ALICE, col, word, touches)

        t = c.planner.cfg.touch
        assert t.auto_disagree  # on by default
        base, agree, disagree = (t.dig_step, t.probe_rounds), (t.auto_dig_step, t.probe_rounds), (4, 1)
        assert reads("disagree", "flap") == [[base], [base], [base, disagree], [disagree, disagree]]
        assert c.planner.follow_ups.state("t1", "disagree", 3, t.auto_below) == "disagree"
        assert reads("agree", "wing") == [[base], [base], [base, agree], [agree, agree]]
        assert c.planner.follow_ups.state("t1", "agree", 3, t.auto_below) == "agree"
    finally:
        c.stop()


@pytest.mark.parametrize("follow", [False, True])
def test_explicit_follow_up_ignores_the_switch_in_any_state(tmp_path: Path, follow: bool) -> None:
    """VIBE_TOUCH_FOLLOW_UP true/false: the policy as set, whatever the collection's switch says
    (no agree or disagree branch)."""
    from services.planner.planner import ReadRequest
    from services.wiring import build, touch_policy
    from shared.config import Settings

    s = Settings(data_dir=tmp_path / "data", embedder="openai", touch_follow_up=follow)
    c = build(s, _WordEmbedder(), touch=touch_policy(s, auto_disagree=True))
    c.planner.cfg.touch = replace(c.planner.cfg.touch, auto_after=3)
    try:
        switch = c.planner.follow_ups
        for value, col in ((1.0, "dis"), (-1.0, "agr")):
            for _ in range(5):
                switch.observe("t1", col, value)
        t = c.planner.cfg.touch
        assert switch.state("t1", "dis", 3, t.auto_below) == "disagree"
        assert switch.state("t1", "agr", 3, t.auto_below) == "agree"
        for col in ("dis", "agr", "new"):
            session = c.planner.open(ALICE, ReadRequest(col, "wing", "hybrid", limit=10), streaming=True)
            assert session._policy() is t  # unchanged: follow_up as set, dig step 5, probing rounds 3
        assert (t.follow_up, t.dig_step, t.probe_rounds) == (follow, 5, 3)
    finally:
        c.stop()
