"""How long a tenant's writes wait while a space cut-over prepares its rows.

    python -m bench.cutover_writes [--docs 1000000] [--store sqlite|postgres] [--writer thread|process]

Two cut-overs touch every document of the tenant: a rollback (a retired space made active
again is realigned with the documents) and a forced activation (every document gets a row in
the new space). Each is run twice in the same run, on copies of the same store:
- `inside`: the baseline, the whole pass inside the cut-over's transaction (`switch_space`
  alone, as before 2026-11-27);
- `batched`: what activation does now, the paced batches first (`Lifecycle.realign_rows` /
  `fill_rows`) and then the cut-over over what was written since.
Meanwhile a writer puts one document every 20 ms into the same tenant, from a thread of the
same process (`thread`: it queues on the store's ticket lock) or from another process
(`process`: SQLite's busy handler). Reported: the longest write, the time in the batches and in
the cut-over; the ratio is the longest write inside over batched. No document has a row in the
space before (the most the pass has to write). The writer's documents have no row there either.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import report
from bench.harness import machine
from services.core.lifecycle import Lifecycle
from shared.model import PUBLIC_PRINCIPAL, DocKey, SpaceInfo, StoredDoc
from shared.ports import StoreOfRecord

REPO = Path(__file__).resolve().parents[1]
# the other process's writer: one document every 20 ms, printing how long each took
WRITER = """
import sys, time
from shared.adapters.postgres_store import PostgresStore
from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from pathlib import Path
where = sys.argv[1]
store = PostgresStore(where, pool_size=1) if where.startswith("postgres") else SqliteStore(Path(where))
print("ready", flush=True)
i = 0
while True:
    t0 = time.perf_counter()
    store.put_docs([StoredDoc(DocKey("t", "w", f"p{i}"), {"title": "w"}, [PUBLIC_PRINCIPAL], None, f"p{i}",
                              time.time())], [])
    print(time.perf_counter() - t0, flush=True)
    i += 1
    time.sleep(0.02)
"""


def _spaces(what: str, now: float) -> tuple[list[SpaceInfo], SpaceInfo, str, SpaceInfo]:
    """The tenant's spaces before, the space made active, its state before, and the one retired."""
    if what == "realign":
        before = [SpaceInfo("t", "core", "m", 2, "retired", 1.0, 1.0, retired_at=2.0),
                  SpaceInfo("t", "v2", "m2", 3, "active", 2.0, 2.0)]
        return before, SpaceInfo("t", "core", "m", 2, "active", 1.0, now), "retired", SpaceInfo(
            "t", "v2", "m2", 3, "retired", 2.0, 2.0, retired_at=now)
    before = [SpaceInfo("t", "core", "m", 2, "active", 1.0, 1.0), SpaceInfo("t", "v2", "m2", 3, "building", 2.0)]
    return before, SpaceInfo("t", "v2", "m2", 3, "active", 2.0, now), "building", SpaceInfo(
        "t", "core", "m", 2, "retired", 1.0, 1.0, retired_at=now)


def _load(store: StoreOfRecord, docs: int, what: str) -> None:
    with store._lc_tx() as conn:  # type: ignore[attr-defined]
        if hasattr(conn, "executemany"):  # sqlite3
            conn.executemany("INSERT INTO docs VALUES (?,?,?,?,?,?,?,?,?)",
                             (("t", "c", f"{i:08d}", '{"title": "x"}', '["*"]', None, "{}", f"h{i}", 1.0)
                              for i in range(docs)))
        else:
            conn.execute("INSERT INTO docs SELECT 't', 'c', lpad(i::text, 8, '0'), '{\"title\": \"x\"}', "
                         "'[\"*\"]', NULL, '{}', 'h' || i, 1.0 FROM generate_series(0, %s) i", (docs - 1,))
    for info in _spaces(what, 0.0)[0]:
        store.put_tenant_space(info)


@contextmanager
def _writer(kind: str, store: StoreOfRecord, where: str) -> Iterator[list[float]]:
    took: list[float] = []
    if kind == "process":
        proc = subprocess.Popen([sys.executable, "-c", WRITER, where], stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        try:
            time.sleep(0.3)
            yield took
            time.sleep(0.3)
        finally:
            proc.kill()
            out, _ = proc.communicate()
            took += [float(x) for x in out.split()[1:]]  # the first write opens the connection
        return
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            store.put_docs([StoredDoc(DocKey("t", "w", f"p{i}"), {"title": "w"}, [PUBLIC_PRINCIPAL], None, f"p{i}",
                                      time.time())], [])
            took.append(time.perf_counter() - t0)
            i += 1
            time.sleep(0.02)

    t = threading.Thread(target=write)
    t.start()
    try:
        time.sleep(0.3)
        yield took
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()


def run(open_copy: Callable[[str], tuple[StoreOfRecord, str]], what: str, mode: str, writer: str) -> dict[str, Any]:
    store, where = open_copy(f"{what}-{mode}")
    with _writer(writer, store, where) as took:
        t0 = time.perf_counter()
        since = None
        if mode == "batched":
            life = Lifecycle.__new__(Lifecycle)  # the batch loops need only the store: no scheduler here
            life.store = store
            since = (life.realign_rows if what == "realign" else life.fill_rows)("t", "core" if what == "realign"
                                                                                 else "v2")
        t1 = time.perf_counter()
        now = time.time()
        _, to, expect, retire = _spaces(what, now)
        store.switch_space(to, expect, retire, now, fill_rows=what == "fill",
                           filled_since=since if what == "fill" else None,
                           realigned_since=since if what == "realign" else None)
        t2 = time.perf_counter()
    return {"what": what, "mode": mode, "batches_s": round(t1 - t0, 2), "cutover_s": round(t2 - t1, 3),
            "longest_write_s": round(max(took, default=0.0), 3), "writes": len(took)}


def main(docs: int, store_kind: str, writer: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="vibe-cutover-writes-"))
    rows: list[dict[str, Any]] = []
    with _stores(store_kind, root, docs) as open_copy:
        for what in ("realign", "fill"):
            for mode in ("inside", "batched"):
                rows.append(run(open_copy, what, mode, writer))
                print(rows[-1], flush=True)
    ratios = {what: round(next(r for r in rows if r["what"] == what and r["mode"] == "inside")["longest_write_s"]
                          / max(next(r for r in rows if r["what"] == what and r["mode"] == "batched")
                                ["longest_write_s"], 1e-3), 1) for what in ("realign", "fill")}
    doc = {"name": f"cutover-writes-{store_kind}-{writer}", "machine": machine(), "docs": docs, "store": store_kind,
           "writer": writer, "rows": rows, "longest_write_ratio": ratios,
           "command": f"python -m bench.cutover_writes --docs {docs} --store {store_kind} --writer {writer}"}
    md = (f"# A tenant's writes during a cut-over's pass, {docs:,} documents, {store_kind}, writer: {writer}\n\n"
          + report.table(["pass", "mode", "batches s", "cut-over s", "longest write s", "writes"],
                         [[r["what"], r["mode"], r["batches_s"], r["cutover_s"], r["longest_write_s"], r["writes"]]
                          for r in rows])
          + f"\nLongest write, inside / batched: {ratios}\n")
    return report.write(doc, md)


@contextmanager
def _stores(kind: str, root: Path, docs: int) -> Iterator[Callable[[str], tuple[StoreOfRecord, str]]]:
    """Opens a fresh copy of the loaded store per run."""
    if kind == "sqlite":
        from shared.adapters.sqlite_store import SqliteStore

        for what in ("realign", "fill"):
            store = SqliteStore(root / f"base-{what}.db")
            _load(store, docs, what)
            store._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            store.close()

        def copy(name: str) -> tuple[StoreOfRecord, str]:
            path = root / f"{name}.db"
            shutil.copy(root / f"base-{name.split('-')[0]}.db", path)
            return SqliteStore(path), str(path)

        yield copy
        return
    from harness.postgres_server import postgres_server
    from shared.adapters.postgres_store import PostgresStore

    with postgres_server() as srv:
        def fresh(name: str) -> tuple[StoreOfRecord, str]:  # loaded anew: a database copy is no faster
            url = srv.create_database(name.replace("-", "_"))
            store = PostgresStore(url, pool_size=4)
            _load(store, docs, name.split("-")[0])
            return store, url

        yield fresh


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--writer", choices=("thread", "process"), default="process")
    a = ap.parse_args()
    main(a.docs, a.store, a.writer)
