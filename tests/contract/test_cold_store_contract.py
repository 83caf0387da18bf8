"""One conformance suite for every ColdStore adapter (shared/ports/cold.py): the file layout, and the
packed table in SQLite and in PostgreSQL (shared/adapters/cold_packed.py). Then what only the
packed store promises: it reads (and deletes) what the file layout evicted before it, several
processes write one SQLite file together, and it takes about the codes' size on disk, where one
file per vector takes a filesystem block each."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.cold_files import FileColdStore
from shared.adapters.cold_packed import PackedColdStore
from shared.adapters.postgres_store import PostgresStore
from shared.ports import ColdStore

DIM = 384
TENANT = "acme-secret-tenant"
Make = Callable[..., ColdStore]


def unit(n: int, seed: int) -> list[list[float]]:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).tolist()  # type: ignore[no-any-return]


@pytest.fixture(params=["files", "sqlite", "postgres", "postgres-store-pool"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    """A factory of stores over one place (several instances: several processes' views). On
    PostgreSQL with a pool of its own, and through the store of record's pool (as `build`)."""
    opened: list[ColdStore] = []
    url = request.getfixturevalue("postgres_url") if request.param.startswith("postgres") else ""
    record = PostgresStore(url) if request.param == "postgres-store-pool" else None

    def new(codec: str = "float16") -> ColdStore:
        store: ColdStore
        if request.param == "files":
            store = FileColdStore(tmp_path, codec)
        elif request.param == "sqlite":
            store = PackedColdStore.sqlite(tmp_path, codec)
        else:
            store = PackedColdStore.postgres(url, tmp_path, codec, record.pool if record is not None else None)
        opened.append(store)
        return store

    yield new
    for s in opened:
        s.close()
    if record is not None:
        record.close()


def close_to(got: list[float] | None, want: list[float], cosine: float = 0.999) -> bool:
    return got is not None and len(got) == len(want) and float(np.dot(got, want)) >= cosine


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_put_get_delete(make: Make, codec: str) -> None:
    cs = make(codec)
    v = unit(1, 3)[0]
    ref, n = cs.put(TENANT, "core", "h1", v)
    assert ref and n == 12 + (2 if codec == "float16" else 1) * DIM
    assert cs.put(TENANT, "core", "h1", v) == (ref, n)  # idempotent
    assert close_to(cs.get(TENANT, "core", "h1"), v, 0.9999 if codec == "float16" else 0.99)
    assert cs.get(TENANT, "core", "h2") is None
    assert cs.get("other-tenant", "core", "h1") is None  # kept per tenant
    assert cs.get(TENANT, "v2", "h1") is None  # and per space
    cs.delete(TENANT, "core", "h1")
    assert cs.get(TENANT, "core", "h1") is None
    cs.delete(TENANT, "core", "h1")  # deleting what is gone is a no-op


def test_a_put_replaces_the_vector_and_another_instance_sees_it(make: Make) -> None:
    a, b = make(), make()
    v, w = unit(2, 4)
    a.put(TENANT, "core", "h1", v)
    assert close_to(b.get(TENANT, "core", "h1"), v)
    b.put(TENANT, "core", "h1", w)
    assert close_to(a.get(TENANT, "core", "h1"), w)
    a.delete(TENANT, "core", "h1")
    assert b.get(TENANT, "core", "h1") is None


def test_a_changed_codec_still_reads_what_was_stored(make: Make) -> None:
    v = unit(1, 5)[0]
    make("float16").put(TENANT, "core", "h1", v)
    assert close_to(make("int8").get(TENANT, "core", "h1"), v)
    make("int8").delete(TENANT, "core", "h1")
    assert make("float16").get(TENANT, "core", "h1") is None


def test_spaces_and_tenants_never_share_a_vector(make: Make) -> None:
    cs = make()
    vs = unit(4, 6)
    for (tenant, space), v in zip([(TENANT, "core@v2"), (TENANT, "core_v2"), ("acme-other", "core@v2"),
                                   (TENANT, "core")], vs, strict=True):
        cs.put(tenant, space, "h1", v)
    assert close_to(cs.get(TENANT, "core@v2", "h1"), vs[0]) and close_to(cs.get(TENANT, "core_v2", "h1"), vs[1])
    assert close_to(cs.get("acme-other", "core@v2", "h1"), vs[2])
    cs.delete(TENANT, "core@v2", "h1")
    assert cs.get(TENANT, "core@v2", "h1") is None
    assert all(close_to(cs.get(t, s, "h1"), v) for (t, s), v in
               zip([(TENANT, "core_v2"), ("acme-other", "core@v2"), (TENANT, "core")], vs[1:], strict=True))


def test_hashes_pages_through_one_tenant_space_in_order(make: Make) -> None:
    """What the orphan sweep reads (Lifecycle.sweep_cold_orphans): the service's `blake3:` form
    too, whose file name holds `blake3_` (read back through its digest directory)."""
    cs = make()
    held = sorted([f"h{i:02d}" for i in range(7)] + ["blake3:" + "ab" * 32])
    v = unit(1, 8)[0]
    for h in held:
        cs.put(TENANT, "core@v2", h, v)
    cs.put(TENANT, "core", "other-space", v)
    cs.put("acme-other", "core@v2", "other-tenant", v)
    pages, after = [], ""
    while page := cs.hashes(TENANT, "core@v2", after, 3):
        pages.append(page)
        after = page[-1]
    assert pages == [held[:3], held[3:6], held[6:]]
    cs.delete(TENANT, "core@v2", held[0])
    assert cs.hashes(TENANT, "core@v2", "", 100) == held[1:]
    assert cs.hashes(TENANT, "v3", "", 100) == [] and cs.hashes("nobody", "core", "", 100) == []


def test_threads_put_and_get_together(make: Make) -> None:
    """A scheduler tick, `POST /semantic/evict` and worker threads rehydrating, in one process."""
    cs = make()
    vs = unit(200, 7)
    errors: list[BaseException] = []

    def work(part: int) -> None:
        try:
            for i in range(part, len(vs), 4):
                cs.put(TENANT, "core", f"h{i}", vs[i])
                assert close_to(cs.get(TENANT, "core", f"h{i}"), vs[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(close_to(cs.get(TENANT, "core", f"h{i}"), v) for i, v in enumerate(vs))


# -- packed only ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_vectors_evicted_to_files_before_are_read_and_deleted(kind: str, tmp_path: Path,
                                                             request: pytest.FixtureRequest) -> None:
    """An upgrade needs no migration: what the file layout holds is still rehydrated (no
    provider call), and deleting the key (pruning, retention) removes the file too."""
    v = unit(1, 8)[0]
    ref, _ = FileColdStore(tmp_path).put(TENANT, "core@v2", "h1", v)
    packed = (PackedColdStore.sqlite(tmp_path) if kind == "sqlite"
              else PackedColdStore.postgres(request.getfixturevalue("postgres_url"), tmp_path))
    try:
        assert close_to(packed.get(TENANT, "core@v2", "h1"), v)
        assert packed.held(TENANT, "core@v2") == set()  # read from the file, not copied
        packed.delete(TENANT, "core@v2", "h1")
        assert not (tmp_path / ref).exists() and packed.get(TENANT, "core@v2", "h1") is None
    finally:
        packed.close()


def test_without_files_from_before_no_file_is_looked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold dir that held no files at start gets none later (packed writes none): a miss, a
    put and a delete never touch the file layout. One that held some keeps reading them."""
    looked: list[str] = []
    monkeypatch.setattr(FileColdStore, "get", lambda self, *a: looked.append("get"))
    monkeypatch.setattr(FileColdStore, "delete", lambda self, *a: looked.append("delete"))
    v = unit(1, 8)[0]
    for root, before in ((tmp_path / "new", False), (tmp_path / "old", True)):
        if before:
            (root / "core").mkdir(parents=True)  # a space directory of the file layout
        packed = PackedColdStore.sqlite(root)
        try:
            assert packed.get(TENANT, "core", "missing") is None
            packed.put(TENANT, "core", "h1", v)
            assert close_to(packed.get(TENANT, "core", "h1"), v)
            packed.delete(TENANT, "core", "h1")
        finally:
            packed.close()
        assert looked == (["get", "delete"] if before else []), root
        looked.clear()


def _writer(root: str, part: int, n: int) -> None:
    store = PackedColdStore.sqlite(Path(root))
    try:
        for i, v in enumerate(unit(n, 100 + part)):
            store.put(TENANT, "core", f"p{part}-{i}", v)
    finally:
        store.close()


def test_processes_write_one_sqlite_file_together(tmp_path: Path) -> None:
    """Several `serve` processes on one data dir (and the scheduler's leader) evict into one file."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), p, 150)) for p in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    store = PackedColdStore.sqlite(tmp_path)
    try:
        assert len(store.held(TENANT, "core")) == 450
        assert all(close_to(store.get(TENANT, "core", f"p1-{i}"), v) for i, v in enumerate(unit(150, 101)))
    finally:
        store.close()


def disk_bytes(root: Path) -> int:
    """What the files take on disk (allocated blocks), not their length."""
    return sum(os.stat(p).st_blocks * 512 for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_packed_vectors_take_about_their_size_on_disk(tmp_path: Path, codec: str) -> None:
    vs = unit(2000, 9)
    files, packed = FileColdStore(tmp_path / "files", codec), PackedColdStore.sqlite(tmp_path / "packed", codec)
    try:
        logical = sum(files.put(TENANT, "core", f"h{i}", v)[1] for i, v in enumerate(vs))
        for i, v in enumerate(vs):
            packed.put(TENANT, "core", f"h{i}", v)
        assert packed.stored() == (logical, len(vs))
        with packed.db.cursor() as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        packed.close()
    on_disk = disk_bytes(tmp_path / "packed")
    assert on_disk <= 1.5 * logical, (on_disk, logical)
    # Not asserted, as it depends on the file system (btrfs keeps small files inline): on ext4
    # the same vectors one file each take a 4 KiB block apiece, 5x (float16) to 10x (int8) this.


def test_deleted_codes_give_their_disk_back(tmp_path: Path) -> None:
    """A retired space's expiry deletes all its codes at once; the file shrinks, not only stops growing."""
    store = PackedColdStore.sqlite(tmp_path)
    try:
        for i, v in enumerate(unit(3000, 10)):
            store.put(TENANT, "retired", f"h{i}", v)
        store.put(TENANT, "core", "kept", unit(1, 11)[0])
        with store.db.cursor() as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        full = (tmp_path / "cold.sqlite3").stat().st_size
        for i in range(3000):
            store.delete(TENANT, "retired", f"h{i}")
        with store.db.cursor() as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert (tmp_path / "cold.sqlite3").stat().st_size < full / 4
        assert close_to(store.get(TENANT, "core", "kept"), unit(1, 11)[0]) and store.stored()[1] == 1
    finally:
        store.close()


def test_an_unreadable_sqlite_file_is_kept_aside_and_a_new_one_started(tmp_path: Path) -> None:
    """A torn or foreign `cold.sqlite3` must not keep the service from starting: what it held
    can be embedded again. The old file is kept for whoever wants to look."""
    (tmp_path / "cold.sqlite3").write_bytes(b"not a database, " * 512)
    store = PackedColdStore.sqlite(tmp_path)
    try:
        v = unit(1, 12)[0]
        store.put(TENANT, "core", "h1", v)
        assert close_to(store.get(TENANT, "core", "h1"), v)
    finally:
        store.close()
    kept = [p.name for p in tmp_path.iterdir() if p.name.startswith("cold.sqlite3.corrupt-")]
    assert len(kept) == 1 and (tmp_path / kept[0]).read_bytes().startswith(b"not a database")


def test_a_damaged_read_answers_none_and_a_locked_one_raises(tmp_path: Path) -> None:
    """None makes the caller embed again; a lock is not damage (the job is retried instead)."""
    store = PackedColdStore.sqlite(tmp_path)
    store.put(TENANT, "core", "h1", unit(1, 13)[0])

    class Failing:
        def __init__(self, error: Exception):
            self.error = error

        def execute(self, *_: object) -> None:
            raise self.error

    real = store.db.cursor
    try:
        for error, raises in ((sqlite3.DatabaseError("database disk image is malformed"), False),
                              (sqlite3.OperationalError("database is locked"), True)):
            @contextmanager
            def failing(e: Exception = error) -> Iterator[Failing]:
                yield Failing(e)

            store.db.cursor = failing  # type: ignore[method-assign]
            if raises:
                with pytest.raises(sqlite3.OperationalError):
                    store.get(TENANT, "core", "h1")
            else:
                assert store.get(TENANT, "core", "h1") is None
    finally:
        store.db.cursor = real  # type: ignore[method-assign]
        store.close()
