"""Retiring a space without holding up the activation: the cut-over is one
store transaction and the retired space's vectors move to the cold store afterwards, in
batches, stopped by a re-activation; and the two races around a re-activation: a document
write committing during it, and the retention expiry of the same space. Over a real store
(SQLite and PostgreSQL), a file cold store and the real embed handler, on simulated time (the
Rig of test_lifecycle_scheduler.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from services.core.backfill import Backfills
from shared.metrics import METRICS
from shared.model import PUBLIC_PRINCIPAL, DocKey, EmbedJob, SemanticStatus, SidecarEntry, SpaceInfo, StoredDoc
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.unit.test_lifecycle_scheduler import CFG, SIM_START, Rig, text

S = SemanticStatus


@pytest.fixture
def rig(opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:  # noqa: F811
    r = Rig(opener, tmp_path, monkeypatch)
    yield r
    r.store.close()


def info(r: Rig, space: str, state: str, **kw: float) -> SpaceInfo:
    return SpaceInfo("t", space, r.embedder.model_id, r.embedder.dim, state, SIM_START, **kw)  # type: ignore[arg-type]


def side(r: Rig, key: DocKey, space: str) -> SidecarEntry:
    s = r.store.sidecar(key, space)
    assert s is not None, (key, space)
    return s


def ready_count(r: Rig, space: str) -> int:
    return r.store.count_in_status("t", space, S.READY)


def cut_over(r: Rig, to: str, expect: str, retire: str) -> int | None:
    """What POST /semantic/spaces/{to}/activate does in the store: one transaction."""
    return r.store.switch_space(info(r, to, "active", activated_at=r.now), expect,
                                info(r, retire, "retired", retired_at=r.now), r.now)


def run_space(r: Rig, keys: Sequence[DocKey], space: str) -> None:
    r.handler.run([EmbedJob(k, space, side(r, k, space).content_hash) for k in keys])


def moved_total() -> float:
    return float(METRICS.retired_moved._value.get())


def on_core_then_v2(r: Rig, n: int) -> list[DocKey]:
    """n documents embedded in `core` (active) and in `v2` (building), then v2 activated."""
    keys = [r.put(f"d{i}") for i in range(n)]
    r.embed(*keys)
    r.store.put_tenant_space(info(r, "core", "active"))
    r.store.put_tenant_space(info(r, "v2", "building"))
    r.store.ensure_sidecars([SidecarEntry(k, "v2", S.NONE, side(r, k, "core").content_hash, updated_at=r.now)
                             for k in keys])
    run_space(r, keys, "v2")
    assert ready_count(r, "v2") == n
    assert cut_over(r, "v2", "building", "core") == 0
    return keys


# -- the background move ------------------------------------------------------------------------------


def test_the_cut_over_moves_nothing_and_the_move_follows_in_batches(rig: Rig) -> None:
    keys = on_core_then_v2(rig, 5)
    assert [(s.space, s.state) for s in rig.store.tenant_spaces("t")] == [("core", "retired"), ("v2", "active")]
    assert ready_count(rig, "core") == 5 and rig.store.cold_by_space("t") == {}  # nothing moved in the cut-over
    assert cut_over(rig, "v2", "building", "core") is None  # a second activation finds it active: refused
    before = moved_total()
    head = rig.store.change_log_head()
    assert rig.lifecycle.cool_retired(rig.now) == CFG.evict_batch  # one batch per call (backfill cadence)
    assert ready_count(rig, "core") == 5 - CFG.evict_batch
    assert moved_total() - before == CFG.evict_batch
    assert METRICS.retired_remaining._value.get() == 5 - CFG.evict_batch
    assert all(c.op == "unvector" and c.space == "core" for c in rig.store.changes_since(head))
    assert rig.lifecycle.cool_retired(rig.now, batches=None) == 5 - CFG.evict_batch  # the rest
    assert ready_count(rig, "core") == 0 and rig.store.cold_by_space("t")["core"][0] == 5
    assert METRICS.retired_remaining._value.get() == 0
    assert ready_count(rig, "v2") == 5  # the active space is never touched
    assert all(side(rig, k, "core").cold_ref for k in keys)


def test_a_re_activation_stops_the_move_and_a_batch_in_flight_moves_nothing(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = on_core_then_v2(rig, 5)
    assert rig.lifecycle.cool_retired(rig.now) == CFG.evict_batch
    real = rig.store.keys_in_status

    def select_then_roll_back(space: str, statuses: Sequence[S], limit: int = 10_000,
                              tenant: str | None = None) -> list[SidecarEntry]:
        rows = real(space, statuses, limit, tenant)  # the batch is chosen...
        if space == "core":
            assert cut_over(rig, "core", "retired", "v2") is not None  # ...then the operator rolls back
        return rows

    monkeypatch.setattr(rig.store, "keys_in_status", select_then_roll_back)
    assert rig.lifecycle.cool_retired(rig.now, batches=None) == 0
    monkeypatch.undo()
    assert [(s.space, s.state) for s in rig.store.tenant_spaces("t")] == [("core", "active"), ("v2", "retired")]
    assert ready_count(rig, "core") == 5 - CFG.evict_batch  # the batch in flight left them ready (not `none`)
    cold = [k for k in keys if side(rig, k, "core").status == S.NONE]
    assert len(cold) == CFG.evict_batch and all(side(rig, k, "core").cold_ref for k in cold)
    rig.embedder.calls.clear()
    run_space(rig, cold, "core")  # the moved ones come back from the cold store
    assert rig.embedder.calls == [] and ready_count(rig, "core") == 5


# -- race: a document write committing during a re-activation -----------------------------------------


def _write_planned_for(r: Rig, key: DocKey, body: str, space: str) -> None:
    """A write as DocumentService.put makes it when it read the tenant's spaces before the
    cut-over: a row planned for `space` (then the active one) only."""
    h = f"h-{abs(hash(body))}"
    r.store.put_docs([StoredDoc(key, {"body": body}, [PUBLIC_PRINCIPAL], None, h, r.now)],
                     [SidecarEntry(key, space, S.NONE, h, updated_at=r.now)])


@pytest.mark.parametrize("eager", [False, True])
def test_a_write_that_read_the_spaces_before_a_re_activation_leaves_no_row_queued_forever(
        rig: Rig, eager: bool) -> None:
    keys = on_core_then_v2(rig, 4)
    if eager:
        rig.lifecycle.set_mode("t", "c", eager=True)
    rig.lifecycle.cool_retired(rig.now, batches=None)  # core is cold
    rig.advance(60)
    assert cut_over(rig, "core", "retired", "v2") is not None  # roll back: core comes back...
    edited, new = keys[0], DocKey("t", "c", "new")
    old_hash = side(rig, edited, "core").content_hash
    _write_planned_for(rig, edited, "An edit about shock trains in supersonic inlets.", "v2")  # ...the writes
    _write_planned_for(rig, new, text("new"), "v2")  # planned for v2, which they took as active, commit after
    doc = rig.store.get_doc(edited)
    assert doc is not None and doc.content_hash != old_hash
    s = side(rig, edited, "core")
    assert (s.status, s.content_hash, s.cold_ref) == (S.STALE, doc.content_hash, None)  # not the old content
    assert side(rig, new, "core").status == S.NONE  # the new document has a row in the active space
    # the rehydration backfill and the handler bring back what core held, and the edited document;
    # nothing stays queued. The new document is embedded as a write embeds it: at once in an eager
    # collection, on its first touch in a lazy one (a rollback does not embed a lazy corpus).
    backfills = Backfills(rig.store, rig.queue, rig.budget, lambda d: rig.policy.decide_doc(d, None),
                          rig.lifecycle.backfills.limits, rig.clock)
    assert backfills.step(backfills.start("t", None, "core", "rehydrate")) == (5 if eager else 4)  # one step
    rig.embedder.calls.clear()
    rig.run_queued()
    assert rig.store.count_in_status("t", "core", S.QUEUED) == 0
    assert side(rig, edited, "core").status == S.READY and side(rig, edited, "core").content_hash == doc.content_hash
    assert side(rig, new, "core").status == (S.READY if eager else S.NONE)
    assert ready_count(rig, "core") == (5 if eager else 4)
    # the edited (and in an eager collection the new) document only; the rest from the cold store
    assert rig.embedder.calls == ([2] if eager else [1])


def test_a_write_in_flight_during_a_re_activation_is_seen_by_it(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write's transaction is open (it has read the spaces) when the cut-over starts: the
    cut-over waits for it and its realignment sees the new document (PostgreSQL: the write's
    share lock on the space rows; SQLite: one writer at a time)."""
    on_core_then_v2(rig, 2)
    locked, go = threading.Event(), threading.Event()
    real = rig.store._lc_lock_spaces  # type: ignore[attr-defined]

    def lock_then_wait(conn: object, tenants: Sequence[str]) -> object:
        out = real(conn, tenants)
        locked.set()
        assert go.wait(30)
        return out

    monkeypatch.setattr(rig.store, "_lc_lock_spaces", lock_then_wait)
    new = DocKey("t", "c", "late")
    writer = threading.Thread(target=_write_planned_for, args=(rig, new, text("late"), "v2"))
    writer.start()
    assert locked.wait(30)
    result: list[int | None] = []
    switch = threading.Thread(target=lambda: result.append(cut_over(rig, "core", "retired", "v2")))
    switch.start()
    switch.join(0.5)
    assert switch.is_alive()  # waiting for the write
    go.set()
    writer.join(30)
    switch.join(30)
    assert not writer.is_alive() and not switch.is_alive() and result and result[0] is not None
    assert side(rig, new, "core").status == S.NONE  # the re-activated space has the document


# -- race: retention expiry and a re-activation of the same space -------------------------------------


def test_expiry_never_removes_a_space_re_activated_before_its_claim(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = on_core_then_v2(rig, 3)
    rig.lifecycle.cool_retired(rig.now, batches=None)
    rig.advance(CFG.retired_retention_seconds + 1)
    real = rig.store.claim_expiry

    def re_activate_then_claim(tenant: str, space: str, retired_before: float) -> bool:
        assert cut_over(rig, "core", "retired", "v2") is not None  # listed as expired, re-activated now
        return real(tenant, space, retired_before)

    monkeypatch.setattr(rig.store, "claim_expiry", re_activate_then_claim)
    assert rig.lifecycle.expire_retired(rig.now) == []
    monkeypatch.undo()
    spaces = {s.space: s.state for s in rig.store.tenant_spaces("t")}
    assert spaces == {"core": "active", "v2": "retired"}
    for k in keys:  # rows, cold entries and files of the re-activated space are all there
        s = side(rig, k, "core")
        assert s.cold_ref and rig.cold.get("t", "core", s.content_hash) is not None
    assert rig.store.cold_by_space("t")["core"][0] == 3
    rig.embedder.calls.clear()
    run_space(rig, keys, "core")
    assert rig.embedder.calls == [] and ready_count(rig, "core") == 3


def test_a_space_claimed_for_expiry_is_not_re_activated_and_its_removal_resumes(rig: Rig) -> None:
    keys = on_core_then_v2(rig, 2)
    rig.lifecycle.cool_retired(rig.now, batches=None)
    assert not rig.store.claim_expiry("t", "core", rig.now - 1)  # retired at rig.now: not past the bound
    rig.advance(CFG.retired_retention_seconds + 1)
    assert rig.store.claim_expiry("t", "core", rig.now - CFG.retired_retention_seconds)  # (then a crash)
    assert cut_over(rig, "core", "retired", "v2") is None  # refused: nothing changed
    assert {s.space: s.state for s in rig.store.tenant_spaces("t")} == {"core": "expiring", "v2": "active"}
    assert rig.lifecycle.cool_retired(rig.now, batches=None) == 0
    assert rig.lifecycle.expire_retired(rig.now) == ["t/core"]  # the removal resumes
    assert [s.space for s in rig.store.tenant_spaces("t")] == ["v2"]
    assert rig.store.sidecar(keys[0], "core") is None and rig.store.cold_by_space("t") == {}
    assert ready_count(rig, "v2") == 2


_WRITER = """
import sys, time
from pathlib import Path
from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
store = SqliteStore(Path(sys.argv[1]))
print("ready", flush=True)
i = 0
while True:
    store.put_docs([StoredDoc(DocKey("t", "w", str(i)), {"body": "w"}, [PUBLIC_PRINCIPAL], None, f"w{i}", 1.0)], [])
    print(time.monotonic(), flush=True)
    i += 1
    time.sleep(0.01)
"""


def test_a_rollbacks_realignment_lets_another_processs_writes_in_between_its_batches(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Realigned inside the cut-over, a rollback held the tenant's writes for the whole pass; in
    batches (`Lifecycle.realign_rows`) it must let them in between. Back to back, the batches did
    not let another process's writes in: its busy handler polls every 100 ms at most and misses
    most gaps (at 1M documents a write waited up to 0.53 s unpaced, 0.18 s paced). The
    process's own writers take turns on a ticket lock (tests/unit/test_sqlite_writers.py);
    PostgreSQL queues lock waiters, so this is SQLite's test."""
    import os
    import subprocess
    import sys
    import time

    from shared.adapters.sqlite_store import SqliteStore

    if not isinstance(rig.store, SqliteStore):
        pytest.skip("SQLite's busy handler; PostgreSQL queues lock waiters")
    import services.core.lifecycle.cutover as cutover

    # a pause after every 10 ms of batches instead of 100 ms: the same pause, a shorter test
    monkeypatch.setattr(cutover, "BATCH_SECONDS", 0.01)
    with rig.store._tx() as conn:
        conn.executemany("INSERT INTO docs VALUES (?,?,?,?,?,?,?,?,?)",
                         (("t", "c", f"{i:06d}", '{"body": "x"}', '["*"]', None, "{}", f"h{i}", 1.0)
                          for i in range(30_000)))
    rig.store.put_tenant_space(info(rig, "core", "retired", retired_at=rig.now))
    rig.store.put_tenant_space(info(rig, "v2", "active", activated_at=rig.now))
    batches: list[tuple[float, float]] = []
    real = rig.store.realign_space_rows

    def timed(*args: object) -> tuple[int, tuple[str, str] | None]:
        started = time.monotonic()
        out = real(*args)  # type: ignore[arg-type]
        batches.append((started, time.monotonic()))
        return out

    rig.store.realign_space_rows = timed  # type: ignore[method-assign]
    repo = Path(__file__).resolve().parents[2]
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(rig.store.path)], stdout=subprocess.PIPE,
                              text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        rig.lifecycle.realign_rows("t", "core", batch=200)
    finally:
        writer.kill()
        out, _ = writer.communicate(timeout=30)
    writes = [float(line) for line in out.split()]
    assert len(batches) >= 4
    assert rig.store.count_in_status("t", "core", S.NONE) >= 30_000  # the batches did their work
    between = [w for w in writes if batches[0][1] < w < batches[-1][0]]
    assert len(between) >= 2, (len(batches), len(writes))
