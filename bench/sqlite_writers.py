"""A request's write while another thread of the process commits (embedded profile, SQLite).

    python -m bench.sqlite_writers [--seconds 4]

One thread stands for background work that commits again and again (a worker's vector batches,
a scheduler stage, a batch loop): it holds the write lock `hold` ms per transaction (a statement
that runs that long in SQLite, which releases the GIL, as a store's statements do) and waits
`gap` ms between them. Another stands for requests: one `put_docs` of one document every 20 ms,
timed. Each setting runs twice in the same run, alternating: the store as it is (its writers
queue on a ticket lock per database file, `SqliteStore._tx`) and the baseline, SQLite's busy
handler alone (the same store with the lock bypassed). Reported per setting: the request
write's p50/p90/p99/max (ms), how many it completed, and the baseline-to-current ratio of p99.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from bench import report
from bench.harness import machine
from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc

WORK = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ?) SELECT count(*) FROM r"
SETTINGS = ((5.0, 0.0), (20.0, 0.0), (5.0, 5.0), (2.0, 1.0))  # (hold ms, gap ms)


class BusyHandlerOnly(SqliteStore):
    """The store before the ticket lock: writers meet only in SQLite's busy handler."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._immediate()


def _steps_for(store: SqliteStore, ms: float) -> int:
    """How many steps of `WORK` take about `ms` here."""
    c = store._conn()
    t0 = time.perf_counter()
    c.execute(WORK, (200_000,)).fetchone()
    return max(1, int(200_000 * ms / ((time.perf_counter() - t0) * 1000)))


def run(store: SqliteStore, hold_ms: float, gap_ms: float, seconds: float) -> dict[str, Any]:
    steps = _steps_for(store, hold_ms)
    stop = threading.Event()
    took: list[float] = []
    background = [0]

    def committer() -> None:
        while not stop.is_set():
            with store._tx() as c:
                c.execute(WORK, (steps,)).fetchone()  # the transaction's work, in SQLite (no GIL)
            background[0] += 1
            if gap_ms:
                time.sleep(gap_ms / 1000)

    def requests() -> None:
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            store.put_docs([StoredDoc(DocKey("t", "c", str(i)), {"title": "x"}, [PUBLIC_PRINCIPAL], None,
                                      f"h{i}", 1.0)], [])
            took.append((time.perf_counter() - t0) * 1000)
            i += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=committer), threading.Thread(target=requests)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return {"writes": len(took), "p50": report.percentile(took, 0.5), "p90": report.percentile(took, 0.9),
            "p99": report.percentile(took, 0.99), "max": round(max(took), 2), "background_txns": background[0]}


def main(seconds: float) -> Path:
    root = Path(tempfile.mkdtemp(prefix="vibe-sqlite-writers-"))
    rows: list[dict[str, Any]] = []
    for n, (hold, gap) in enumerate(SETTINGS):
        row: dict[str, Any] = {"hold_ms": hold, "gap_ms": gap}
        order = (("current", SqliteStore), ("baseline", BusyHandlerOnly))
        for name, cls in order if n % 2 == 0 else order[::-1]:
            store = cls(root / f"{name}-{n}.db")
            row[name] = run(store, hold, gap, seconds)
            store.close()
            print(f"hold {hold} ms, gap {gap} ms, {name}: {row[name]}", flush=True)
        row["p99_ratio"] = round(row["baseline"]["p99"] / max(row["current"]["p99"], 0.01), 1)
        rows.append(row)
    doc = {"name": "sqlite-writers", "machine": machine(), "seconds": seconds, "rows": rows,
           "command": f"python -m bench.sqlite_writers --seconds {seconds}"}
    md = ("# A request's write while another thread commits (SQLite)\n\n"
          + report.table(["hold ms", "gap ms", "busy handler p50/p99/max ms (writes)",
                          "ticket lock p50/p99/max ms (writes)", "p99 ratio"],
                         [[r["hold_ms"], r["gap_ms"],
                           f"{r['baseline']['p50']}/{r['baseline']['p99']}/{r['baseline']['max']} "
                           f"({r['baseline']['writes']})",
                           f"{r['current']['p50']}/{r['current']['p99']}/{r['current']['max']} "
                           f"({r['current']['writes']})",
                           r["p99_ratio"]] for r in rows]))
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="how long each run lasts")
    main(ap.parse_args().seconds)
