"""The change log's compaction (Lifecycle.compact_change_log, stage `change_log`; store
`compact_changes`). Before, the log only grew: every edit, embedding, eviction and rehydration
added an entry for good, and an index rebuild replayed all of them. An entry goes once a later
entry of the same key, op and space exists, because a follower applies a key's current state.
Over the real wiring, SQLite and PostgreSQL: exactly the superseded entries go, a page at a time;
a follower that stopped in the middle of the log, and one rebuilt from nothing, end with the same
indexes as the process's own follower, which applied every entry as it came."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.core.lifecycle import sweeps
from services.core.lifecycle.sweeps import CHANGES_CURSOR
from services.wiring import Container
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower, StorePosition
from shared.model import DocKey
from shared.ports import SearchFilter
from tests.unit.test_cold_orphans import SPACE, USER, put_docs
from tests.unit.test_gone_rows import layout, service  # noqa: F401 - the fixture
from tests.unit.test_scheduler_switch import embed_now

BOB = ("user:bob",)


def compacted() -> float:
    return REGISTRY.get_sample_value("vibe_change_log_compacted_total") or 0.0


def log_rows(c: Container, *rows: tuple[DocKey, str, str | None]) -> None:
    """Entries as the store's own writers append them."""
    with c.store._lc_tx() as conn:  # type: ignore[attr-defined]
        c.store._lc_log(conn, list(rows))  # type: ignore[attr-defined]


def entries(c: Container) -> list[tuple[int, DocKey, str, str | None]]:
    return [(x.seq, x.key, x.op, x.space) for x in c.store.changes_since(0, 10_000)]


def test_only_superseded_entries_go_a_page_at_a_time(tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout) as c:
        a, b, z = DocKey("t", "c", "a"), DocKey("t", "c", "b"), DocKey("u", "c", "z")
        log_rows(c, (a, "doc", None), (a, "vector", SPACE), (b, "doc", None), (a, "doc", None),
                 (a, "vector", "v2"), (z, "doc", None), (a, "vector", SPACE), (b, "delete", None),
                 (a, "unvector", SPACE), (z, "doc", None), (a, "doc", None))
        before = entries(c)
        head = c.store.change_log_head()
        first = before[0][0] - 1
        latest = {(k, op, sp): seq for seq, k, op, sp in before}  # the last one of each wins
        kept = sorted(latest.values())

        removed, stop = c.store.compact_changes(first, 4)  # entries 1-4: a's first two docs and its first vector
        assert removed == {"t": 3} and stop == before[3][0]
        assert [e[0] for e in entries(c)] == [before[i][0] for i in (2, *range(4, 11))]  # later pages untouched
        removed, stop = c.store.compact_changes(stop, 4)  # 5-8: z's first doc (tenant u)
        assert removed == {"u": 1} and stop == before[7][0]
        removed, stop = c.store.compact_changes(stop, 4)  # 9-11, the end: the latest of each
        assert removed == {} and stop is None
        assert [e[0] for e in entries(c)] == kept
        assert c.store.compact_changes(None, 4) == ({}, kept[3])  # the next pass: nothing more
        assert c.store.change_log_head() == head  # the newest entry is never superseded


def test_followers_anywhere_in_the_log_end_as_if_it_were_whole(tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    def follower(home: Path) -> IndexFollower:
        return IndexFollower(c.store, TantivyLexicalIndex(home / "lexical", languages=c.settings.language_map()),
                             EdgeVectorIndex(home / "vectors"), FilePosition(home / "index.seq"), SPACE)

    def edit(doc_id: str, body: str, acl: tuple[str, ...] = ("user:u",)) -> None:
        c.docs.put([c.docs.parse(USER, "c", doc_id, {"title": doc_id, "body": body, "_acl": list(acl)})])

    def seen(f: IndexFollower, acl: tuple[str, ...]) -> dict[str, object]:
        assert f.lexical is not None and f.vectors is not None
        flt = SearchFilter("t", None, tuple(acl))
        return {
            **{q: sorted(h.key.doc_id for h in f.lexical.search(flt, q, 10))
               for q in ("wing flutter margins", "rotor gearbox", "laminar boundary", "delta")},
            "vectors": sorted(h.key.doc_id for h in f.vectors.search(SPACE, flt, c.embedder.embed_query("wing"), 10)),
        }

    with service(tmp_path, layout) as c:
        a, b, d, e, g = put_docs(c, "a", "b", "d", "e", "g")
        embed_now(c, SPACE, a, b, e)
        late = follower(tmp_path / "late")
        late.sync()  # stops here; the rest of the log is compacted before it reads on
        edit("a", "rotor gearbox")
        edit("a", "laminar boundary delta")  # two doc entries: the first goes
        embed_now(c, SPACE, a)
        edit("b", "wing flutter margins, case b", acl=BOB)  # revoked from user:u: must leave both indexes
        embed_now(c, SPACE, b)
        assert c.store.delete_doc(d)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 3  # unvector a, b, e
        embed_now(c, SPACE, e)  # rehydrated: vector after unvector after vector
        edit("g", "rotor gearbox")
        edit("g", "rotor gearbox again")
        c.follower.sync()
        before = len(entries(c))
        while (n := c.lifecycle.compact_change_log()) or c.store.sweep_cursor(CHANGES_CURSOR) is not None:
            assert n >= 0
        left = entries(c)
        assert len(left) < before - 4  # a's and g's first edits, a's, b's and e's older vectors at least
        assert len({(k, op, sp) for _, k, op, sp in left}) == len(left)

        late.sync()
        fresh = follower(tmp_path / "fresh")
        fresh.sync()  # the whole (compacted) log, from nothing
        for acl in (("user:u",), BOB, ("*", "user:u", "user:bob")):
            whole = seen(c.follower.of_lexical(), acl)
            assert seen(late, acl) == whole and seen(fresh, acl) == whole, acl
        assert seen(late, ("user:u",))["delta"] == ["a"]
        assert "b" not in seen(late, ("user:u",))["vectors"] and "d" not in seen(late, ("user:u",))["vectors"]


def test_a_tick_compacts_pages_and_a_restart_goes_on(tmp_path: Path, layout: dict[str, Any],  # noqa: F811
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeps, "CHANGE_PAGES", 1)
    with service(tmp_path, layout, evict_batch=2) as c:
        keys = put_docs(c, "a", "b", "c")
        put_docs(c, "a", "b", "c")  # unchanged: not written, nothing logged
        for body in ("one", "two"):
            c.docs.put([c.docs.parse(USER, "c", k.doc_id, {"title": k.doc_id, "body": body}) for k in keys])
        assert len(entries(c)) == 9
    counted, ticks = compacted(), []
    for _ in range(6):
        with service(tmp_path, layout, evict_batch=2) as c:
            r = c.lifecycle.tick()
            ticks.append((r.compacted_changes, c.store.sweep_cursor(CHANGES_CURSOR)))
            assert r.failed == []
    assert all(n <= 2 for n, _ in ticks), ticks  # a page of 2 entries a tick
    assert sum(n for n, _ in ticks) == 6 and compacted() - counted == 6, ticks
    assert ticks[4][1] is None and None not in [s for _, s in ticks[:4]]  # 9 entries: the 5th tick reaches the end
    with service(tmp_path, layout, evict_batch=2) as c:
        assert [(k.doc_id, op) for _, k, op, _ in entries(c)] == [("a", "doc"), ("b", "doc"), ("c", "doc")]
        assert c.store.last_ticks("t")[1] is None  # housekeeping, not a change the tenant's view shows


def test_compaction_racing_writers_and_a_shared_follower_leaves_no_stale_acl(
        tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    """Writers edit a few documents over and over (switching their ACL and text) and delete some,
    while compaction pages through the log and a follower positioned in the store applies it in
    small batches, all at once. At the end the follower's index holds exactly what the store does:
    compaction removed no entry a follower still needed, whatever the interleaving."""
    import random
    import threading

    keys = [f"k{i}" for i in range(12)]
    readers = ("user:a", "user:b")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for n in range(80):
                doc_id = rng.choice(keys)
                if rng.random() < 0.15:
                    c.docs.delete(DocKey("t", "c", doc_id))
                else:
                    acl = [rng.choice(readers)]
                    c.docs.put([c.docs.parse(USER, "c", doc_id, {"title": doc_id, "_acl": acl,
                                                                  "body": f"gearbox v{seed}x{n} {doc_id}"})])
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    def loop(step: Any) -> None:
        try:
            while not stop.is_set():
                step()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    with service(tmp_path, layout) as c:
        shared = IndexFollower(c.store, TantivyLexicalIndex(tmp_path / "shared", languages=c.settings.language_map()),
                               None, StorePosition(c.store, "lexical:race"), SPACE)
        cursor: list[int | None] = [None]

        def compact() -> None:
            cursor[0] = c.store.compact_changes(cursor[0], 7)[1]

        workers = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
        side = [threading.Thread(target=loop, args=(step,)) for step in (compact, lambda: shared.sync(3))]
        for t in [*side, *workers]:
            t.start()
        for t in workers:
            t.join(120)
        stop.set()
        for t in side:
            t.join(60)
        assert errors == []
        shared.sync()
        assert shared.lexical is not None
        for doc_id in keys:
            doc = c.store.get_doc(DocKey("t", "c", doc_id))
            for reader in readers:
                got = {h.key.doc_id for h in shared.lexical.search(SearchFilter("t", None, (reader,)), doc_id, 10)}
                want = doc is not None and reader in doc.acl
                assert (doc_id in got) == want, (doc_id, reader, doc.acl if doc else None)
                if want:
                    assert doc is not None
                    version = str(doc.fields["body"]).split()[1]
                    assert {h.key.doc_id for h in shared.lexical.search(
                        SearchFilter("t", None, (reader,)), version, 10)} == {doc_id}, (doc_id, version)
