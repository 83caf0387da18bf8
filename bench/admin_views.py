"""The admin and health views timed as one tenant grows (default 10k, 100k, 1M documents).

    python -m bench admin-views --docs 1000000

Embedded store (SQLite) written in bulk through the store adapter (`put_docs`,
`commit_vectors` with 384-dimension vectors, `set_status`), then served in-process on a real
socket (tests/support/in_process.py) and each view asked over HTTP `--repeats` times. The tenant's
mix: ~90% ready with a vector of record, 0.1% ready without one, 0.1% with a vector of another
dimension, 1% queued long ago (stuck), the rest never embedded; another tenant holds 1% more
(never counted). The change log is emptied after the build (the lexical and vector indexes
are not what is measured here, and a follower replaying 1M changes would share the two cores),
and the start's re-enqueue is skipped so the queued rows stay as built.
`/semantic/mismatch` is also timed before/after in-process: `before` is the per-document walk
it replaced (one vector read per ready document), run once per size. Writes
bench/results/admin-views.json.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import machine
from services.api.routes_admin import _mismatch
from services.mcp.files import index_status
from services.wiring import build
from shared.config import ApiKey, Settings
from shared.model import PUBLIC_PRINCIPAL, DocKey, Principal, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import StoreOfRecord
from tests.support.in_process import UvicornThread

S = SemanticStatus
DIM = 384
TENANT, OTHER = "ta", "tb"
SIZES = (10_000, 100_000, 1_000_000)
CHUNK = 5_000
KEYS = [ApiKey(key="k-admin", tenant=TENANT, principals=["user:admin"], scopes=["read", "write", "admin"])]
ADMIN = Principal(TENANT, ("user:admin",), frozenset({"read", "write", "admin"}))
VIEWS = ("/semantic/mismatch", "/semantic/lag", "/semantic/queueDepth", "/semantic/coverage",
         "/semantic/coverage?collection=c0", "/semantic/status?collection=c0&_id=d0", "/semantic/promotions",
         "/semantic/spaces", "/semantic/backfills", "/semantic/scheduler", "/semantic/usage", "/semantic/ledger",
         "/semantic/deadLetters", "/v1/collections", "/readyz", "/healthz")
RESULTS = Path(__file__).resolve().parent / "results" / "admin-views.json"


def _kind(i: int) -> str:
    """Which state document i is built in (fixed by its number, so every size has the same mix)."""
    r = i % 1000
    return "missing" if r == 0 else "wrongdim" if r == 1 else "queued" if r < 12 else "none" if r >= 910 else "ok"


def grow(store: StoreOfRecord, tenant: str, start: int, stop: int, space: str, at: float) -> None:
    """Documents start..stop-1 of `tenant`, in 20 collections, in their built states."""
    vec, short = [0.01] * DIM, [0.01] * (DIM // 2)
    for lo in range(start, stop, CHUNK):
        ids = range(lo, min(stop, lo + CHUNK))
        docs = [StoredDoc(DocKey(tenant, f"c{i % 20}", f"d{i}"), {"title": f"document {i}", "body": "text " * 8},
                          [PUBLIC_PRINCIPAL], None, f"h{i}", at) for i in ids]
        side = [SidecarEntry(d.key, space, S.QUEUED if _kind(i) != "none" else S.NONE, d.content_hash,
                             updated_at=at + i * 1e-6) for i, d in zip(ids, docs, strict=True)]
        store.put_docs(docs, side)
        kinds = {i: _kind(i) for i in ids}
        store.commit_vectors([(s, vec if kinds[i] == "ok" else short) for i, s in zip(ids, side, strict=True)
                              if kinds[i] in ("ok", "wrongdim")], "hash:v1", now=at)
        store.set_status([s.key for i, s in zip(ids, side, strict=True) if kinds[i] == "missing"], space, S.READY)


def mismatch_before(c: Any, tenant: str) -> dict[str, object]:
    """/semantic/mismatch as it was (git 66eff6e): every ready row read, one vector lookup each."""
    space = c.spaces.active(tenant)
    ready = c.store.keys_in_status(space, [S.READY], limit=1_000_000, tenant=tenant)
    mine = [s for s in ready if s.key.tenant == tenant]
    missing = [s.key.ref for s in mine if c.store.vector_for_hash(tenant, s.content_hash, space) is None]
    return {"ready": len(mine), "missingVectors": len(missing), "examples": missing[:20]}


def _timed(fn: Any, repeats: int) -> dict[str, float]:
    took = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        took.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": round(statistics.median(took), 2), "max_ms": round(max(took), 2)}


def _measure(data: Path, size: int, repeats: int, before: bool) -> dict[str, Any]:
    c = build(Settings(data_dir=data, embedder="hash", embed_dim=DIM, scheduler_enabled=False, workers=1))
    c.requeue_pending = lambda: {"requeued": 0, "repaired": 0}  # type: ignore[method-assign]
    served = UvicornThread(c, KEYS)
    point: dict[str, Any] = {"docs": size, "views": {}}
    try:
        with httpx.Client(base_url=served.base, timeout=600, headers={"Authorization": "Bearer k-admin"}) as http:
            for view in VIEWS:
                r = http.get(view)
                if r.status_code != 200:
                    raise RuntimeError(f"{view}: {r.status_code} {r.text[:300]}")
                point["views"][view] = _timed(lambda v=view: http.get(v), repeats)  # type: ignore[misc]
            point["mismatch_answer"] = http.get("/semantic/mismatch").json()
        point["in_process"] = {"mismatch_after": _timed(lambda: _mismatch(c, TENANT), repeats),
                               "mcp_index_status": _timed(lambda: index_status(c, ADMIN, "c0"), 1)}
        point["store_reports"] = _store_reports(c.store, c.spaces.active(TENANT), repeats, False)
        if before:
            t0 = time.perf_counter()
            old = mismatch_before(c, TENANT)
            point["in_process"]["mismatch_before"] = {"p50_ms": round((time.perf_counter() - t0) * 1000, 2)}
            new = point["mismatch_answer"]
            if (old["ready"], old["missingVectors"]) != (new["ready"], new["missingVectors"]):
                raise AssertionError(f"before {old} and after {new} disagree")
    finally:
        served.stop()
        c.stop()
    return point


def _store_reports(store: StoreOfRecord, space: str, repeats: int, before: bool) -> dict[str, Any]:
    """The views' store reports, called directly (the PostgreSQL store is measured without a
    server in front); with `before`, beside the per-document walk /semantic/mismatch made."""
    out: dict[str, Any] = {}
    if before:
        t0 = time.perf_counter()
        ready = store.keys_in_status(space, [S.READY], limit=1_000_000, tenant=TENANT)
        missing = sum(1 for s in ready if store.vector_for_hash(TENANT, s.content_hash, space) is None)
        out["mismatch_before"] = {"p50_ms": round((time.perf_counter() - t0) * 1000, 2)}
        audit = store.vector_audit(TENANT, space, DIM)
        if (audit.ready, audit.missing) != (len(ready), missing):
            raise AssertionError(f"before {len(ready)}/{missing} and after {audit} disagree")
    cutoff = store.clock()
    cold = "CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END"
    old_cov = (f"SELECT status, reason, {cold} AS cold, COUNT(*) AS n FROM sidecar WHERE tenant=? AND space=? "
               f"GROUP BY status, reason, {cold}")
    return {**out,
            # the tenant's coverage as one GROUP BY over its rows (before migration 6's indexes)
            "coverage_before": _timed(lambda: store._read(old_cov, (TENANT, space)), repeats),  # type: ignore[attr-defined]
            "vector_audit": _timed(lambda: store.vector_audit(TENANT, space, DIM), repeats),
            "coverage": _timed(lambda: store.coverage(TENANT, None, space), repeats),
            "coverage_collection": _timed(lambda: store.coverage(TENANT, "c0", space), repeats),
            "storage_report": _timed(lambda: store.storage_report(TENANT), repeats),
            "stuck_count": _timed(lambda: store.stuck_count(TENANT, space, cutoff), repeats),
            "queued_count": _timed(lambda: store.queued_count(space, TENANT), repeats),
            "count_docs": _timed(lambda: store.count_docs(TENANT, None), repeats)}


def postgres_main(docs: int, repeats: int = 5) -> Path:
    """The same store reports on the PostgreSQL store (a private server), grown to `docs`."""
    from harness.postgres_server import postgres_server
    from shared.adapters.postgres_store import PostgresStore

    points: list[dict[str, Any]] = []
    built, space = 0, "core"
    with postgres_server() as pg:
        store = PostgresStore(pg.create_database("adminviews"), pool_size=4)
        try:
            at = store.clock() - 86_400
            for size in sorted({s for s in SIZES if s < docs} | {docs}):
                t0 = time.perf_counter()
                grow(store, TENANT, built, size, space, at)
                grow(store, OTHER, built // 100, size // 100, space, at)
                build_s, built = round(time.perf_counter() - t0, 1), size
                with store._pool.connection() as conn:  # statistics and visibility, as autovacuum keeps them
                    conn.execute("VACUUM ANALYZE")
                reports = _store_reports(store, space, repeats, True)
                points.append({"docs": size, "build_s": build_s, "reports": reports})
                print(json.dumps({"docs": size, "build_s": build_s, **{k: v["p50_ms"] for k, v in reports.items()}}))
        finally:
            store.close()
    out = RESULTS.with_name("admin-views-postgres.json")
    out.write_text(json.dumps({"name": "admin-views-postgres", "machine": machine(), "dim": DIM, "repeats": repeats,
                               "points": points, "command": f"python -m bench admin-views --postgres --docs {docs}"},
                              indent=1) + "\n")
    return out


def main(docs: int, repeats: int = 5, before_up_to: int = 1_000_000) -> Path:
    data = Path(tempfile.mkdtemp(prefix="vibe-admin-views-")) / "data"
    sizes = sorted({s for s in SIZES if s < docs} | {docs})
    points, built = [], 0
    for size in sizes:
        c = build(Settings(data_dir=data, embedder="hash", embed_dim=DIM, scheduler_enabled=False, workers=1))
        space, at = c.spaces.active(TENANT), c.store.clock() - 86_400  # a day old: the queued rows are stuck
        t0 = time.perf_counter()
        grow(c.store, TENANT, built, size, space, at)
        grow(c.store, OTHER, built // 100, size // 100, space, at)
        build_s = time.perf_counter() - t0
        c.stop()
        with sqlite3.connect(data / "vibe.sqlite3") as db:  # the follower is not measured (module doc)
            db.execute("DELETE FROM changes")
        built = size
        point = _measure(data, size, repeats, before=size <= before_up_to)
        point["build_s"] = round(build_s, 1)
        points.append(point)
        timed = {**point["views"], **point["in_process"], **point["store_reports"]}
        print(json.dumps({"docs": size, "build_s": point["build_s"], **{k: v["p50_ms"] for k, v in timed.items()}}))
        doc = {"name": "admin-views", "machine": machine(), "dim": DIM, "repeats": repeats, "points": points,
               "command": f"python -m bench admin-views --docs {docs} --repeats {repeats}"}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(doc, indent=1) + "\n")  # after each size: a long run's points are kept
    return RESULTS
