"""The prune stages' pages (Lifecycle.prune, `prune`; Lifecycle.drop_cold_copies, `cold_copies`):
vectors and cold entries of content no document has, `evict_batch` of each examined per tick from
cursors in the store. Before, every tick read both tables whole, with a document lookup per row
(1-2 s at 1M vectors, finding nothing). Over the real wiring, SQLite and PostgreSQL, a new
process at every tick: the pass still finds everything, going on where the last tick stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.core.lifecycle.sweeps import COPIES_CURSOR
from services.wiring import Container
from shared.model import DocKey
from tests.unit.test_cold_orphans import SPACE, USER, content, put_docs
from tests.unit.test_gone_rows import layout, service  # noqa: F401 - the fixture
from tests.unit.test_scheduler_switch import embed_now


def edit(c: Container, *keys: DocKey) -> None:
    c.docs.put([c.docs.parse(USER, k.collection, k.doc_id, {"title": k.doc_id, "body": "edited away"})
                for k in keys])


def test_orphans_go_a_batch_a_tick_and_a_restart_goes_on(tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout, evict_batch=2) as c:
        cold = put_docs(c, "a", "b")
        embed_now(c, SPACE, *cold)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 2
        hot = put_docs(c, "c", "d", "e", "f")
        embed_now(c, SPACE, *hot)
        old = {k: content(c, k) for k in [*cold, *hot]}
        edit(c, *cold, *hot[:3])  # a, b: orphan cold entries; c, d, e: orphan vectors; f stays
    ticks = []
    for _ in range(3):  # 4 vectors in 2 pages of 2 (the pass ends), again; 2 cold entries, a page each tick
        with service(tmp_path, layout, evict_batch=2) as c:
            r = c.lifecycle.tick()
            ticks.append((r.pruned_vectors, r.pruned_cold))
    assert all(v <= 2 and n <= 2 for v, n in ticks), ticks  # the whole tables at the first tick before
    assert sum(v for v, _ in ticks) == 3 and sum(n for _, n in ticks) == 2, ticks
    with service(tmp_path, layout, evict_batch=2) as c:
        assert all(c.store.vector_for_hash("t", old[k], SPACE) is None for k in hot[:3])
        assert c.store.vector_for_hash("t", old[hot[3]], SPACE) is not None
        assert all(c.store.cold_entry("t", old[k], SPACE) is None for k in cold)
        assert c.lifecycle.cold.hashes("t", SPACE, "", 10) == []  # their files went with them


def test_cold_copies_go_a_batch_a_tick_and_a_restart_goes_on(tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout, evict_batch=2) as c:
        keys = put_docs(c, "a", "b", "c", "d", "e")
        embed_now(c, SPACE, *keys)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 5
        embed_now(c, SPACE, *keys)  # back in the store: the five cold entries are copies
        assert all(c.store.cold_entry("t", content(c, k), SPACE) for k in keys)
        codes = sorted(("t", content(c, k), SPACE) for k in keys)
    dropped, stops = [], []
    for _ in range(3):
        with service(tmp_path, layout, evict_batch=2) as c:
            dropped.append(c.lifecycle.tick().dropped_cold_copies)
            stops.append(c.store.sweep_cursor(COPIES_CURSOR))
    # two entries examined a tick, the next tick (another process) going on after the last of
    # them; before, each tick read the whole table (and deleted up to the batch of what it found)
    assert dropped == [2, 2, 1] and stops == [codes[1], codes[3], None]
    with service(tmp_path, layout, evict_batch=2) as c:
        assert all(c.store.cold_entry("t", content(c, k), SPACE) is None for k in keys)
        assert all(c.store.vector_for_hash("t", content(c, k), SPACE) is not None for k in keys)
        assert c.lifecycle.cold.hashes("t", SPACE, "", 10) == []
