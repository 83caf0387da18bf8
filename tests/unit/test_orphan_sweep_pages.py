"""The cold-orphan sweep's (tenant, space) pairs by pages (Lifecycle._unreferenced_page, store
`known_spaces_page`): a tick reads one page of `SPACES_PAGE` pairs from its cursor and visits at
most those (and `evict_batch` codes). Before, every tick read every pair of the store
(`known_spaces`: 0.14-0.35 s on SQLite, 0.25-0.48 s on PostgreSQL at 10,000 tenants) and asked the
cold store about up to `evict_batch` of them, a query each. Over the real wiring, SQLite and
PostgreSQL: a pass visits exactly the pairs `known_spaces` gives, in order and each once, across
page edges, and each tick reads one page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.core.lifecycle.sweeps import ORPHANS_CURSOR, SPACES_PAGE
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from tests.unit.test_cold_orphans import SPACE
from tests.unit.test_gone_rows import layout, service  # noqa: F401 - the fixture

TENANTS = [f"t{i:03d}" for i in range(2 * SPACES_PAGE + 50)]  # three ticks' pairs
# orphan codes at the first pair, on both sides of the first page edge, and at the last pair
ORPHANED = [TENANTS[0], TENANTS[SPACES_PAGE - 1], TENANTS[SPACES_PAGE], TENANTS[-1]]


def test_a_tick_reads_one_page_of_pairs_and_a_pass_visits_every_pair_once(
        tmp_path: Path, layout: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # a budget of codes above the pairs: the page, not the budget, bounds these ticks
    with service(tmp_path, layout, evict_batch=4 * len(TENANTS)) as c:
        # straight into the store of record (what the sweep reads): the service's writes build
        # each tenant's keyword index too, 8.5 s for these 450 tenants
        docs = [StoredDoc(DocKey(t, "c", "a"), {"title": "a"}, [PUBLIC_PRINCIPAL], None, f"h-{t}", 1.0)
                for t in TENANTS]
        c.store.put_docs(docs, [SidecarEntry(d.key, SPACE, SemanticStatus.NONE, d.content_hash, updated_at=1.0)
                                for d in docs])
        for t in ORPHANED:
            c.lifecycle.cold.put(t, SPACE, f"blake3:{0:064x}", [0.5] * 32)
        whole = c.store.known_spaces()
        assert whole == [(t, SPACE) for t in TENANTS]
        pages: list[tuple[tuple[str, str] | None, int]] = []  # (start, pairs read) of each page
        visited: list[tuple[str, str]] = []
        real_page, real_hashes = c.store.known_spaces_page, c.lifecycle.cold.hashes

        def page(start: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
            out = real_page(start, limit)
            pages.append((start, len(out)))
            return out

        def hashes(tenant: str, space: str, after: str, limit: int) -> list[str]:
            visited.append((tenant, space))
            return real_hashes(tenant, space, after, limit)

        def every_pair() -> list[tuple[str, str]]:
            raise AssertionError("the sweep read every pair")

        monkeypatch.setattr(c.store, "known_spaces_page", page)
        monkeypatch.setattr(c.store, "known_spaces", every_pair)
        monkeypatch.setattr(c.lifecycle.cold, "hashes", hashes)
        deleted, per_tick, visits, stops = [], [], [], []
        for _ in range(4):  # a pass (three ticks), then the first tick of the next
            pages.clear()
            visited.clear()
            report = c.lifecycle.tick()
            assert report.failed == []
            deleted.append(report.cold_orphans)
            per_tick.append(list(pages))
            visits.append(list(visited))
            stops.append(c.store.sweep_cursor(ORPHANS_CURSOR))
    # the pass: every pair once, in order, SPACES_PAGE a tick
    assert visits[0] + visits[1] + visits[2] == whole
    assert [len(v) for v in visits] == [SPACES_PAGE, SPACES_PAGE, 50, SPACES_PAGE]
    # one page a tick, of one pair more than it visits (where the next tick begins)
    assert per_tick == [[(None, SPACES_PAGE + 1)], [(whole[SPACES_PAGE], SPACES_PAGE + 1)],
                        [(whole[2 * SPACES_PAGE], 50)], [(None, SPACES_PAGE + 1)]]
    assert stops == [(*whole[SPACES_PAGE], ""), (*whole[2 * SPACES_PAGE], ""), None, (*whole[SPACES_PAGE], "")]
    # found at one sweep, deleted at the next: the first tick's two, the second's, and the last one
    # confirmed when the next pass begins
    assert deleted == [0, 2, 1, 1]
