"""Lifecycle endpoints (DESIGN.md §5 "Lifecycle"; V§4.3, V§8, V§12): promotions, eviction,
backfills (reindex, promotion), provider usage. Scope `admin`; every answer is the key's
tenant's alone."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
from services.api.bodies import json_body
from services.api.writes import check_collection
from services.wiring import Container
from services.worker.backfill import progress, with_state
from services.worker.handlers import utc_day
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import CollectionMode, Principal

router = APIRouter()
MAX_USAGE_DAYS = 400


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


async def _body(request: Request) -> dict[str, Any]:
    if not int(request.headers.get("content-length") or 0):
        return {}
    body = await json_body(request, 65_536)
    if not isinstance(body, dict):
        raise invalid("body must be a JSON object")
    return body


def _collection(raw: object, required: bool) -> str | None:
    if raw is None and not required:
        return None
    if not isinstance(raw, str):
        raise invalid("collection is required" if raw is None else "collection must be a string", field="collection")
    check_collection(raw)
    return raw


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _start_backfill(c: Container, tenant: str, collection: str | None, kind: str, force: bool) -> dict[str, object]:
    """Create the task and run its first step now, so small collections need no wait."""
    backfills = c.lifecycle.backfills
    task = backfills.start(tenant, collection, c.settings.space, kind, force)
    queued = backfills.step(task)
    c.scheduler.wake()
    return {"queued": queued, "task": progress(with_state(task, c.store))}


@router.post("/semantic/reindex")
async def post_reindex(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """V§8: re-check the collection (or the tenant) against the current policy and embed what
    has no current vector; `force` re-embeds `ready` documents too (a provider call each)."""
    c = _c(request)
    body = await _body(request)
    space = body.get("space")
    if space is not None and space != c.settings.space:
        raise VibeError(ErrorCode.NOT_FOUND, f"unknown space {str(space)[:64]!r}")
    collection = _collection(body.get("collection"), required=False)
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise invalid("force must be true or false", field="force")
    out = await run_in_threadpool(_start_backfill, c, p.tenant, collection, "reindex", force)
    return JSONResponse({**out, "collection": collection, "space": c.settings.space, "force": force},
                        status_code=202)


@router.post("/semantic/promote")
async def post_promote(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    collection = _collection((await _body(request)).get("collection"), required=True)
    assert collection is not None
    await run_in_threadpool(c.lifecycle.set_mode, p.tenant, collection, True)
    out = await run_in_threadpool(_start_backfill, c, p.tenant, collection, "promote", False)
    return JSONResponse({"collection": collection, "mode": "eager", **out})


@router.delete("/semantic/promote")
async def delete_promote(request: Request, collection: str | None = None,
                         p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    name = _collection(collection, required=True)
    assert name is not None
    await run_in_threadpool(c.lifecycle.set_mode, p.tenant, name, False)
    return JSONResponse({"collection": name, "mode": "lazy"})


def _mode_body(m: CollectionMode) -> dict[str, object]:
    return {"collection": m.collection, "state": m.mode, "since": _iso(m.since), "reason": m.reason,
            "manual": m.manual, "figures": m.figures}


@router.get("/semantic/promotions")
async def get_promotions(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    modes = await run_in_threadpool(c.store.collection_modes, p.tenant)
    tasks = await run_in_threadpool(c.store.tasks, p.tenant)
    return JSONResponse({"collections": [_mode_body(m) for m in modes],
                         "backfills": [progress(t) for t in tasks if t.kind == "promote"][-50:]})


@router.get("/semantic/backfills")
async def get_backfills(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    tasks = await run_in_threadpool(_c(request).store.tasks, p.tenant)
    return JSONResponse({"backfills": [progress(t) for t in tasks][-200:]})


@router.post("/semantic/evict")
async def post_evict(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Evict now what the scheduler would: this collection's vectors unused for `idleSeconds`
    (default VIBE_EVICT_IDLE_SECONDS), outside eager collections and pinned documents."""
    c = _c(request)
    body = await _body(request)
    collection = _collection(body.get("collection"), required=True)
    idle = body.get("idleSeconds", c.settings.evict_idle_seconds)
    if isinstance(idle, bool) or not isinstance(idle, int | float) or not 0 <= idle <= 10 * 365 * 86400:
        raise invalid("idleSeconds must be a number of seconds from 0 to ten years", field="idleSeconds")
    n = await run_in_threadpool(lambda: c.lifecycle.evict(c.lifecycle.clock(), float(idle), p.tenant, collection))
    return JSONResponse({"collection": collection, "evicted": n, "idleSeconds": idle})


def _price(c: Container) -> float:
    s = c.settings
    if s.embed_cost_per_million_tokens is not None:
        return s.embed_cost_per_million_tokens
    return 0.02 if s.embedder == "openai" else 0.0  # text-embedding-3-small list price; local models cost no fee


@router.get("/semantic/usage")
async def get_usage(request: Request, collection: str | None = None, days: int = 30,
                    p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    name = _collection(collection, required=False)
    if not 1 <= days <= MAX_USAGE_DAYS:
        raise invalid(f"days must be between 1 and {MAX_USAGE_DAYS}", field="days")
    rows = await run_in_threadpool(c.store.usage_by_day, p.tenant, name, days)
    price = _price(c)
    today = utc_day(time.time())
    used = await run_in_threadpool(c.store.tokens_used, p.tenant, today)
    cap = c.settings.tenant_daily_tokens
    return JSONResponse({
        "collection": name, "model": c.embedder.model_id, "pricePerMillionTokens": price, "currency": "USD",
        "dailyTokenCap": cap or None, "today": {"day": today, "tokens": used,
                                                 "remaining": max(0, cap - used) if cap else None},
        "days": [{**r, "estimatedCost": round(int(r["tokens"]) * price / 1e6, 6)} for r in rows],  # type: ignore[call-overload]
    })


@router.get("/semantic/spaces")
async def get_spaces(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """The tenant's spaces (V§2.1): model, dimension, state and coverage. Rolling migrations
    to a new space (POST) are not built yet; the configured space is every tenant's active one."""
    c = _c(request)
    space = c.settings.space
    cov = await run_in_threadpool(c.store.coverage, p.tenant, None, space)
    return JSONResponse({"spaces": [{"space": space, "model": c.embedder.model_id, "dim": c.embedder.dim,
                                     "state": "active", "coverage": cov}]})
