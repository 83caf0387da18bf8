"""The adaptive touch policy (services/planner/touch.py `plan`): what a query spends embedding on."""

from __future__ import annotations

import statistics

from services.planner.touch import (
    COLD,
    OTHER,
    PENDING,
    READY,
    TouchPolicy,
    frontier,
    plan,
    reach,
    touch_state,
    unstable,
)
from shared.model import DocKey, SemanticStatus

POLICY = TouchPolicy("adaptive", depth_factor=2.0, min_depth=10, dig_step=10, dig_factor=3.0, dig_max=60,
                     stable_zone=0.5, reserve=4.0)
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
    assert plan(shallow, 10, lex, [*lex[:9], lex[12]], state, PLENTY).keys == lex[15:20]  # 2 x depth 10


def test_tight_budget_spends_on_the_page_and_never_digs() -> None:
    lex = keys(100)
    state = {k: COLD for k in lex}
    page = lex[:10]
    p = plan(POLICY, 10, lex, page, state, available=0)
    assert p.keys == lex[:10] and p.depth == 10 and not p.neighbours
    half = plan(POLICY, 10, lex, page, state, available=40)  # half the reserve (4 x depth 20)
    assert half.keys == lex[:15]
    state = {k: (READY if i < 20 else COLD) for i, k in enumerate(lex)}
    assert plan(POLICY, 10, lex, [*lex[:9], lex[17]], state, available=50).keys == []


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
