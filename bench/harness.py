"""Drives a served instance the way a user does: HTTP only (bulk ingest, reindex, reads).

The instance is `vibe-semantic serve` in a subprocess (harness/server.py), embedded
profile, with one admin key for the benchmark tenant.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.server import Served

KEY = "k-bench"
TENANT = "bench"
KEYS = [{"key": KEY, "tenant": TENANT, "principals": ["user:bench"], "scopes": ["read", "write", "admin"]}]


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


@contextmanager
def instance(data_dir: Path, embedder: str = "local", env: dict[str, str] | None = None,
             touch: dict[str, Any] | None = None) -> Iterator[Served]:
    """A served instance; `touch`: TouchPolicy fields its reads use instead of the defaults."""
    s = Served(data_dir, env={"VIBE_EMBEDDER": embedder, **(env or {})}, keys=KEYS, touch=touch)
    try:
        yield s
    finally:
        s.stop()


def _chunks(items: list[dict[str, Any]], n: int) -> Iterable[list[dict[str, Any]]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def ingest(s: Served, collection: str, docs: list[dict[str, Any]], batch: int = 1000) -> float:
    """Bulk-load documents; returns seconds. Any rejected document aborts the benchmark."""
    t0 = time.perf_counter()
    with progress() as bar:
        task = bar.add_task(f"ingest {collection}", total=len(docs))
        for part in _chunks(docs, batch):
            r = s.bulk(KEY, collection, part)
            r.raise_for_status()
            if r.json()["rejected"]:
                raise RuntimeError(f"rejected documents: {[x for x in r.json()['results'] if 'error' in x][:3]}")
            bar.advance(task, len(part))
    return time.perf_counter() - t0


def coverage(s: Served, collection: str) -> dict[str, Any]:
    r = s.call("GET", f"/semantic/coverage?collection={collection}", KEY)
    r.raise_for_status()
    return dict(r.json())


def _backfill_state(s: Served, task_id: str) -> str:
    r = s.call("GET", "/semantic/backfills", KEY)
    r.raise_for_status()
    return next((str(t["state"]) for t in r.json()["backfills"] if t["id"] == task_id), "done")


def embed_all(s: Served, collection: str, timeout: float = 1800) -> float:
    """POST /semantic/reindex and wait until its backfill has queued everything and nothing is
    queued any more; returns seconds. (The backfill queues in budgeted steps, so "nothing
    queued" alone can be a pause between two steps of a large collection.)"""
    t0 = time.perf_counter()
    r = s.call("POST", "/semantic/reindex", KEY, {"collection": collection})
    r.raise_for_status()
    task_id = str(r.json()["task"]["id"])
    with progress() as bar:
        cov = coverage(s, collection)
        task = bar.add_task(f"embed {collection}", total=cov["total"])
        while time.perf_counter() - t0 < timeout:
            cov = coverage(s, collection)
            bar.update(task, completed=cov["ready"])
            if cov["states"].get("queued", 0) == 0 and _backfill_state(s, task_id) == "done":
                return time.perf_counter() - t0
            time.sleep(0.5)
    raise TimeoutError(f"embedding did not finish in {timeout}s: {cov}")


def read_ids(s: Served, collection: str, q: str, strategy: str, limit: int = 100) -> list[str]:
    r = s.read(KEY, collection=collection, q=q, limit=limit, semantic={"strategy": strategy})
    r.raise_for_status()
    return [str(x["id"]) for x in r.json()["results"]]


def machine() -> dict[str, Any]:
    import os

    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine()}
