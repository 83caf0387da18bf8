"""LifecycleStore contract (shared/adapters/lifecycle_sql/): every method, against SQLite and
PostgreSQL alike, with the `opener`/`store` fixtures of the DocumentStore contract."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from shared.adapters.lifecycle_sql.sweeps import _PAIRS
from shared.adapters.sqlite_store import SqliteStore
from shared.model import (
    PUBLIC_PRINCIPAL,
    BackfillTask,
    CollectionMode,
    DocKey,
    SemanticStatus,
    SidecarEntry,
    SpaceInfo,
    StoredDoc,
    UsageBatch,
)
from shared.ports import CodeCursor, ColdRow, StoreOfRecord
from tests.contract.test_store_contract import Opener, opener, store  # noqa: F401 - fixtures

S = SemanticStatus
SEP = "\x1f"
T0 = 300 * 3600.0  # on a bucket boundary
HOUR = 3600.0
HL = 100.0  # half-life of touches in these tests


def k(i: str, c: str = "c", tenant: str = "t") -> DocKey:
    return DocKey(tenant, c, i)


def put(st: StoreOfRecord, key: DocKey, h: str, status: SemanticStatus = S.NONE) -> None:
    st.put_docs([StoredDoc(key, {"title": key.doc_id}, [PUBLIC_PRINCIPAL], None, h, 1.0)],
                [SidecarEntry(key, "core", status, h, updated_at=1.0)])


def ready(st: StoreOfRecord, key: DocKey, h: str, vec: list[float] | None = None) -> None:
    put(st, key, h, S.QUEUED)
    side = st.sidecar(key, "core")
    assert side is not None
    assert st.commit_vectors([(side, vec or [0.6, 0.8])], "m") == [key]


def mode(c: str, m: str, manual: bool = False, since: float = T0, tenant: str = "t") -> CollectionMode:
    return CollectionMode(tenant, c, m, since, "manual" if manual else "auto: test", manual,  # type: ignore[arg-type]
                          {"queries": 3})


def status(st: StoreOfRecord, key: DocKey) -> SidecarEntry:
    side = st.sidecar(key, "core")
    assert side is not None
    return side


def every_batch(step: Callable[[str, str, tuple[str, str] | None, int, float], tuple[int, tuple[str, str] | None]],
                tenant: str, space: str, limit: int, now: float) -> tuple[int, int]:
    """A batched store step (`fill_space_rows`, `realign_space_rows`) to the end: (rows, batches)."""
    after: tuple[str, str] | None = None
    rows, batches = 0, 0
    while True:
        n, after = step(tenant, space, after, limit, now)
        rows, batches = rows + n, batches + 1
        if after is None:
            return rows, batches


def prune_orphans(st: StoreOfRecord, limit: int = 10_000) -> tuple[int, list[ColdRow]]:
    """A whole pass of both orphan sweeps (`prune_orphan_vectors`, `prune_orphan_cold`)."""
    removed, gone = 0, []
    after: CodeCursor | None = None
    while True:
        n, after = st.prune_orphan_vectors(after, limit)
        removed += n
        if after is None:
            break
    while True:
        rows, after = st.prune_orphan_cold(after, limit)
        gone += rows
        if after is None:
            return removed, gone


def prune_cold_copies(st: StoreOfRecord, limit: int = 10_000) -> list[ColdRow]:
    gone: list[ColdRow] = []
    after: CodeCursor | None = None
    while True:
        rows, after = st.prune_cold_copies(after, limit)
        gone += rows
        if after is None:
            return gone


@pytest.fixture
def lc(store: StoreOfRecord) -> StoreOfRecord:  # noqa: F811 - the imported fixture
    assert isinstance(store, StoreOfRecord)
    return store


# -- usage statistics -----------------------------------------------------------------------


def test_record_usage_sums_queries_and_hits_per_bucket_within_the_window(lc: StoreOfRecord) -> None:
    b = UsageBatch(queries={("t", "c"): 2, ("t", "d"): 1}, hits={("t", "c"): 7}, last_query={("t", "c"): T0 + 5})
    lc.record_usage(b, T0 + 10, HOUR, HL)
    lc.record_usage(UsageBatch(queries={("t", "c"): 3}, hits={("t", "c"): 4}, last_query={("t", "c"): T0 + 20}),
                    T0 + 20, HOUR, HL)  # same bucket: adds up
    lc.record_usage(UsageBatch(queries={("t", "c"): 10}, hits={("t", "c"): 10}, last_query={("t", "c"): T0 + 2 * HOUR}),
                    T0 + 2 * HOUR, HOUR, HL)  # a later bucket
    by = {(u.tenant, u.collection): u for u in lc.collection_usage(T0 - HOUR)}
    assert (by[("t", "c")].queries, by[("t", "c")].hits) == (15, 21)
    assert by[("t", "c")].last_query_at == T0 + 2 * HOUR
    assert (by[("t", "d")].queries, by[("t", "d")].hits) == (1, 0)
    # only the buckets that start at or after `since` count; the last query is still known
    later = {(u.tenant, u.collection): u for u in lc.collection_usage(T0 + 2 * HOUR)}
    assert (later[("t", "c")].queries, later[("t", "c")].hits) == (10, 10)
    assert later[("t", "d")].queries == 0 and later[("t", "d")].last_query_at == T0 + 10
    # pruning drops buckets older than the bound, nothing else
    assert lc.prune_usage(T0 + HOUR) == 2
    assert {(u.tenant, u.collection) for u in lc.collection_usage(0)} == {("t", "c")}


def test_touches_decay_with_the_half_life_and_two_flushes_add_up(lc: StoreOfRecord) -> None:
    a = k("a")
    lc.record_usage(UsageBatch(touches={a: 4}), T0, HOUR, HL)
    u = lc.doc_usage(a)
    assert u is not None and u["touches"] == pytest.approx(4.0) and u["decayed_at"] == T0
    lc.record_usage(UsageBatch(touches={a: 2}), T0 + HL, HOUR, HL)  # 4 halves to 2, plus 2
    u = lc.doc_usage(a)
    assert u is not None and u["touches"] == pytest.approx(4.0) and u["decayed_at"] == T0 + HL
    lc.record_usage(UsageBatch(touches={a: 1}), T0 + HL, HOUR, HL)  # another process, same time: no decay
    u = lc.doc_usage(a)
    assert u is not None and u["touches"] == pytest.approx(5.0)
    # hot_docs decays to `now`: 5 touches at T0+HL are 2.5 at T0+2HL
    assert lc.hot_docs(T0 + 2 * HL, 2.4, HL, 10) == [a]
    assert lc.hot_docs(T0 + 2 * HL, 2.6, HL, 10) == []


def test_last_use_only_moves_forward(lc: StoreOfRecord) -> None:
    a = k("a")
    lc.record_usage(UsageBatch(used={a: T0 + 50}), T0 + 60, HOUR, HL)
    lc.record_usage(UsageBatch(used={a: T0 + 10}), T0 + 70, HOUR, HL)
    u = lc.doc_usage(a)
    assert u is not None and u["last_used_at"] == T0 + 50


def test_cooccurrence_counts_only_beside_pinned_docs(lc: StoreOfRecord) -> None:
    hot, b, c, d = k("hot"), k("b"), k("c"), k("d")
    lc.record_usage(UsageBatch(touches={hot: 1}), T0, HOUR, HL)
    assert lc.pin_docs([hot], T0 + 1000) == 1
    assert lc.pinned_count(hot.tenant, T0) == 1 and lc.pinned_count(hot.tenant, T0 + 1000) == 0
    assert lc.pinned_count("someone-else", T0) == 0
    lc.record_usage(UsageBatch(pages=[(hot, b), (c, d)], used={hot: T0 + 1, b: T0 + 1, c: T0 + 1, d: T0 + 1}),
                    T0 + 1, HOUR, HL)
    cooc = {x.doc_id: (lc.doc_usage(x) or {}).get("cooccur") for x in (hot, b, c, d)}
    assert cooc == {"hot": 0.0, "b": 1.0, "c": 0.0, "d": 0.0}
    # a second page beside the pinned doc adds up; after the pin ends it counts for nothing
    lc.record_usage(UsageBatch(pages=[(b, hot)], used={b: T0 + 1}), T0 + 1, HOUR, HL)
    assert (lc.doc_usage(b) or {})["cooccur"] == pytest.approx(2.0)
    lc.record_usage(UsageBatch(pages=[(c, hot)], used={c: T0 + 2000}), T0 + 2000, HOUR, HL)
    assert (lc.doc_usage(c) or {})["cooccur"] == 0.0


def test_hot_docs_and_pins(lc: StoreOfRecord) -> None:
    a, b, cold = k("a"), k("b"), k("cold")
    lc.record_usage(UsageBatch(touches={a: 3, b: 3, cold: 1}), T0, HOUR, HL)
    assert sorted(lc.hot_docs(T0, 3, HL, 10)) == [a, b]
    assert len(lc.hot_docs(T0, 3, HL, 1)) == 1  # limit
    assert lc.pin_docs([a, a, k("never-used")], T0 + 500) == 1  # only known documents, once each
    assert (lc.doc_usage(a) or {})["pinned_until"] == T0 + 500
    assert lc.hot_docs(T0, 3, HL, 10) == [b]  # pinned: not offered again
    # ... until its pin ends before the refresh bound
    assert sorted(lc.hot_docs(T0, 3, HL, 10, refresh_before=T0 + 600)) == [a, b]
    assert lc.hot_docs(T0, 3, HL, 10, refresh_before=T0 + 400) == [b]



@pytest.mark.parametrize("limit", [1, 2, 3, 5, 100])
def test_hot_docs_page_finds_what_hot_docs_does_a_page_at_a_time(lc: StoreOfRecord, limit: int) -> None:
    keys = [k(f"d{i}") for i in range(7)] + [DocKey("u", "c", "z")]
    lc.record_usage(UsageBatch(touches={x: 3 if i % 2 == 0 or x.tenant == "u" else 1 for i, x in enumerate(keys)}),
                    T0, HOUR, HL)
    lc.pin_docs([keys[2]], T0 + 500)
    found, after, pages = [], None, 0
    while True:
        page, after = lc.hot_docs_page(T0, 3, HL, after, limit, refresh_before=T0 + 400)
        assert len(page) <= limit
        found += page
        pages += 1
        if after is None:
            break
        assert pages <= len(keys)  # each page moves on
    assert found == sorted(lc.hot_docs(T0, 3, HL, 100, refresh_before=T0 + 400)) == [keys[i] for i in (0, 4, 6, 7)]
    assert pages == max(1, -(-len(keys) // limit))  # a page that reaches the end says so

# -- collection modes ---------------------------------------------------------------------------


def test_collection_modes_and_manual_decisions(lc: StoreOfRecord) -> None:
    assert lc.collection_modes() == [] and lc.promoted() == set()
    assert lc.set_collection_mode(mode("c", "eager")) is True
    assert lc.set_collection_mode(mode("c", "eager", since=T0 + 5)) is False  # nothing changes
    got = lc.collection_modes("t")
    assert len(got) == 1 and got[0].mode == "eager" and got[0].figures == {"queries": 3} and not got[0].manual
    assert lc.promoted() == {("t", "c")}
    # an operator's decision replaces it and then stands against the scheduler
    assert lc.set_collection_mode(mode("c", "lazy", manual=True)) is True
    assert lc.set_collection_mode(mode("c", "eager"), only_if_not_manual=True) is False
    assert lc.collection_modes("t")[0].mode == "lazy" and lc.promoted() == set()
    # ... but not against another operator decision
    assert lc.set_collection_mode(mode("c", "eager", manual=True), only_if_not_manual=False) is True
    assert lc.promoted() == {("t", "c")}
    # automatic decisions go through on non-manual rows; other tenants are apart
    lc.set_collection_mode(mode("d", "eager"))
    assert lc.set_collection_mode(mode("d", "lazy"), only_if_not_manual=True) is True
    lc.set_collection_mode(mode("c", "eager", tenant="u"))
    assert [m.collection for m in lc.collection_modes("t")] == ["c", "d"]
    assert [(m.tenant, m.collection) for m in lc.collection_modes()] == [("t", "c"), ("t", "d"), ("u", "c")]
    assert lc.promoted() == {("t", "c"), ("u", "c")}


# -- eviction -----------------------------------------------------------------------------------


FUTURE = 10 * T0 * 10_000  # after every wall-clock embedding time


def eviction_rows(lc: StoreOfRecord) -> float:
    """Ready rows that are old, pinned, recently used, queued, of an eager collection and of
    another tenant; returns the time the pin and the use are relative to."""
    for i in ("old", "pinned", "recent", "queued"):
        ready(lc, k(i), f"h-{i}")
    ready(lc, k("e", c="eager"), "h-e")
    ready(lc, k("o", tenant="u"), "h-o")
    put(lc, k("queued"), "h-q", S.QUEUED)
    lc.set_collection_mode(mode("eager", "eager"))
    lc.record_usage(UsageBatch(touches={k("pinned"): 1}, used={k("recent"): FUTURE - 10}), FUTURE - 10, HOUR, HL)
    lc.pin_docs([k("pinned")], FUTURE + 100)
    return FUTURE


def test_eviction_candidates_exclude_eager_pinned_and_recent(lc: StoreOfRecord) -> None:
    future = eviction_rows(lc)
    got = lc.eviction_candidates("core", future - 100, future, 100)
    assert sorted(s.key for s in got) == [k("old"), k("o", tenant="u")]
    assert all(s.status == S.READY for s in got)
    assert [s.key for s in lc.eviction_candidates("core", future - 100, future, 100, tenant="u")] == [
        k("o", tenant="u")]
    assert lc.eviction_candidates("core", future - 100, future, 100, tenant="t", collection="other") == []
    assert [s.key for s in lc.eviction_candidates("core", future - 100, future, 100, "t", "c")] == [k("old")]
    assert len(lc.eviction_candidates("core", future - 100, future, 1)) == 1
    assert lc.eviction_candidates("other-space", future - 100, future, 100) == []
    # once the pin has run out the pinned document is a candidate too
    after = [s.key for s in lc.eviction_candidates("core", future - 5, future + 200, 100, tenant="t")]
    assert sorted(after) == [k("old"), k("pinned"), k("recent")]
    # nothing embedded recently is idle: an idle bound before the embedding finds nothing
    assert lc.eviction_candidates("core", 1.0, 2.0, 100) == []


def test_eviction_page_finds_what_eviction_candidates_does_a_page_at_a_time(lc: StoreOfRecord) -> None:
    future = eviction_rows(lc)
    put(lc, k("none"), "h-n")
    other = SidecarEntry(k("old"), "v2", S.QUEUED, "h-old", updated_at=1.0)  # idle in another space too
    lc.put_docs([StoredDoc(k("old"), {"title": "old"}, [PUBLIC_PRINCIPAL], None, "h-old", 1.0)],
                [other])
    assert lc.commit_vectors([(other, [0.6, 0.8])], "m") == [k("old")]
    want = sorted((s.key, s.space) for space in ("core", "v2")
                  for s in lc.eviction_candidates(space, future - 100, future, 100))
    assert want == [(k("old"), "core"), (k("old"), "v2"), (k("o", tenant="u"), "core")]
    rows = 8  # sidecar rows of every space and status
    for limit in (1, 2, 3, 8, 100):
        found, cursors, after = [], [], None
        while True:
            page, after = lc.eviction_page(["core", "v2"], future - 100, future, after, limit)
            assert len(page) <= limit
            found += page
            cursors.append(after)
            if after is None:
                break
        assert sorted((s.key, s.space) for s in found) == want, limit
        assert all(s.status == S.READY for s in found)
        # one row more is read to know the end: a table that fits in a page is one page, every time
        assert len(cursors) == -(-rows // limit), limit
        assert cursors[:-1] == sorted(c for c in cursors[:-1] if c is not None)
    assert [(s.key, s.space) for s in lc.eviction_page(["v2"], future - 100, future, None, 100)[0]] == [
        (k("old"), "v2")]
    assert lc.eviction_page(["core"], 1.0, 2.0, None, 100) == ([], None)  # nothing idle before its embedding
    assert lc.eviction_page([], future - 100, future, None, 100) == ([], None)


def test_evict_moves_ready_rows_to_cold_and_keeps_shared_vectors(lc: StoreOfRecord) -> None:
    a, b, c = k("a"), k("b"), k("c")
    ready(lc, a, "h1")
    ready(lc, b, "h1")  # same content as a
    ready(lc, c, "h2")
    head = lc.change_log_head()
    sa, sc = status(lc, a), status(lc, c)
    assert lc.evict([(sa, "ref-1", 20), (sc, "ref-2", 20)], "float16", T0) == [a, c]
    ea, ec = status(lc, a), status(lc, c)
    assert (ea.status, ea.cold_ref, ea.reason) == (S.NONE, "ref-1", None)
    assert (ec.status, ec.cold_ref) == (S.NONE, "ref-2")
    assert lc.vector_for_hash("t", "h1", "core") is not None  # b is still ready with it
    assert lc.vector_for_hash("t", "h2", "core") is None
    assert lc.cold_entry("t", "h1", "core") == "ref-1" and lc.cold_entry("t", "h2", "core") == "ref-2"
    assert lc.cold_entry("u", "h1", "core") is None
    changes = lc.changes_since(head)
    assert sorted((ch.key, ch.op, ch.space) for ch in changes) == [(a, "unvector", "core"), (c, "unvector", "core")]
    cov = lc.coverage("t", None, "core")
    assert cov["states"]["cold"] == 2 and cov["states"]["ready"] == 1  # type: ignore[index]
    assert lc.coverage_all("core") == {"cold": 2, "ready": 1}
    sb = status(lc, b)
    assert lc.evict([(sb, "ref-1", 20)], "float16", T0) == [b]
    assert lc.vector_for_hash("t", "h1", "core") is None  # the last ready user went


def test_evict_is_a_compare_and_set(lc: StoreOfRecord) -> None:
    a, b, c = k("a"), k("b"), k("c")
    ready(lc, a, "h1")
    ready(lc, b, "h2")
    ready(lc, c, "h3")
    sa, sb, sc = status(lc, a), status(lc, b), status(lc, c)
    put(lc, a, "h1-new", S.QUEUED)  # rewritten since it was chosen
    lc.delete_doc(b)  # deleted since
    lc.set_status([c], "core", S.STALE)  # no longer ready
    head = lc.change_log_head()
    assert lc.evict([(sa, "r", 1), (sb, "r", 1), (sc, "r", 1)], "int8", T0) == []
    assert (status(lc, a).status, status(lc, a).cold_ref) == (S.QUEUED, None)
    assert lc.sidecar(b, "core") is None
    assert lc.changes_since(head) == []
    assert lc.cold_entry("t", "h1", "core") is None
    assert lc.vector_for_hash("t", "h3", "core") is not None
    assert lc.storage_report("t")["cold"] == 0


def test_storage_report_counts_vectors_and_cold_bytes(lc: StoreOfRecord) -> None:
    ready(lc, k("a"), "h1", [0.1, 0.2, 0.3])
    ready(lc, k("b"), "h2", [0.1, 0.2, 0.3])
    ready(lc, k("x", tenant="u"), "h1", [1.0, 0.0, 0.0])
    assert lc.storage_report("t") == {"vectors": 2, "vectorBytes": 24, "cold": 0, "coldBytes": 0}
    lc.evict([(status(lc, k("a")), "ref", 18)], "float16", T0)
    assert lc.storage_report("t") == {"vectors": 1, "vectorBytes": 12, "cold": 1, "coldBytes": 18}
    assert lc.storage_report() == {"vectors": 2, "vectorBytes": 24, "cold": 1, "coldBytes": 18}


def test_prune_orphans_drops_edited_away_content_only(lc: StoreOfRecord) -> None:
    a, b, c = k("a"), k("b"), k("c")
    ready(lc, a, "h1")
    ready(lc, b, "h2")
    ready(lc, c, "h2")  # shared content
    ready(lc, k("x", tenant="u"), "h1")  # another tenant's same content
    lc.evict([(status(lc, a), "ref-1", 10)], "float16", T0)
    lc.evict([(status(lc, b), "ref-2", 10)], "float16", T0)
    assert prune_orphans(lc) == (0, [])  # every content is still used
    put(lc, a, "h1-edited")  # h1 is gone from tenant t (vector already evicted, cold entry stays)
    put(lc, b, "h2-edited")  # h2 is still c's content
    ready(lc, k("d"), "h9")
    put(lc, k("d"), "h9-edited")  # an edited-away vector that was never evicted
    removed, gone = prune_orphans(lc)
    assert removed == 1 and gone == [("t", "h1", "core", "ref-1")]
    assert lc.vector_for_hash("t", "h9", "core") is None
    assert lc.cold_entry("t", "h1", "core") is None
    assert lc.cold_entry("t", "h2", "core") == "ref-2"
    assert lc.vector_for_hash("t", "h2", "core") is not None
    assert lc.vector_for_hash("u", "h1", "core") is not None
    assert prune_orphans(lc) == (0, [])


def test_prune_cold_copies_drops_only_entries_whose_vector_is_stored(lc: StoreOfRecord) -> None:
    a, b, c = k("a"), k("b"), k("c")
    ready(lc, a, "h1")
    ready(lc, b, "h2")
    ready(lc, c, "h2")  # shared content: b's eviction leaves the vector for c
    lc.evict([(status(lc, a), "ref-1", 10)], "float16", T0)
    lc.evict([(status(lc, b), "ref-2", 10)], "float16", T0)
    assert prune_cold_copies(lc) == [("t", "h2", "core", "ref-2")]
    assert lc.cold_entry("t", "h2", "core") is None and lc.cold_entry("t", "h1", "core") == "ref-1"
    assert lc.vector_for_hash("t", "h2", "core") is not None
    assert prune_cold_copies(lc) == []


def test_orphans_and_cold_copies_are_found_a_page_at_a_time(lc: StoreOfRecord) -> None:
    """Each call examines the next `limit` keys after the cursor and says where the next page
    starts: a query over the whole vectors and cold-entry tables, a document lookup per row,
    cost 1-2 s a tick at 1M vectors. A pass still finds every one, in pages of at most `limit`."""
    for i in range(5):
        ready(lc, k(f"v{i}"), f"hv{i}")
        put(lc, k(f"v{i}"), f"hv{i}-edited")  # its vector is an orphan
        ready(lc, k(f"c{i}"), f"hc{i}")
        lc.evict([(status(lc, k(f"c{i}")), f"ref-c{i}", 10)], "float16", T0)
        put(lc, k(f"c{i}"), f"hc{i}-edited")  # its cold entry is an orphan
        ready(lc, k(f"a{i}"), f"hs{i}")
        ready(lc, k(f"b{i}"), f"hs{i}")
        lc.evict([(status(lc, k(f"a{i}")), f"ref-s{i}", 10)], "float16", T0)  # b's vector stays: a cold copy
    ready(lc, k("live"), "h-live")
    pages: list[int] = []
    after: CodeCursor | None = None
    while True:  # 11 vectors (5 orphans, 5 shared, 1 live): pages of 2, 2, 2, 2, 2, 1
        n, after = lc.prune_orphan_vectors(after, 2)
        pages.append(n)
        if after is None:
            break
    assert len(pages) == 6 and sum(pages) == 5 and max(pages) <= 2
    cold: list[ColdRow] = []
    cold_pages = 0
    while True:  # 10 cold entries: 5 pages of 2, the last one ending the pass
        rows, after = lc.prune_orphan_cold(after, 2)
        assert len(rows) <= 2
        cold, cold_pages = cold + rows, cold_pages + 1
        if after is None:
            break
    assert cold_pages == 5 and sorted(cold) == [("t", f"hc{i}", "core", f"ref-c{i}") for i in range(5)]
    copies: list[ColdRow] = []
    while True:
        rows, after = lc.prune_cold_copies(after, 2)
        assert len(rows) <= 2
        copies += rows
        if after is None:
            break
    assert sorted(copies) == [("t", f"hs{i}", "core", f"ref-s{i}") for i in range(5)]
    assert all(lc.vector_for_hash("t", f"hv{i}", "core") is None and lc.cold_entry("t", f"hc{i}", "core") is None
               and lc.cold_entry("t", f"hs{i}", "core") is None and lc.vector_for_hash("t", f"hs{i}", "core")
               for i in range(5))
    assert lc.vector_for_hash("t", "h-live", "core") is not None
    assert prune_orphans(lc) == (0, []) and prune_cold_copies(lc) == []


def test_cold_referenced_and_known_spaces_are_what_the_orphan_sweep_reads(lc: StoreOfRecord) -> None:
    ready(lc, k("a"), "h1")
    ready(lc, k("b"), "h2")
    ready(lc, k("x", tenant="u"), "h1")
    lc.evict([(status(lc, k("a")), "ref-1", 10)], "float16", T0)
    assert lc.cold_referenced("t", "core", ["h1", "h2", "h3"]) == {"h1"}  # h2 is ready, not cold
    assert lc.cold_referenced("u", "core", ["h1"]) == set() and lc.cold_referenced("t", "v2", ["h1"]) == set()
    many = [f"h{i}" for i in range(1200)]  # more than one statement's chunk
    assert lc.cold_referenced("t", "core", many) == {"h1"}
    lc.put_tenant_space(SpaceInfo("w", "v2", "m", 2, "building", T0))  # a space record, no rows yet
    assert lc.known_spaces() == [("t", "core"), ("u", "core"), ("w", "v2")]


def test_known_spaces_are_every_pair_of_the_three_tables_found_by_index(lc: StoreOfRecord) -> None:
    """`known_spaces` skips through indexes from one (tenant, space) to the next; its answer is
    what the union of the three tables gives, a space with sidecar rows only included (the
    orphan sweep looks for codes of spaces a tenant no longer reads)."""
    for tenant, ids in (("t", "abc"), ("u", "ab"), ("v", "a")):
        for i in ids:
            ready(lc, k(i, tenant=tenant), f"h{tenant}{i}")
    lc.ensure_sidecars([SidecarEntry(k("b", tenant="t"), space, S.NONE, "htb", updated_at=1.0)
                        for space in ("a-first", "v2", "zz")])  # one document's rows, around `core`
    lc.ensure_sidecars([SidecarEntry(k("a", tenant="u"), "v3", S.STALE, "hua", updated_at=1.0)])
    lc.evict([(status(lc, k("a", tenant="v")), "ref-v", 10)], "float16", T0)
    assert lc.delete_doc(k("a", tenant="v"))  # its cold entry stays until the prune: no sidecar row
    lc.put_tenant_space(SpaceInfo("w", "v2", "m", 2, "building", T0))  # a space record, no rows yet
    expected = [("t", "a-first"), ("t", "core"), ("t", "v2"), ("t", "zz"), ("u", "core"), ("u", "v3"),
                ("v", "core"), ("w", "v2")]
    assert lc.known_spaces() == expected
    full = cast(Any, lc)._read("SELECT tenant, space FROM sidecar UNION SELECT tenant, space FROM cold_vectors "
                               "UNION SELECT tenant, space FROM tenant_spaces")
    assert sorted((r["tenant"], r["space"]) for r in full) == expected


def test_known_spaces_pages_find_exactly_what_the_whole_query_finds(lc: StoreOfRecord) -> None:
    """`known_spaces_page` (the orphan sweep's pages) from any start, of any size: the pairs of
    `known_spaces` from that start on, and a walk by pages finds them all, each once. The pairs
    come from each table alone and from several at once, around page edges: a tenant whose only
    space is in the cold entries or in tenant_spaces, one with spaces in every table, spaces that
    sort before and after `core`, and a tenant name that is a prefix of the next."""
    for tenant in ("a", "ab", "b", "c", "d"):
        ready(lc, k("x", tenant=tenant), f"h{tenant}")
    lc.ensure_sidecars([SidecarEntry(k("x", tenant="ab"), space, S.NONE, "hab", updated_at=1.0)
                        for space in ("0-first", "v2", "zz")])
    for tenant in ("c", "e"):  # e: a cold entry only (its document gone, the prune not yet run)
        if tenant == "e":
            ready(lc, k("x", tenant="e"), "he")
        lc.evict([(status(lc, k("x", tenant=tenant)), f"ref-{tenant}", 10)], "float16", T0)
    assert lc.delete_doc(k("x", tenant="e"))
    lc.put_tenant_space(SpaceInfo("b", "v3", "m", 2, "building", T0))  # beside b's sidecar space
    lc.put_tenant_space(SpaceInfo("f", "v2", "m", 2, "building", T0))  # a space record only
    whole = lc.known_spaces()
    assert whole == [("a", "core"), ("ab", "0-first"), ("ab", "core"), ("ab", "v2"), ("ab", "zz"), ("b", "core"),
                     ("b", "v3"), ("c", "core"), ("d", "core"), ("e", "core"), ("f", "v2")]
    starts = [None, *whole, ("", ""), ("a", "d"), ("aa", "core"), ("ab", "core@v2"), ("ab", "zzz"), ("b", ""),
              ("f", "v3"), ("g", "")]
    for size in (1, 2, 3, 5, len(whole) + 1):
        for start in starts:
            assert lc.known_spaces_page(start, size) == [p for p in whole if start is None or p >= start][:size], \
                (start, size)
        walked: list[tuple[str, str]] = []
        page = lc.known_spaces_page(None, size)
        while page:
            walked += page
            page = [p for p in lc.known_spaces_page(page[-1], size + 1) if p != page[-1]]
        assert walked == whole, size
    assert lc.known_spaces_page(None, 0) == []


def test_oldest_doc_at_is_the_tenants_oldest_document_as_it_stands(lc: StoreOfRecord) -> None:
    """Since when the configured space has served a tenant that never migrated (GET
    /semantic/spaces `createdAt`, `activatedAt`): its own documents only, as they stand now."""
    assert lc.oldest_doc_at("t") is None
    for doc_id, at, tenant in (("a", T0 + 5, "t"), ("b", T0 + 2, "t"), ("c", T0 + 9, "t"), ("x", T0, "u")):
        lc.put_docs([StoredDoc(k(doc_id, tenant=tenant), {"title": doc_id}, [PUBLIC_PRINCIPAL], None, "h", at)], [])
    assert (lc.oldest_doc_at("t"), lc.oldest_doc_at("u"), lc.oldest_doc_at("v")) == (T0 + 2, T0, None)
    lc.put_docs([StoredDoc(k("b"), {"title": "b2"}, [PUBLIC_PRINCIPAL], None, "h2", T0 + 20)], [])  # rewritten
    assert lc.oldest_doc_at("t") == T0 + 5


def test_known_spaces_reads_indexes_not_the_tables(tmp_path: Path) -> None:
    """A scan of the sidecar took 0.36 s a tick at 1M rows (SQLite), 0.82 s on PostgreSQL."""
    st = SqliteStore(tmp_path / "s.sqlite3")
    try:
        for table in ("sidecar", "cold_vectors"):
            plan = [str(r[3]) for r in st._conn().execute("EXPLAIN QUERY PLAN " + _PAIRS.format(t=table))]
            steps = [p for p in plan if p.split(" ")[1:2] in ([table], ["x"])]
            # a seek to the next space, not a walk over the tenant's rows (tenant=? alone)
            assert all(p.startswith("SEARCH") for p in steps), plan
            assert any(p.endswith("(tenant=? AND space>?)") for p in steps), plan
        # and a row's update by its key keeps the primary key (the index would "cover" it)
        plan = [str(r[3]) for r in st._conn().execute(
            "EXPLAIN QUERY PLAN UPDATE sidecar SET status='ready' WHERE tenant=? AND collection=? AND doc_id=? "
            "AND space=?", ("t", "c", "a", "core"))]
        assert plan == ["SEARCH sidecar USING PRIMARY KEY (tenant=? AND collection=? AND doc_id=? AND space=?)"], plan
    finally:
        st.close()


def test_a_cut_over_finds_the_documents_written_since_by_index(tmp_path: Path) -> None:
    """The cut-over's looks at documents written since the batches (a rollback's realignment, a
    forced activation's fill) run in its transaction, which holds the tenant's writes: a walk over
    the tenant's documents took 0.34 s of it at 1M documents (SQLite; 0.22-0.33 s PostgreSQL)."""
    st = SqliteStore(tmp_path / "s.sqlite3")
    try:
        lc = cast(StoreOfRecord, st)
        for i in range(3):
            put(lc, k(f"d{i}"), f"h{i}")
        lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 1))
        lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "active", T0 + 1, T0 + 1))
        lc.put_tenant_space(SpaceInfo("t", "v3", "m3", 3, "building", T0 + 2))
        statements: list[str] = []
        st._conn().set_trace_callback(statements.append)
        assert lc.switch_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0 + 6), "retired",
                               SpaceInfo("t", "v2", "m2", 3, "retired", T0 + 1, T0 + 1, retired_at=T0 + 6), T0 + 6,
                               realigned_since=T0 + 4) is not None
        assert lc.switch_space(SpaceInfo("t", "v3", "m3", 3, "active", T0 + 2, T0 + 7), "building",
                               SpaceInfo("t", "core", "m", 2, "retired", T0, T0 + 6, retired_at=T0 + 7), T0 + 7,
                               fill_rows=True, filled_since=T0 + 5) is not None
        st._conn().set_trace_callback(None)
        recent = [q for q in statements if "FROM docs" in q and "updated_at >=" in q]
        assert len(recent) == 2, statements
        for q in recent:
            plan = [str(r[3]) for r in st._conn().execute("EXPLAIN QUERY PLAN " + q)]
            assert any(p.startswith("SEARCH docs USING") and "docs_by_update (tenant=? AND updated_at>?)" in p
                       for p in plan), (q, plan)
    finally:
        st.close()


def test_a_sweep_cursor_is_kept_per_name_until_set_again(opener: Opener) -> None:  # noqa: F811 - the imported fixture
    lc = cast(StoreOfRecord, opener())
    assert lc.sweep_cursor("gone_rows") is None
    lc.set_sweep_cursor("gone_rows", ("t", "c", "a\x1fb", "core"))
    lc.set_sweep_cursor("cold_orphans", ("t", "core", "h1"))
    lc.set_sweep_cursor("cold_orphans", ("u", "v2", "h2"))
    lc.close()
    again = cast(StoreOfRecord, opener())  # another process over the same store
    try:
        assert again.sweep_cursor("gone_rows") == ("t", "c", "a\x1fb", "core")
        assert again.sweep_cursor("cold_orphans") == ("u", "v2", "h2")
        again.set_sweep_cursor("gone_rows", None)  # a pass that reached the end
        assert again.sweep_cursor("gone_rows") is None and again.sweep_cursor("cold_orphans") == ("u", "v2", "h2")
    finally:
        again.close()


# -- sidecars, budget refusals -------------------------------------------------------------------


def test_ensure_sidecars_inserts_only_missing_rows(lc: StoreOfRecord) -> None:
    a, b = k("a"), k("b")
    ready(lc, a, "h1")
    put(lc, b, "h2")
    rows = [SidecarEntry(a, "core", S.NONE, "h1", updated_at=T0), SidecarEntry(a, "v2", S.NONE, "h1", updated_at=T0),
            SidecarEntry(b, "v2", S.NONE, "h2", updated_at=T0)]
    assert lc.ensure_sidecars(rows) == 2
    assert status(lc, a).status == S.READY  # the existing row stayed
    assert {x: s.status for x, s in lc.sidecars([a, b], "v2").items()} == {a: S.NONE, b: S.NONE}
    assert lc.ensure_sidecars(rows) == 0


def test_requeue_budget_deferred_only_budget_rows_of_past_days(lc: StoreOfRecord) -> None:
    a, b, c = k("a"), k("b"), k("c")
    for x in (a, b, c):
        put(lc, x, f"h-{x.doc_id}")
    lc.set_status([a], "core", S.DEFERRED, "budget")
    lc.set_status([b], "core", S.DEFERRED, "policy:rule0")
    lc.set_status([c], "core", S.DENIED, "budget")
    when = status(lc, a).updated_at
    assert lc.requeue_budget_deferred(when) == 0  # refused today (not before the bound)
    assert lc.requeue_budget_deferred(when + 1) == 1
    assert (status(lc, a).status, status(lc, a).reason) == (S.NONE, None)
    assert status(lc, b).status == S.DEFERRED and status(lc, c).status == S.DENIED



def test_requeue_budget_deferred_in_every_space_of_every_tenant(lc: StoreOfRecord) -> None:
    """Asked space by space (an index instead of a scan of the table): none may be left out."""
    a, b, z = k("a"), k("b"), DocKey("u", "c", "z")
    for x in (a, b, z):
        put(lc, x, f"h-{x.doc_id}")
    lc.ensure_sidecars([SidecarEntry(b, "v2", S.NONE, "h-b", updated_at=T0)])
    lc.set_status([a, z], "core", S.DEFERRED, "budget")
    lc.set_status([b], "v2", S.DEFERRED, "budget")
    assert lc.requeue_budget_deferred(status(lc, a).updated_at + 1) == 3
    assert {lc.sidecar(x, sp).status for x, sp in ((a, "core"), (z, "core"), (b, "v2"))} == {S.NONE}

# -- provider usage and caps ----------------------------------------------------------------------


def test_charge_tokens_cap_is_all_or_nothing(lc: StoreOfRecord) -> None:
    day = "2026-01-02"
    assert lc.charge_tokens("t", day, {"c": (2, 60), "d": (1, 30)}, 1, 100) is True
    assert lc.tokens_used("t", day) == 90
    assert lc.charge_tokens("t", day, {"c": (1, 5), "d": (1, 6)}, 1, 100) is False  # 101 > 100: nothing
    assert lc.tokens_used("t", day) == 90
    assert lc.charge_tokens("t", day, {"c": (1, 10)}, 2, 100) is True  # exactly the cap
    assert lc.tokens_used("t", day) == 100
    assert lc.charge_tokens("t", day, {"c": (1, 1000)}, 1, 0) is True  # 0: no cap
    assert lc.tokens_used("t", day) == 1100
    assert lc.tokens_used("u", day) == 0 and lc.tokens_used("t", "2026-01-03") == 0
    assert lc.charge_tokens("u", day, {"c": (1, 50)}, 1, 100) is True  # caps are per tenant
    lc.charge_tokens("t", "2026-01-01", {"c": (4, 40)}, 1, 0)
    assert lc.usage_by_day("t", None, 10) == [
        {"day": day, "calls": 4, "documents": 5, "tokens": 1100},
        {"day": "2026-01-01", "calls": 1, "documents": 4, "tokens": 40}]
    assert lc.usage_by_day("t", "d", 10) == [{"day": day, "calls": 0, "documents": 1, "tokens": 30}]
    assert lc.usage_by_day("t", None, 1) == [{"day": day, "calls": 4, "documents": 5, "tokens": 1100}]


# -- backfill tasks ----------------------------------------------------------------------------------


def task(i: str, created: float, collection: str | None = "c", tenant: str = "t") -> BackfillTask:
    return BackfillTask(i, tenant, collection, "core", "promote", False, "", 0, 0, 5, "running", created, created)


def test_backfill_task_crud(lc: StoreOfRecord) -> None:
    lc.create_task(task("b", T0 + 1))
    lc.create_task(task("a", T0, collection=None))
    lc.create_task(task("x", T0, tenant="u"))
    assert [t.id for t in lc.tasks("t")] == ["a", "b"]
    assert lc.tasks("t")[0].collection is None and lc.tasks("t")[1] == task("b", T0 + 1)
    lc.update_task("b", f"c{SEP}d7", 7, 3, "done", T0 + 9)
    got = next(t for t in lc.tasks("t") if t.id == "b")
    assert (got.cursor, got.examined, got.queued, got.state, got.updated_at) == (f"c{SEP}d7", 7, 3, "done", T0 + 9)
    assert [t.id for t in lc.tasks("t", running_only=True)] == ["a"]
    assert sorted(t.id for t in lc.tasks(running_only=True)) == ["a", "x"]
    # only a running task moves: a step that read it before a cancel does not bring it back
    lc.update_task("x", "", 0, 0, "cancelled", T0 + 10)
    lc.update_task("x", f"c{SEP}d9", 9, 9, "running", T0 + 11)
    lc.update_task("b", f"c{SEP}d9", 9, 9, "running", T0 + 11)
    assert {t.id: (t.state, t.examined) for t in lc.tasks()} == {"a": ("running", 0), "b": ("done", 7),
                                                                 "x": ("cancelled", 0)}
    with pytest.raises(Exception):  # noqa: B017 - either driver's integrity error
        lc.create_task(task("a", T0))


def test_keys_after_walks_every_document_once_in_order(lc: StoreOfRecord) -> None:
    ids = ["b", "a-1", "a1", "A2", "a", "z", "a_b", "10", "9"]
    for c in ("c1", "c2"):
        for i in ids:
            put(lc, k(i, c=c), "h")
    put(lc, k("other", tenant="u"), "h")
    seen: list[DocKey] = []
    cursor = ""
    while page := lc.keys_after("t", None, cursor, 4):
        seen += page
        cursor = f"{page[-1].collection}{SEP}{page[-1].doc_id}"
    assert len(seen) == 18 and len(set(seen)) == 18 and all(x.tenant == "t" for x in seen)
    assert [x.collection for x in seen] == ["c1"] * 9 + ["c2"] * 9
    assert lc.keys_after("t", "c2", "", 100) == [x for x in seen if x.collection == "c2"]
    # a cursor is a position: it resumes after that document of that collection
    assert lc.keys_after("t", None, cursor, 4) == []
    assert lc.keys_after("t", None, f"c1{SEP}{seen[8].doc_id}", 1) == [seen[9]]
    assert lc.keys_after("t", "c1", f"c1{SEP}{seen[8].doc_id}", 5) == []
    assert lc.count_docs("t", None) == 18 and lc.count_docs("t", "c1") == 9 and lc.count_docs("u", "c1") == 0


# -- spaces per tenant ---------------------------------------------------------------------------------


def test_tenant_spaces_and_dropping_a_space(lc: StoreOfRecord) -> None:
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0))
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "building", T0 + 1))
    lc.put_tenant_space(SpaceInfo("u", "core", "m", 2, "active", T0))
    assert [s.space for s in lc.tenant_spaces("t")] == ["core", "v2"]
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0))
    assert lc.tenant_spaces("t")[0].state == "retired" and len(lc.tenant_spaces()) == 3
    a, b = k("a"), k("b")
    ready(lc, a, "h1")
    put(lc, b, "h2")
    lc.evict([(status(lc, a), "ref", 5)], "float16", T0)
    ready(lc, a, "h1")  # ready again after rehydration
    ready(lc, k("x", tenant="u"), "h1")
    head = lc.change_log_head()
    assert lc.drop_space_vectors("t", "core") == 2
    assert lc.sidecar(a, "core") is None and lc.sidecar(b, "core") is None
    assert lc.vector_for_hash("t", "h1", "core") is None and lc.cold_entry("t", "h1", "core") is None
    assert [(ch.key, ch.op) for ch in lc.changes_since(head)] == [(a, "unvector")]
    assert lc.vector_for_hash("u", "h1", "core") is not None  # another tenant's space stays


def test_a_retired_space_keeps_its_retirement_time_and_cold_entries_until_forgotten(lc: StoreOfRecord) -> None:
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 5))
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0))  # no time: the recorded one stays
    assert lc.tenant_spaces("t")[0].retired_at == T0 + 5
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 9))
    assert lc.tenant_spaces()[0].retired_at == T0 + 9
    a, b, c = k("a"), k("b"), k("c")
    for key, h in ((a, "h1"), (b, "h2")):
        ready(lc, key, h)
        lc.evict([(status(lc, key), f"ref-{h}", 7)], "float16", T0)
    ready(lc, c, "h3")  # still ready (a late job)
    assert lc.cold_by_space("t") == {"core": (2, 14)} and lc.cold_hashes("t", "core", 1) == ["h1"]
    # an edit and a new document meanwhile, planned for no sidecar of the retired space: the
    # edited row takes the new hash at the write (no cold reference of the old content)
    lc.put_docs([StoredDoc(b, {"title": "b2"}, [PUBLIC_PRINCIPAL], None, "h2b", 2.0),
                 StoredDoc(k("d"), {"title": "d"}, [PUBLIC_PRINCIPAL], None, "h4", 2.0)], [])
    assert (status(lc, b).status, status(lc, b).content_hash, status(lc, b).cold_ref) == (S.STALE, "h2b", None)
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0 + 10))
    assert lc.tenant_spaces("t")[0].retired_at is None
    head = lc.change_log_head()
    assert lc.realign_space("t", "core", T0 + 10) == 1  # the new document's row
    assert (status(lc, a).status, status(lc, a).cold_ref) == (S.NONE, "ref-h1")  # unchanged: stays cold
    assert (status(lc, b).status, status(lc, b).content_hash, status(lc, b).cold_ref) == (S.STALE, "h2b", None)
    assert status(lc, k("d")).status == S.NONE and status(lc, c).status == S.READY
    assert [(ch.key, ch.op) for ch in lc.changes_since(head)] == [(c, "vector")]  # re-read with today's ACL
    assert lc.realign_space("t", "core", T0 + 11) == 0
    assert lc.forget_cold("t", "core", ["h1", "h2"]) == 2
    assert lc.cold_by_space("t") == {} and status(lc, a).cold_ref is None
    lc.forget_tenant_space("t", "core")
    assert lc.tenant_spaces("t") == []


def test_a_migration_scope_is_kept_while_building_and_forgotten_after(lc: StoreOfRecord) -> None:
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0))
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "building", T0 + 1, scope="ready"))
    lc.put_tenant_space(SpaceInfo("u", "v2", "m2", 3, "building", T0 + 1))
    assert {(s.tenant, s.space): s.scope for s in lc.tenant_spaces()} == {
        ("t", "core"): "all", ("t", "v2"): "ready", ("u", "v2"): "all"}
    assert lc.switch_space(SpaceInfo("t", "v2", "m2", 3, "active", T0 + 1, T0 + 2), "building",
                           SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 2), T0 + 2) == 0
    assert {s.space: s.scope for s in lc.tenant_spaces("t")} == {"core": "all", "v2": "all"}


def test_migration_backlog_counts_what_the_scope_takes(lc: StoreOfRecord) -> None:
    """Scope `all`: every document of the tenant not ready in the new space (no row counts as
    none); `ready`: only those ready or queued in the source space, or in an eager collection."""
    hot, queued, lazy, cold, eager_doc = k("hot"), k("q"), k("lazy"), k("cold"), k("e", "eager")
    ready(lc, hot, "h1")
    put(lc, queued, "h2", S.QUEUED)
    put(lc, lazy, "h3")
    ready(lc, cold, "h4")
    lc.evict([(status(lc, cold), "ref", 5)], "float16", T0)
    put(lc, eager_doc, "h5")
    ready(lc, k("other", tenant="u"), "h6")
    # the new space: `hot` embedded there already, `lazy` has a row, the rest none yet
    lc.ensure_sidecars([SidecarEntry(lazy, "v2", S.NONE, "h3", updated_at=T0),
                        SidecarEntry(hot, "v2", S.QUEUED, "h1", updated_at=T0)])
    assert lc.migration_backlog("t", "v2", "core", "all") == {"none": 4, "queued": 1, "stale": 0}
    # eager collections change nothing for `all` (the tick passes them whatever the scope)
    assert lc.migration_backlog("t", "v2", "core", "all", ["eager"]) == {"none": 4, "queued": 1, "stale": 0}
    assert lc.migration_backlog("t", "v2", "core", "ready") == {"none": 1, "queued": 1, "stale": 0}
    assert lc.migration_backlog("t", "v2", "core", "ready", ["eager"]) == {"none": 2, "queued": 1, "stale": 0}
    v2 = lc.sidecar(hot, "v2")
    assert v2 is not None and lc.commit_vectors([(v2, [0.6, 0.8])], "m2") == [hot]
    assert lc.migration_backlog("t", "v2", "core", "ready") == {"none": 1, "queued": 0, "stale": 0}
    assert lc.migration_backlog("u", "v2", "core", "all") == {"none": 1, "queued": 0, "stale": 0}
    # an evicted vector of the new space is embedded there: not waiting
    v2 = lc.sidecar(hot, "v2")
    assert v2 is not None and lc.evict([(v2, "ref-v2", 5)], "float16", T0) == [hot]
    assert lc.migration_backlog("t", "v2", "core", "all") == {"none": 4, "queued": 0, "stale": 0}
    assert lc.migration_backlog("t", "v2", "core", "ready") == {"none": 1, "queued": 0, "stale": 0}


def test_a_space_made_active_gets_a_row_for_every_document(lc: StoreOfRecord) -> None:
    """A forced cut-over leaves documents the migration never reached without a row in the new
    space; a touch spends only on documents with a row, so they were never embedded."""
    a, b = k("a"), k("b")
    ready(lc, a, "h1")
    put(lc, b, "h2")
    put(lc, k("x", tenant="u"), "h3")
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0))
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "building", T0 + 1))  # written before: no rows there
    assert lc.sidecar(b, "v2") is None
    lc.ensure_sidecars([SidecarEntry(a, "v2", S.QUEUED, "h1", updated_at=T0)])
    assert lc.switch_space(SpaceInfo("t", "v2", "m2", 3, "active", T0 + 1, T0 + 2), "building",
                           SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 2), T0 + 2,
                           fill_rows=True) == 1
    side_a, side_b = lc.sidecar(a, "v2"), lc.sidecar(b, "v2")
    assert side_a is not None and side_a.status == S.QUEUED  # a row it had stays as it was
    assert side_b is not None and (side_b.status, side_b.content_hash) == (S.NONE, "h2")
    assert lc.sidecar(k("x", tenant="u"), "v2") is None  # another tenant's documents are not its


def test_space_rows_are_filled_in_batches_before_a_cut_over_that_then_looks_only_at_recent_writes(
        lc: StoreOfRecord) -> None:
    """A forced cut-over's pass over every document held the tenant's writes for 19 s at 1M
    documents: `fill_space_rows` does it before, a short transaction per batch, in key order, and
    the cut-over's own pass (`filled_since`) looks only at documents written since."""
    keys = [k("a"), k("b"), k("c"), k("a", c="d"), k("b", c="d")]
    for i, key in enumerate(keys):
        put(lc, key, f"h{i}")
    put(lc, k("x", tenant="u"), "hx")
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0))
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "building", T0 + 1))
    lc.ensure_sidecars([SidecarEntry(keys[1], "v2", S.QUEUED, "h1", updated_at=T0)])
    written, batches = every_batch(lc.fill_space_rows, "t", "v2", 2, T0 + 2)
    assert (written, batches) == (4, 3)  # 2 + 2 + 1 documents; the one with a row keeps it
    sides = lc.sidecars(keys, "v2")
    assert [sides[key].status for key in keys] == [S.NONE, S.QUEUED, S.NONE, S.NONE, S.NONE]
    assert lc.sidecar(k("x", tenant="u"), "v2") is None  # another tenant's documents are not its
    # the cut-over's own pass then fills only documents written since `filled_since` (the
    # batches saw the others, or their write gave them a row): tenant w's, written before it had
    # a building space, so without rows there
    old, recent = k("old", tenant="w"), k("new", tenant="w")
    lc.put_docs([StoredDoc(old, {"title": "old"}, [PUBLIC_PRINCIPAL], None, "ho", 1.0),
                 StoredDoc(recent, {"title": "new"}, [PUBLIC_PRINCIPAL], None, "hn", T0 + 3)], [])
    lc.put_tenant_space(SpaceInfo("w", "core", "m", 2, "active", T0, T0))
    lc.put_tenant_space(SpaceInfo("w", "v2", "m2", 3, "building", T0 + 1))
    assert lc.switch_space(SpaceInfo("w", "v2", "m2", 3, "active", T0 + 1, T0 + 4), "building",
                           SpaceInfo("w", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 4), T0 + 4,
                           fill_rows=True, filled_since=T0 + 2) == 1
    side = lc.sidecar(recent, "v2")
    assert side is not None and side.status == S.NONE
    assert lc.sidecar(old, "v2") is None


def test_a_retired_space_is_realigned_in_batches_before_a_rollback_that_then_looks_only_at_recent_writes(
        lc: StoreOfRecord) -> None:
    """Re-activating a retired space realigned it inside the cut-over's transaction: 3.5 s of
    held writes at 200k documents. `realign_space_rows` does it before, a short transaction per
    batch in key order, and the cut-over (`realigned_since`) looks only at documents written
    since: rows for new documents, and their ready vectors logged again (an ACL change)."""
    a, b, c, d, e = k("a"), k("b"), k("c"), k("d"), k("a", c="d")
    ready(lc, a, "h1")
    put(lc, b, "h2", S.QUEUED)  # its job is gone
    lc.put_docs([StoredDoc(c, {"title": "c"}, [PUBLIC_PRINCIPAL], None, "h3", 1.0)],
                [SidecarEntry(c, "core", S.READY, "old", updated_at=1.0)])  # content it no longer has
    lc.put_docs([StoredDoc(key, {"title": key.doc_id}, [PUBLIC_PRINCIPAL], None, f"h-{key.collection}{key.doc_id}",
                           1.0) for key in (d, e)], [])  # written while retired: no row there
    lc.put_tenant_space(SpaceInfo("t", "core", "m", 2, "retired", T0, T0, retired_at=T0 + 1))
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "active", T0 + 1, T0 + 1))
    head = lc.change_log_head()
    changed, batches = every_batch(lc.realign_space_rows, "t", "core", 2, T0 + 2)
    assert batches == 3 and changed == 4  # b back to none, c to its content, rows for d and e
    # the ready rows as they were, for the vector index to read again (c's point then leaves)
    assert [(ch.key, ch.op, ch.space) for ch in lc.changes_since(head)] == [(a, "vector", "core"),
                                                                            (c, "vector", "core")]
    assert status(lc, a).status == S.READY and status(lc, b).status == S.NONE
    assert (status(lc, c).status, status(lc, c).content_hash) == (S.STALE, "h3")
    assert (status(lc, d).status, status(lc, e).status) == (S.NONE, S.NONE)
    assert lc.sidecar(e, "v2") is None  # only the space asked for
    # after the batches: an ACL change of `a` and a new document, neither of which gives the
    # retired space anything, and an old document without a row the cut-over must not look at
    head = lc.change_log_head()
    late, old = k("late"), k("old", tenant="t")
    lc.put_docs([StoredDoc(a, {"title": "a"}, ["group:x"], None, "h1", T0 + 5),
                 StoredDoc(late, {"title": "late"}, [PUBLIC_PRINCIPAL], None, "h5", T0 + 5)], [])
    with lc._lc_tx() as conn:  # type: ignore[attr-defined]  # a row the batches would have written
        lc._x(conn, "DELETE FROM sidecar WHERE tenant=? AND collection=? AND doc_id=? AND space=?",  # type: ignore[attr-defined]
              (*d, "core"))
    assert lc.sidecar(late, "core") is None
    assert lc.switch_space(SpaceInfo("t", "core", "m", 2, "active", T0, T0 + 6), "retired",
                           SpaceInfo("t", "v2", "m2", 3, "retired", T0 + 1, T0 + 1, retired_at=T0 + 6), T0 + 6,
                           realigned_since=T0 + 4) == 1
    late_row = lc.sidecar(late, "core")
    assert late_row is not None and late_row.status == S.NONE
    assert lc.sidecar(d, "core") is None  # written before `since`: left to the batches
    assert (a, "vector", "core") in [(ch.key, ch.op, ch.space) for ch in lc.changes_since(head)]
    assert lc.sidecar(old, "core") is None


def test_no_row_is_written_for_a_document_that_is_gone(lc: StoreOfRecord) -> None:
    """A backfill reads documents, then gives those without a row in its space one: a document
    deleted in between got a row that nothing ever removed."""
    gone, kept = k("gone"), k("kept")
    put(lc, gone, "h1")
    put(lc, kept, "h2")
    assert lc.delete_doc(gone)
    assert lc.ensure_sidecars([SidecarEntry(gone, "v2", S.NONE, "h1", updated_at=T0),
                               SidecarEntry(kept, "v2", S.NONE, "h2", updated_at=T0)]) == 1
    assert lc.sidecar(gone, "v2") is None


@pytest.mark.parametrize("fill", ["batches", "ensure"])
def test_a_delete_committing_during_a_fill_leaves_no_row(lc: StoreOfRecord, fill: str) -> None:
    """PostgreSQL, READ COMMITTED: the fill's insert saw a document whose delete had already
    removed the rows it could see and then committed, so the new row stayed (a helper's walk-
    through: 546 rows in five rounds). The fill reads the documents under a share lock, so it
    waits for the delete and then skips the document. (SQLite writers are serial.)"""
    from shared.adapters.postgres_store import PostgresStore

    if not isinstance(lc, PostgresStore):
        pytest.skip("a race of two PostgreSQL transactions")
    import threading

    victim, other = k("victim"), k("other")
    put(lc, victim, "h1")
    put(lc, other, "h2")
    lc.put_tenant_space(SpaceInfo("t", "v2", "m2", 3, "building", T0))

    def run() -> None:
        if fill == "batches":
            lc.fill_space_rows("t", "v2", None, 100, T0)
        else:
            lc.ensure_sidecars([SidecarEntry(victim, "v2", S.NONE, "h1", updated_at=T0)])

    with lc._tx() as conn:  # the delete, as delete_doc runs it, not committed yet
        conn.execute("DELETE FROM docs WHERE tenant=%s AND collection=%s AND doc_id=%s", victim)
        conn.execute("DELETE FROM sidecar WHERE tenant=%s AND collection=%s AND doc_id=%s", victim)
        t = threading.Thread(target=run)
        t.start()
        t.join(0.5)  # without the lock it has written its row by now
    t.join(30)
    assert not t.is_alive()
    assert lc.sidecar(victim, "v2") is None
    if fill == "batches":
        assert lc.sidecar(other, "v2") is not None


# -- leases --------------------------------------------------------------------------------------------


def test_pending_changes_are_counted_per_tenant(lc: StoreOfRecord) -> None:
    put(lc, k("a"), "h1")
    head = lc.change_log_head()
    put(lc, k("b"), "h2")
    put(lc, k("x", tenant="other"), "h3")
    assert lc.changes_pending(head, "t") == 1 and lc.changes_pending(head, "other") == 1
    assert lc.changes_pending(0, "t") == 2 and lc.changes_pending(lc.change_log_head(), "t") == 0


def test_a_lease_has_one_holder(opener: Opener) -> None:  # noqa: F811 - the imported fixture
    one, two = cast(StoreOfRecord, opener()), cast(StoreOfRecord, opener())
    try:
        with one.lease("scheduler") as first:
            with two.lease("scheduler") as second:
                assert first is True and second is False
            with two.lease("other") as third:
                assert third is True
            with one.follower_lease("scheduler") as follower:  # leases do not collide with followers
                assert follower is True
        with two.lease("scheduler") as again:
            assert again is True
    finally:
        one.close()
        two.close()


def test_an_operator_decision_committed_during_an_automatic_one_stands(request: pytest.FixtureRequest) -> None:
    """PostgreSQL, READ COMMITTED: the scheduler reads "no manual decision", an operator's
    manual decision commits, then the scheduler's upsert lands on it. It must not replace it."""
    import threading

    import psycopg

    from shared.adapters.postgres_store import PostgresStore

    url = request.getfixturevalue("postgres_url")
    st = PostgresStore(url, pool_size=4)
    try:
        with psycopg.connect(url) as operator, psycopg.connect(url, autocommit=True) as probe:
            operator.execute("INSERT INTO collection_modes VALUES ('t','c','lazy',1,'manual',1,'{}')")
            result: list[bool] = []
            worker = threading.Thread(target=lambda: result.append(
                st.set_collection_mode(mode("c", "eager"), only_if_not_manual=True)))
            worker.start()
            for _ in range(500):  # until the scheduler's upsert waits on the operator's row
                row = probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type='Lock' "
                                    "AND query LIKE 'INSERT INTO collection_modes%%'").fetchone()
                if row and row[0]:
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the scheduler's upsert never waited on the operator's row")
            operator.commit()
            worker.join(10)
        assert result == [False]
        (m,) = st.collection_modes("t")
        assert (m.mode, m.manual) == ("lazy", True)
    finally:
        st.close()
