"""The scheduler's sweep of orphaned cold codes (Lifecycle.sweep_cold_orphans, stage
`cold_orphans`): a process killed between an eviction's `cold.put` and the store's commit, or
between a prune's row deletion and its `cold.delete`, left codes that no cold entry references,
and nothing removed them. A code goes once two sweeps in a row found it unreferenced; a code an
eviction in flight has written but not yet committed survives. Over the real wiring: the packed
cold store in SQLite and in PostgreSQL (each beside its store of record), and the file layout."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.wiring import Container
from shared.model import DocKey, Principal, SemanticStatus
from tests.support.counting import CountingEmbedder
from tests.unit.test_scheduler_switch import embed_now, running

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))
SPACE = "core"
ORPHAN = "blake3:" + "0e" * 32  # the service's hash form: the file layout names it `blake3_...`


@pytest.fixture(params=["sqlite-packed", "sqlite-files", "postgres-packed"])
def layout(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "postgres-packed":
        return {"store": "postgres", "postgres_url": request.getfixturevalue("postgres_url"),
                "postgres_pool_size": 2}
    return {"store": "sqlite", "cold_store": request.param.removeprefix("sqlite-")}


@contextmanager
def service(tmp_path: Path, layout: dict[str, Any], emb: CountingEmbedder | None = None,
            **settings: Any) -> Iterator[Container]:
    with running(tmp_path, emb, **layout, **settings) as c:
        yield c


def swept() -> float:
    return REGISTRY.get_sample_value("vibe_vectors_pruned_total", {"store": "cold_orphans"}) or 0.0


def put_docs(c: Container, *ids: str) -> list[DocKey]:
    c.docs.put([c.docs.parse(USER, "c", i, {"title": i, "body": f"wing flutter margins, case {i}"}) for i in ids])
    return [DocKey("t", "c", i) for i in ids]


def content(c: Container, key: DocKey) -> str:
    side = c.store.sidecar(key, SPACE)
    assert side is not None
    return side.content_hash


def test_an_orphan_code_goes_at_the_second_sweep_not_the_first(tmp_path: Path, layout: dict[str, Any]) -> None:
    with service(tmp_path, layout) as c:
        put_docs(c, "a")  # the tenant's space is known to the store
        c.lifecycle.cold.put("t", SPACE, ORPHAN, [0.5] * 32)  # written, then the process was killed
        before = swept()
        first = c.lifecycle.tick()
        assert first.cold_orphans == 0 and first.failed == []
        assert c.lifecycle.cold.get("t", SPACE, ORPHAN) is not None  # one sweep is not enough
        assert c.lifecycle.tick().cold_orphans == 1
        assert c.lifecycle.cold.get("t", SPACE, ORPHAN) is None
        assert c.lifecycle.cold.hashes("t", SPACE, "", 10) == []
        assert swept() == before + 1


def test_a_referenced_code_is_never_removed_and_its_document_rehydrates(
        tmp_path: Path, layout: dict[str, Any]) -> None:
    emb = CountingEmbedder(32)
    with service(tmp_path, layout, emb) as c:
        key, = put_docs(c, "a")
        embed_now(c, SPACE, key)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 1
        h = content(c, key)
        ref = c.store.cold_entry("t", h, SPACE)
        assert ref is not None
        c.lifecycle.cold.put("t", SPACE, ORPHAN, [0.5] * 32)  # beside it, one that nothing references
        assert [c.lifecycle.tick().cold_orphans for _ in range(4)] == [0, 1, 0, 0]
        assert c.store.cold_entry("t", h, SPACE) == ref and c.lifecycle.cold.get("t", SPACE, h) is not None
        side = c.store.sidecar(key, SPACE)
        assert side is not None and side.status == SemanticStatus.NONE and side.cold_ref == ref
        inputs = emb.inputs
        embed_now(c, SPACE, key)  # its next touch
        assert emb.inputs == inputs  # rehydrated from the cold store: no provider call


def test_a_code_whose_eviction_commits_between_two_sweeps_survives(
        tmp_path: Path, layout: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep runs while an eviction has written its codes but not committed its cold entries
    (the tick of another thread, another process): they look exactly like orphans then."""
    emb = CountingEmbedder(32)
    with service(tmp_path, layout, emb) as c:
        keys = put_docs(c, "a", "b")
        embed_now(c, SPACE, *keys)
        c.lifecycle.cold.put("t", SPACE, ORPHAN, [0.5] * 32)  # a crash's leftover, for contrast
        cold, real_put = c.lifecycle.cold, c.lifecycle.cold.put
        first: list[int] = []

        def put_then_sweep(tenant: str, space: str, content_hash: str, vector: Sequence[float]) -> tuple[str, int]:
            out = real_put(tenant, space, content_hash, vector)
            if len(cold.hashes("t", SPACE, "", 10)) == 3:  # both written, neither committed
                first.append(c.lifecycle.tick().cold_orphans)
            return out

        monkeypatch.setattr(cold, "put", put_then_sweep)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 2  # then commits
        monkeypatch.undo()
        assert first == [0]
        assert c.lifecycle.tick().cold_orphans == 1  # the leftover only
        hashes = [content(c, k) for k in keys]
        assert sorted(cold.hashes("t", SPACE, "", 10)) == sorted(hashes)
        assert all(c.store.cold_entry("t", h, SPACE) is not None for h in hashes)
        inputs = emb.inputs
        embed_now(c, SPACE, *keys)
        assert emb.inputs == inputs  # both rehydrated without a provider call


def test_each_sweep_examines_and_deletes_at_most_one_batch(tmp_path: Path) -> None:
    """`evict_batch` bounds a sweep: codes past it wait for the next ticks, which resume where
    the last one stopped (here two tenants' spaces, five orphans, batches of two)."""
    with running(tmp_path, evict_batch=2) as c:
        c.docs.put([c.docs.parse(Principal(t, ("user:u",), frozenset({"write"})), "c", "a",
                                 {"title": "a", "body": f"wing flutter of {t}"}) for t in ("t", "u")])
        for t, n in (("t", 3), ("u", 2)):
            for i in range(n):
                c.lifecycle.cold.put(t, SPACE, f"blake3:{i:064x}", [0.5] * 32)
        assert [c.lifecycle.tick().cold_orphans for _ in range(5)] == [0, 2, 2, 1, 0]
        assert c.lifecycle.cold.hashes("t", SPACE, "", 10) == c.lifecycle.cold.hashes("u", SPACE, "", 10) == []


def test_a_restarted_scheduler_goes_on_where_the_last_one_stopped(tmp_path: Path, layout: dict[str, Any]) -> None:
    """The sweep's cursor is in the store: a restart began again at the first code before, so
    a fleet restarting every two ticks spent both on the referenced codes in front and never
    reached the orphans behind them. A candidate still needs two sweeps of one process (a
    restart between them only delays it to the next pass)."""
    with service(tmp_path, layout, evict_batch=2) as c:
        keys = put_docs(c, "a", "b")
        embed_now(c, SPACE, *keys)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 2  # two referenced codes of t
        c.docs.put([c.docs.parse(Principal("u", ("user:u",), frozenset({"write"})), "c", "a",
                                 {"title": "a", "body": "wing flutter of u"})])
        for i in range(2):
            c.lifecycle.cold.put("u", SPACE, f"blake3:{i:064x}", [0.5] * 32)  # behind them, in u's space
    deleted = []
    for _ in range(3):
        with service(tmp_path, layout, evict_batch=2) as c:
            deleted += [c.lifecycle.tick().cold_orphans for _ in range(2)]
    # t's two codes, then u's first (a candidate lost at the restart); u's second, confirmed;
    # over again: t's, then u's first once more, confirmed
    assert deleted == [0, 0, 0, 1, 0, 1]
    with service(tmp_path, layout, evict_batch=2) as c:
        assert c.lifecycle.cold.hashes("u", SPACE, "", 10) == []
        assert len(c.lifecycle.cold.hashes("t", SPACE, "", 10)) == 2
