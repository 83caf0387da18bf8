"""`auto`'s collection-state figure: counted by the store at most once per TTL per scope, and the
thresholds that turn it into a choice (services/planner/auto_state.py)."""

from __future__ import annotations

from services.planner.auto_state import AutoThresholds, CoverageCache, by_state, state_rule
from services.planner.request import ReadRequest
from services.planner.strategy import choose_strategy


class Store:
    def __init__(self, ready: int, total: int) -> None:
        self.ready, self.total = ready, total
        self.calls: list[tuple[str, str | None, str]] = []

    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]:
        self.calls.append((tenant, collection, space))
        return {"total": self.total, "ready": self.ready}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_share_is_counted_once_per_ttl_per_scope_and_refreshed_in_the_background() -> None:
    store, clock, later = Store(1, 50), Clock(), []
    cache = CoverageCache(store, ttl=30, clock=clock, background=later.append)
    assert cache.share("t", "c", "core") == 0.02  # a scope's first read counts it
    store.ready = 50
    clock.now += 29
    assert cache.share("t", "c", "core") == 0.02 and len(store.calls) == 1  # reused within the TTL
    assert cache.share("t", None, "core") == 1.0 and store.calls[-1] == ("t", None, "core")  # its own scope
    clock.now += 2
    # past the TTL a read still answers at once with the figure it has; one refresh is queued
    assert cache.share("t", "c", "core") == 0.02 and cache.share("t", "c", "core") == 0.02
    assert len(later) == 1 and len(store.calls) == 2
    later.pop()()
    assert len(store.calls) == 3 and cache.share("t", "c", "core") == 1.0 and not later


def test_an_empty_collection_counts_as_nothing_embedded_and_a_failing_store_as_unknown() -> None:
    assert CoverageCache(Store(0, 0)).share("t", "c", "core") == 0.0

    class Broken:
        def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]:
            raise RuntimeError("store away")

    assert CoverageCache(Broken()).share("t", "c", "core") is None


def test_the_thresholds() -> None:
    t = AutoThresholds(keyword_below=0.05, short_words=3, hybrid_above=0.5)
    assert by_state(0.02, 2, t) == ("keyword", "low_coverage: 0.02 of the collection embedded < 0.05, "
                                               "short query (2 words)")
    assert by_state(0.02, 4, t) is None  # a longer question: by its shape
    assert by_state(0.3, 1, t) is None
    assert by_state(0.5, 1, t) == ("hybrid", "high_coverage: 0.50 of the collection embedded >= 0.5")
    assert by_state(None, 1, t) is None


def test_shape_decides_before_state_and_state_is_only_looked_up_when_it_can_decide() -> None:
    store = Store(0, 10)
    rule = state_rule(CoverageCache(store), "t", "c", "core")
    req = ReadRequest("c", "x")
    assert choose_strategy(req, '"exact phrase"', True, rule) == ("keyword", "quoted_phrase")
    assert choose_strategy(req, "ABC-123", True, rule) == ("keyword", "identifier_like")
    assert choose_strategy(req, "gearbox", False, rule) == ("keyword", "no_embedder")
    assert store.calls == []
    assert choose_strategy(req, "gearbox oil", True, rule)[0] == "keyword" and len(store.calls) == 1
    assert choose_strategy(ReadRequest("c", "x", "hybrid"), "gearbox", True, rule) == ("hybrid", "requested")
    assert choose_strategy(req, "gearbox oil", True, None) == ("hybrid", "natural_language")
