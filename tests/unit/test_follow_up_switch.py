"""The "auto" follow-up switch on the store of record (services/planner/touch_switch.py FollowUpSwitch,
shared/follow_up.py, shared/adapters/touch_switch_sql.py): the merge arithmetic, load on first
ask, restarts and replicas over one store (a real SQLite file; both stores in
tests/contract/test_follow_up_store.py), the size cap, tenants apart, and that a process alone
with its store keeps exactly what it kept without one (bench.touch_sim's streams unchanged)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from services.planner.touch_switch import FollowUpSwitch
from shared.adapters.sqlite_store import SqliteStore
from shared.follow_up import FollowUpFlush, merge_mean, merged, switch_state

AFTER, BELOW = 5, -0.05


class Clock:
    """The switch's monotonic clock, moved by hand (no wall-clock waits)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "s.sqlite3")
    yield s
    s.close()


def sequential(values: list[float], window: int, reads: int = 0, mean: float = 0.0) -> tuple[int, float]:
    """The 1/min(reads, window) rule one read at a time, as the switch applies it."""
    for v in values:
        reads += 1
        mean += (v - mean) / min(reads, window)
    return reads, mean


def switch(store: SqliteStore | None, clock: Clock | None = None, **kw: object) -> FollowUpSwitch:
    return FollowUpSwitch(store=store, clock=clock or Clock(), after=AFTER, below=BELOW, **kw)  # type: ignore[arg-type]


def changes(to: str) -> float:
    return REGISTRY.get_sample_value("vibe_touch_follow_up_changes_total", {"to": to}) or 0.0


# -- arithmetic ---------------------------------------------------------------------------------


def test_a_batch_within_the_window_merges_to_the_plain_mean_whatever_its_order() -> None:
    rnd = random.Random(1)
    old = [rnd.uniform(-1, 1) for _ in range(20)]
    batch = [rnd.uniform(-1, 1) for _ in range(15)]
    reads, mean = sequential(old, 100)
    want = sequential(old + batch, 100)
    assert merge_mean(reads, mean, len(batch), sum(batch), 100) == pytest.approx(want[1], abs=1e-12)
    assert merge_mean(reads, mean, 0, 0.0, 100) == mean  # nothing to add: the row as it was


def test_past_the_window_a_batch_of_equal_reads_merges_exactly_and_others_closely() -> None:
    reads, mean = sequential([0.3] * 150, 10)
    assert merge_mean(reads, mean, 4, 4 * -1.0, 10) == pytest.approx(sequential([-1.0] * 4, 10, reads, mean)[1])
    rnd = random.Random(2)
    batch = [rnd.uniform(-1, 1) for _ in range(5)]
    exact = sequential(batch, 100, 300, 0.2)[1]
    approx = merge_mean(300, 0.2, 5, sum(batch), 100)
    assert approx != exact and abs(approx - exact) < 0.01  # the order is lost, not much else
    # a batch across the window's edge: its first reads join the plain mean, the rest decay
    crossing = sequential([0.5] * 6, 10, 8, -0.5)
    assert merge_mean(8, -0.5, 6, 3.0, 10) == pytest.approx(crossing[1])


def test_a_flush_onto_the_row_it_started_from_writes_its_own_state_else_merges() -> None:
    mine = FollowUpFlush(base_reads=10, base_mean=0.1, reads=13, mean=0.123456789, n=3, total=0.5)
    assert merged((10, 0.1), mine, 100) == (13, 0.123456789)  # nobody wrote since: exact
    assert merged(None, FollowUpFlush(0, 0.0, 2, 0.25, 2, 0.5), 100) == (2, 0.25)
    reads, mean = merged((12, 0.0), mine, 100)  # another replica's two reads came in between
    assert reads == 15 and mean == pytest.approx((12 * 0.0 + 0.5) / 15)


def test_the_state_is_unknown_until_after_reads_then_split_by_one_threshold() -> None:
    assert switch_state(4, -1.0, 5, BELOW) == "unknown"
    assert switch_state(5, -1.0, 5, BELOW) == "agree"
    assert switch_state(5, BELOW, 5, BELOW) == "disagree"


# -- one process --------------------------------------------------------------------------------


def test_alone_with_its_store_a_switch_keeps_exactly_what_it_kept_without_one(store: SqliteStore) -> None:
    """Bit-identical means and states, read by read, for a stream that crosses the window and the
    threshold both ways (bench.touch_sim depends on it)."""
    rnd = random.Random(3)
    values = [rnd.gauss(0.3 if i < 80 else -0.4, 0.8) for i in range(300)]
    clock = Clock()
    durable, plain = switch(store, clock, window=40, flush_every=7, refresh_seconds=5), switch(None, window=40)
    seen = []
    for v in values:
        clock.now += 1  # refreshes read the row back more than once on the way
        for sw in (durable, plain):
            sw.observe("t", "c", v)
        states = [sw.state("t", "c", AFTER, BELOW) for sw in (durable, plain)]
        assert states[0] == states[1]
        seen.append(states[0])
        e, p = durable._seen[("t", "c")], plain._seen[("t", "c")]
        assert (e.reads, e.mean) == (p.reads, p.mean)
    assert {"unknown", "agree", "disagree"} <= set(seen)
    row = store.follow_up_row("t", "c")
    assert row is not None and row.reads <= 300 and 300 - row.reads < 7  # flushed every 7 reads or on a change


def test_the_first_ask_loads_the_row_and_later_asks_stay_in_memory(store: SqliteStore) -> None:
    writer = switch(store, flush_every=1)
    for _ in range(AFTER):
        writer.observe("t", "c", -1.0)
    calls = []
    real = store.follow_up_row

    def counted(tenant: str, collection: str) -> object:
        calls.append((tenant, collection))
        return real(tenant, collection)

    store.follow_up_row = counted  # type: ignore[method-assign]
    clock = Clock()
    reader = switch(store, clock, refresh_seconds=30)
    assert reader.state("t", "c", AFTER, BELOW) == "agree"  # loaded on the first ask
    assert reader.state("t", "new", AFTER, BELOW) == "unknown"  # no row: unknown, and remembered
    for _ in range(20):
        reader.state("t", "c", AFTER, BELOW)
        reader.state("t", "new", AFTER, BELOW)
    assert calls == [("t", "c"), ("t", "new")]  # one store read each, not one per decision
    clock.now = 30
    reader.state("t", "c", AFTER, BELOW)
    assert calls[-1] == ("t", "c") and len(calls) == 3  # refreshed once its time is up


def test_a_restarted_switch_takes_up_the_state_another_wrote(store: SqliteStore, tmp_path: Path) -> None:
    first = switch(store, flush_every=4)
    for _ in range(AFTER + 2):
        first.observe("t", "c", 0.5)  # disagree, written at the change
    assert first.state("t", "c", AFTER, BELOW) == "disagree"
    first.flush()  # as Container.stop does
    store.close()
    again = SqliteStore(tmp_path / "s.sqlite3")
    try:
        fresh = switch(again)
        assert fresh.state("t", "c", AFTER, BELOW) == "disagree"  # not "unknown" again
        row = again.follow_up_row("t", "c")
        assert row is not None and (row.reads, row.mean) == (AFTER + 2, pytest.approx(0.5))
    finally:
        again.close()


def test_a_state_change_is_written_at_once_and_counted_once(store: SqliteStore) -> None:
    sw = switch(store, flush_every=1000)
    before = changes("agree")
    for _ in range(AFTER - 1):
        sw.observe("t", "c", -1.0)
    assert store.follow_up_row("t", "c") is None  # nothing written yet: no change, flush_every not reached
    sw.observe("t", "c", -1.0)  # the read that makes it "agree"
    row = store.follow_up_row("t", "c")
    assert row is not None and row.reads == AFTER
    assert changes("agree") == before + 1
    assert sw.counts() == {"unknown": 0, "agree": 1, "disagree": 0}


# -- replicas -----------------------------------------------------------------------------------


def test_two_replicas_over_one_store_converge_and_one_uses_what_the_other_learned(store: SqliteStore) -> None:
    clock = Clock()
    a = switch(store, clock, flush_every=3, refresh_seconds=10)
    b = switch(store, clock, flush_every=3, refresh_seconds=10)
    assert b.state("t", "c", AFTER, BELOW) == "unknown"  # b asked early: its cache holds no reads
    for _ in range(AFTER):
        a.observe("t", "c", -1.0)  # a learns "agree" (written at the change)
    assert a.state("t", "c", AFTER, BELOW) == "agree"
    assert b.state("t", "c", AFTER, BELOW) == "unknown"  # within its refresh time, b decides from memory
    clock.now = 10
    assert b.state("t", "c", AFTER, BELOW) == "agree"  # then it reads what a wrote
    before = changes("agree")
    for _ in range(3):
        b.observe("t", "c", -1.0)  # b flushes onto a's "agree": no change, nothing counted again
    assert changes("agree") == before and store.follow_up_row("t", "c").reads == AFTER + 3  # type: ignore[union-attr]
    rnd = random.Random(4)
    for i in range(40):  # both observe; each flushes onto what the other wrote
        (a if i % 3 else b).observe("t", "c", rnd.uniform(-1.5, 0.5))
    a.flush()
    b.flush()
    row = store.follow_up_row("t", "c")
    assert row is not None and row.reads == AFTER + 43  # every read counted once
    clock.now = 20
    for sw in (a, b):
        sw.state("t", "c", AFTER, BELOW)  # refresh
        e = sw._seen[("t", "c")]
        assert (e.reads, e.mean, e.n) == (row.reads, row.mean, 0)  # both stand on the stored row
    assert -1.5 < row.mean < 0.5


# -- bounds and tenants -------------------------------------------------------------------------


def test_the_cap_bounds_memory_and_a_dropped_collection_keeps_its_reads(store: SqliteStore) -> None:
    sw = switch(store, size=2, flush_every=100)
    for col in ("a", "b", "c"):
        for _ in range(3):
            sw.observe("t", col, -1.0)
    assert len(sw) == 2 and ("t", "a") not in sw._seen
    row = store.follow_up_row("t", "a")
    assert row is not None and row.reads == 3  # written when dropped, not lost
    for _ in range(AFTER - 3):
        sw.observe("t", "a", -1.0)  # read back, counted on
    assert len(sw) == 2 and sw.state("t", "a", AFTER, BELOW) == "agree"
    plain = switch(None, size=1)
    plain.observe("t", "a", -1.0)
    plain.observe("t", "b", -1.0)
    assert len(plain) == 1 and plain.state("t", "a", 1, BELOW) == "unknown"  # no store: starts again


def test_tenants_and_collections_are_apart(store: SqliteStore) -> None:
    sw = switch(store, flush_every=1)
    for _ in range(AFTER):
        sw.observe("t1", "c", -1.0)
        sw.observe("t1", "d", 1.0)
    other = switch(store)
    assert other.state("t1", "c", AFTER, BELOW) == "agree" and other.state("t1", "d", AFTER, BELOW) == "disagree"
    assert other.state("t2", "c", AFTER, BELOW) == "unknown"
    assert [r.collection for r in store.follow_up_rows("t1")] == ["c", "d"]
    assert store.follow_up_rows("t2") == []


def test_the_composition_root_builds_the_switch_on_the_store_of_record(tmp_path: Path) -> None:
    from services.wiring import build, touch_policy
    from shared.config import Settings

    s = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, touch_auto_flush_every=3,
                 touch_auto_refresh_seconds=7)
    c = build(s, touch=touch_policy(s, auto_after=4, auto_below=0.5))
    try:
        sw = c.planner.follow_ups
        assert sw.store is c.store  # the planner's own switch, on the store of record
        assert (sw.flush_every, sw.refresh_seconds, sw.after, sw.below) == (3, 7, 4, 0.5)
        assert (c.planner.cfg.touch.auto_after, c.planner.cfg.touch.auto_below) == (4, 0.5)
    finally:
        c.stop()


def test_a_store_away_fails_no_read_and_the_observations_wait_for_it(store: SqliteStore) -> None:
    away = True
    real_row, real_merge = store.follow_up_row, store.merge_follow_up

    def row(*a: object) -> object:
        if away:
            raise OSError("store away")
        return real_row(*a)  # type: ignore[arg-type]

    def merge(*a: object) -> object:
        if away:
            raise OSError("store away")
        return real_merge(*a)  # type: ignore[arg-type]

    store.follow_up_row, store.merge_follow_up = row, merge  # type: ignore[assignment, method-assign]
    clock = Clock()
    sw = switch(store, clock, flush_every=2, refresh_seconds=10)
    assert sw.state("t", "c", AFTER, BELOW) == "unknown"
    for _ in range(AFTER):
        sw.observe("t", "c", -1.0)  # decided in memory meanwhile
    assert sw.state("t", "c", AFTER, BELOW) == "agree"
    away = False
    sw.observe("t", "c", -1.0)  # the next flush writes everything pending
    stored = real_row("t", "c")
    assert stored is not None and stored.reads == AFTER + 1


def test_a_hung_store_call_holds_up_only_its_own_collection(store: SqliteStore) -> None:
    """One collection's store call (a first load, a refresh, a flush) is in flight: reads of
    other collections decide without waiting for it; reads of the same collection wait."""
    import threading

    from services.planner.touch_switch import FollowUpSwitch as Switch

    sw = switch(store, flush_every=1)
    for _ in range(AFTER):
        sw.observe("t", "b", -1.0)  # b's row is stored
    fresh = switch(store, flush_every=1)
    io = Switch._io
    slow = "a"
    other = next(c for c in ("b", "c", "d", "e") if io(fresh, ("t", c)) is not io(fresh, ("t", slow)))
    if other != "b":  # b shares a's stripe: give the collection that does not a stored row too
        for _ in range(AFTER):
            sw.observe("t", other, -1.0)
    entered, release = threading.Event(), threading.Event()
    real_row = store.follow_up_row

    def row(tenant: str, collection: str) -> object:
        if collection == slow:
            entered.set()
            assert release.wait(30)
        return real_row(tenant, collection)

    store.follow_up_row = row  # type: ignore[assignment, method-assign]
    results: dict[str, str] = {}
    hung = threading.Thread(target=lambda: results.update(a=fresh.state("t", slow, AFTER, BELOW)))
    hung.start()
    try:
        assert entered.wait(30)
        done, same = threading.Event(), threading.Event()

        def read_other() -> None:
            results["o"] = fresh.state("t", other, AFTER, BELOW)
            done.set()

        def observe_slow() -> None:
            fresh.observe("t", slow, -1.0)
            same.set()

        threading.Thread(target=read_other, daemon=True).start()
        assert done.wait(10), "another collection's read waited behind a hung store call"
        assert results["o"] == "agree"  # read from the store, not guessed
        threading.Thread(target=observe_slow, daemon=True).start()
        assert not same.wait(0.3)  # the same collection waits for its own load
    finally:
        release.set()
        hung.join(30)
    assert same.wait(30) and results["a"] == "unknown"
    assert real_row("t", slow) is not None and real_row("t", slow).reads == 1  # type: ignore[union-attr]


def test_a_dropped_collections_observations_are_written_by_the_thread_that_dropped_it(store: SqliteStore) -> None:
    sw = switch(store, size=1, flush_every=100)
    sw.observe("t", "a", -1.0)
    sw.observe("t", "a", -1.0)
    sw.state("t", "b", AFTER, BELOW)  # loads b, drops a: its two reads are written on the way out
    row = store.follow_up_row("t", "a")
    assert row is not None and row.reads == 2 and sw._dropped == []
    sw.observe("t", "c", 1.0)  # drops b, which had nothing to write
    assert store.follow_up_row("t", "b") is None and sw._dropped == []
