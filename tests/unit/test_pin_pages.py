"""The scheduler's document pins by pages (Lifecycle._pin, stage `pin`, store `hot_docs_page`):
`EVICT_PAGE_BATCHES` x `evict_batch` usage rows examined per tick from a cursor in the store
(`pins`). Before, every tick computed the decayed touches of every usage row (0.58 s on SQLite,
0.1 s on PostgreSQL at 1M rows). Over the real wiring, SQLite and PostgreSQL, a new process at
every tick: a pass still pins every hot document, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.core.lifecycle.eviction import EVICT_PAGE_BATCHES
from services.core.lifecycle.pins import PINS_CURSOR
from shared.model import DocKey, UsageBatch
from tests.unit.test_gone_rows import layout, service  # noqa: F401 - the fixture

DAY = 86400.0


def test_a_tick_pins_the_hot_documents_of_its_page_and_the_next_goes_on(
        tmp_path: Path, layout: dict[str, Any]) -> None:  # noqa: F811
    hot = [DocKey("t", "c", f"d{i}") for i in range(2 * EVICT_PAGE_BATCHES + 1)]
    lukewarm = DocKey("t", "c", "x")  # touched once: below the bar (3 touches)
    with service(tmp_path, layout, evict_batch=1) as c:
        c.store.record_usage(UsageBatch(touches={k: 5 for k in hot} | {lukewarm: 1}), c.lifecycle.clock(),
                             3600.0, 7 * DAY)
    pinned, stops = [], []
    for _ in range(4):
        with service(tmp_path, layout, evict_batch=1) as c:
            report = c.lifecycle.tick()
            assert report.failed == []
            pinned.append(report.pinned)
            stops.append(c.store.sweep_cursor(PINS_CURSOR))
    # 10 usage rows, pages of 4: the first pass ends at the third tick; the next finds them pinned
    assert pinned == [EVICT_PAGE_BATCHES, EVICT_PAGE_BATCHES, 1, 0], pinned
    assert stops[0] == tuple(hot[EVICT_PAGE_BATCHES - 1]) and stops[2] is None, stops
    with service(tmp_path, layout, evict_batch=1) as c:
        assert all((c.store.doc_usage(k) or {}).get("pinned_until") for k in hot)
        assert (c.store.doc_usage(lukewarm) or {}).get("pinned_until") is None
