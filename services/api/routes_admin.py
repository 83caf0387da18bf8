"""Admin and ops endpoints (V§8): scope `admin`, always within the key's tenant."""

from __future__ import annotations

import time
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.api.auth import require
from services.api.bodies import json_body
from services.api.writes import check_collection
from services.planner.planner import semantic_projection
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus, SidecarEntry
from services.wiring import Container

router = APIRouter()
REQUEUE_FROM = (SemanticStatus.NONE, SemanticStatus.STALE, SemanticStatus.FAILED)


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


async def _optional_body(request: Request) -> dict[str, Any]:
    if not int(request.headers.get("content-length") or 0):
        return {}
    body = await json_body(request, 65_536)
    if not isinstance(body, dict):
        raise invalid("body must be a JSON object")
    return body


def reindex(c: Container, tenant: str, collection: str | None) -> int:
    """Queue every document of the tenant (or collection) that has no current vector."""
    space = c.settings.space
    keys = list(c.store.collection_keys(tenant, collection))
    sides = c.store.sidecars(keys, space)
    cold = [k for k in keys if k in sides and sides[k].status in REQUEUE_FROM]
    moved = set(c.store.set_status(cold, space, SemanticStatus.QUEUED, only_from=REQUEUE_FROM))
    jobs = [EmbedJob(k, space, sides[k].content_hash, priority="bulk") for k in cold if k in moved]
    c.queue.enqueue(jobs)
    return len(jobs)


def _check_space(c: Container, body: dict[str, Any]) -> None:
    space = body.get("space")
    if space is not None and space != c.settings.space:
        raise VibeError(ErrorCode.NOT_FOUND, f"unknown space {str(space)[:64]!r}")


@router.post("/semantic/reindex")
async def post_reindex(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    body = await _optional_body(request)
    _check_space(c, body)
    collection = body.get("collection")
    if collection is not None:
        check_collection(str(collection))
    n = await run_in_threadpool(reindex, c, p.tenant, collection)
    return JSONResponse({"queued": n, "collection": collection, "space": c.settings.space}, status_code=202)


@router.post("/semantic/promote")
async def post_promote(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    body = await _optional_body(request)
    collection = body.get("collection")
    if not isinstance(collection, str):
        raise invalid("collection is required", field="collection")
    check_collection(collection)
    c.store.promote(p.tenant, collection)
    c.docs.eager.add((p.tenant, collection))
    n = await run_in_threadpool(reindex, c, p.tenant, collection)
    return JSONResponse({"collection": collection, "mode": "eager", "queued": n})


@router.get("/semantic/status")
async def get_status(request: Request, collection: str, _id: str,
                     p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    key = DocKey(p.tenant, collection, _id)
    doc = await run_in_threadpool(c.store.get_doc, key)
    if doc is None:
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")
    side = await run_in_threadpool(c.store.sidecar, key, c.settings.space)
    return JSONResponse(semantic_projection(side, c.settings.space))


@router.get("/semantic/coverage")
async def get_coverage(request: Request, collection: str | None = None,
                       p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    cov = await run_in_threadpool(c.store.coverage, p.tenant, collection, c.settings.space)
    return JSONResponse({"collection": collection, "space": c.settings.space, **cov})


@runtime_checkable
class _ReconciledQueue(Protocol):
    """What the Celery queue can tell about the reconciler (the in-process queue has no
    lost messages to reconcile: its `queued` rows are re-enqueued on start)."""

    def reconcile_report(self, tenant: str) -> dict[str, object]: ...

    def pending_job_keys(self, tenant: str) -> set[tuple[str, ...]] | None: ...


def _stuck(c: Container, tenant: str) -> list[SidecarEntry]:
    """This tenant's `queued` rows with no progress for longer than the reconciler's bound."""
    rows = c.store.keys_in_status(c.settings.space, [SemanticStatus.QUEUED], limit=c.settings.reconcile_batch)
    cutoff = time.time() - c.settings.reconcile_stuck_seconds
    return [r for r in rows if r.key.tenant == tenant and r.updated_at < cutoff]


@router.get("/semantic/queueDepth")
async def get_queue_depth(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    depth = await run_in_threadpool(c.queue.depth, p.tenant)  # this tenant's jobs only
    broker = "unreachable" if depth.pop("unreachable", 0) else "ok"
    queued = await run_in_threadpool(c.store.queued_count, c.settings.space, p.tenant)
    return JSONResponse({**depth, "total": sum(depth.values()), "queuedInStore": queued, "broker": broker})


def _lag(c: Container, tenant: str) -> dict[str, object]:
    oldest = c.store.oldest_queued(c.settings.space, tenant)
    pending = [ch for ch in c.store.changes_since(c.follower.seq, limit=100_000) if ch.key.tenant == tenant]
    out: dict[str, object] = {
        "oldestQueuedAgeSeconds": round(time.time() - oldest, 3) if oldest else 0.0,
        "queued": c.store.queued_count(c.settings.space, tenant),
        "indexFollowerLag": len(pending),
        "stuckQueued": len(_stuck(c, tenant)),
        "stuckAfterSeconds": c.settings.reconcile_stuck_seconds,
    }
    if isinstance(c.queue, _ReconciledQueue):
        out["reconciler"] = c.queue.reconcile_report(tenant)
    return out


@router.get("/semantic/lag")
async def get_lag(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(_lag, _c(request), p.tenant))


def _mismatch(c: Container, tenant: str) -> dict[str, object]:
    """Sidecar says ready but no vector of record exists (should never happen); and, with the
    Celery queue, `queued` rows that no pending job covers (what the reconciler will re-enqueue)."""
    space = c.settings.space
    ready = c.store.keys_in_status(space, [SemanticStatus.READY], limit=1_000_000)
    mine = [s for s in ready if s.key.tenant == tenant]
    missing = [s.key.ref for s in mine if c.store.vector_for_hash(tenant, s.content_hash, space) is None]
    out: dict[str, object] = {"ready": len(mine), "missingVectors": len(missing), "examples": missing[:20]}
    if isinstance(c.queue, _ReconciledQueue):
        pending = c.queue.pending_job_keys(tenant)
        if pending is None:
            out["queuedWithoutJob"] = None  # the broker cannot be asked right now
            return out
        queued = c.store.keys_in_status(space, [SemanticStatus.QUEUED], limit=c.settings.reconcile_batch)
        orphans = [r.key.ref for r in queued if r.key.tenant == tenant
                   and EmbedJob(r.key, space, r.content_hash).job_key not in pending]
        out.update(queuedWithoutJob=len(orphans), queuedWithoutJobExamples=orphans[:20])
    return out


@router.get("/semantic/mismatch")
async def get_mismatch(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(_mismatch, _c(request), p.tenant))


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    c = _c(request)
    return JSONResponse({"status": "ready", "embedder": c.embedder.model_id, "dim": c.embedder.dim})


@router.get("/metrics")
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
