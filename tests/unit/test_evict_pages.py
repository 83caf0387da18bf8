"""The scheduler's eviction by pages (Lifecycle.evict_page, stage `evict`, store
`eviction_page`): `EVICT_PAGE_BATCHES` x `evict_batch` sidecar rows examined per tick from a
cursor in the store (`evict`), the idle ones of the page moved cold. Before, every tick read every
`ready` row of each space (0.3-1.8 s at 1M rows) to find none in the steady state. POST
/semantic/evict (`Lifecycle.evict`) still takes everything idle in its scope at once. Over the
real wiring, SQLite and PostgreSQL, a new process at every tick."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from services.core.lifecycle.eviction import EVICT_CURSOR, EVICT_PAGE_BATCHES
from services.wiring import Container
from shared.model import DocKey, SemanticStatus, UsageBatch
from tests.unit.test_cold_orphans import SPACE, USER
from tests.unit.test_gone_rows import layout, service  # noqa: F401 - the fixture
from tests.unit.test_scheduler_switch import embed_now

DAY = 86400.0
IDLE = 30 * DAY  # the default evict_idle_seconds
LATER = time.time() + IDLE + DAY  # the ticks' time: whatever this test embeds or uses now is idle by then
BATCH = 2
PAGE = EVICT_PAGE_BATCHES * BATCH
# In key order: lazy a, eager b, lazy c; what each document is when the ticks run.
ROWS = {"a": ["idle", "used", "pinned", "none", "idle", "used"],
        "b": ["eager", "eager", "eager"],
        "c": ["pinned", "idle", "used", "none", "pinned", "idle", "used", "idle"]}


def stage(c: Container) -> dict[str, list[DocKey]]:
    """The documents of `ROWS` written, embedded (but the `none` ones), used or pinned; by role."""
    roles: dict[str, list[DocKey]] = {}
    for collection, kinds in ROWS.items():
        c.docs.put([c.docs.parse(USER, collection, f"{collection}{i}",
                                 {"title": f"{collection}{i}", "body": f"wing flutter margins, case {collection}{i}"})
                    for i in range(len(kinds))])
        for i, kind in enumerate(kinds):
            roles.setdefault(kind, []).append(DocKey("t", collection, f"{collection}{i}"))
    embed_now(c, SPACE, *(k for kind, keys in roles.items() if kind != "none" for k in keys))
    used = {k: LATER - DAY for k in roles["used"]} | {k: time.time() for k in roles["pinned"]}
    c.store.record_usage(UsageBatch(used=used), LATER - DAY, 3600.0, 7 * DAY)
    assert c.store.pin_docs(roles["pinned"], LATER + 10 * DAY) == len(roles["pinned"])
    assert c.lifecycle.set_mode("t", "b", eager=True)
    return roles


def evictions() -> float:
    return REGISTRY.get_sample_value("vibe_evictions_total") or 0.0


def cold(c: Container, key: DocKey) -> bool:
    side = c.store.sidecar(key, SPACE)
    assert side is not None
    return side.status == SemanticStatus.NONE and side.cold_ref is not None


def test_a_tick_evicts_the_idle_rows_of_its_page_and_the_next_goes_on(tmp_path: Path,
                                                                        layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout, evict_batch=BATCH) as c:
        roles = stage(c)
    keys = [DocKey("t", col, f"{col}{i}") for col, kinds in ROWS.items() for i in range(len(kinds))]  # key order
    assert len(keys) > 2 * PAGE, "the rows should span three pages"
    pages = [keys[i:i + PAGE] for i in range(0, len(keys), PAGE)]
    evicted, stops = [], []
    for _ in range(len(pages) + 1):  # a pass, then the first page of the next
        with service(tmp_path, layout, evict_batch=BATCH) as c:
            r = c.lifecycle.tick(LATER)
            assert r.failed == []
            evicted.append(r.evicted)
            stops.append(c.store.sweep_cursor(EVICT_CURSOR))
    # each tick the idle rows of its page (before: all five at the first tick), going on after the
    # last row it examined; the end resets the cursor, and the next pass finds them gone already
    assert evicted == [sum(k in roles["idle"] for k in page) for page in pages] + [0]
    assert stops == [(*page[-1], SPACE) for page in pages[:-1]] + [None, (*pages[0][-1], SPACE)]
    with service(tmp_path, layout, evict_batch=BATCH) as c:
        assert all(cold(c, k) for k in roles["idle"])
        for kind in ("used", "pinned", "eager"):
            assert not any(cold(c, k) for k in roles[kind]), kind
        states = c.store.coverage("t", None, SPACE)["states"]
        assert isinstance(states, dict) and {k: n for k, n in states.items() if n} == {"cold": 5, "ready": 10,
                                                                                       "none": 2}


def test_a_store_that_fits_in_a_page_is_examined_whole_at_every_tick(tmp_path: Path,
                                                                      layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout, evict_batch=len(ROWS["a"]) + len(ROWS["b"]) + len(ROWS["c"])) as c:
        roles = stage(c)
        before = evictions()
        r = c.lifecycle.tick(LATER)
        assert r.evicted == 5 and r.tenants["t"]["evicted"] == 5 and evictions() == before + 5
        assert c.store.sweep_cursor(EVICT_CURSOR) is None
        assert all(cold(c, k) for k in roles["idle"])
        assert c.lifecycle.tick(LATER).evicted == 0


def test_post_evict_still_takes_everything_idle_in_its_scope_at_once(tmp_path: Path,
                                                                      layout: dict[str, Any]) -> None:  # noqa: F811
    with service(tmp_path, layout, evict_batch=BATCH) as c:
        roles = stage(c)
        assert c.lifecycle.evict(LATER, IDLE, "u") == 0  # another tenant's scope
        assert c.lifecycle.evict(LATER, IDLE, "t", "b") == 0  # eager
        assert c.lifecycle.evict(LATER, IDLE, "t") == 5  # over more than a page and a batch, in one call
        assert all(cold(c, k) for k in roles["idle"])
        for kind in ("used", "pinned", "eager"):
            assert not any(cold(c, k) for k in roles[kind]), kind
        assert c.lifecycle.evict(LATER, IDLE, "t") == 0
        assert c.store.sweep_cursor(EVICT_CURSOR) is None  # the tick's pass is its own
