"""Lifecycle endpoints: promotions, the scheduler's view, eviction, backfills (reindex,
promotion), provider usage, embedding spaces (services/api/spaces.py holds what they do) and
dead letters. Scope `admin`; every answer is the key's tenant's alone."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
from services.api.backfills import _start_backfill
from services.api.bodies import optional_object
from services.api.schemas import (
    AUTHENTICATED,
    COLLECTION_NAME,
    Activated,
    ActivateIn,
    Backfills,
    CollectionIn,
    DeadLetters,
    Demoted,
    Evicted,
    EvictIn,
    Migrating,
    Promoted,
    Promotions,
    ReindexIn,
    Reindexing,
    SchedulerView,
    SpaceIn,
    Spaces,
    Usage,
    body,
    errors,
    ok,
    query,
)
from services.api.spaces import activate, list_spaces, start_migration
from services.api.timefmt import iso
from services.api.writes import check_collection
from services.container import Container
from services.core.backfill import progress
from shared.costs import utc_day
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import CollectionMode, Principal
from shared.model_specs import MAX_DIM

router = APIRouter()
MAX_USAGE_DAYS = 400


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


def _collection(raw: object, required: bool) -> str | None:
    if raw is None and not required:
        return None
    if not isinstance(raw, str):
        raise invalid("collection is required" if raw is None else "collection must be a string", field="collection")
    check_collection(raw)
    return raw


@router.post("/semantic/reindex", status_code=202, dependencies=AUTHENTICATED,
             openapi_extra=body(ReindexIn, required=False),
             responses={**ok(Reindexing, "the backfill started", 202), **errors(400, 404, 413)})
async def post_reindex(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Re-check the collection (or the tenant) against the current policy and embed what
    has no current vector; `force` re-embeds `ready` documents too (a provider call each)."""
    c = _c(request)
    body = await optional_object(request, ReindexIn)
    active, building = await run_in_threadpool(c.spaces.of, p.tenant)
    space = body.get("space", active)
    if space not in (active, *building):
        raise VibeError(ErrorCode.NOT_FOUND, f"unknown space {str(space)[:64]!r}")
    collection = _collection(body.get("collection"), required=False)
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise invalid("force must be true or false", field="force")
    out = await run_in_threadpool(_start_backfill, c, p.tenant, collection, "reindex", force, space)
    return JSONResponse({**out, "collection": collection, "space": space, "force": force}, status_code=202)


@router.post("/semantic/promote", dependencies=AUTHENTICATED, openapi_extra=body(CollectionIn), responses={
    **ok(Promoted, "the collection is eager; its backfill started"), **errors(400, 413)})
async def post_promote(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    collection = _collection((await optional_object(request, CollectionIn)).get("collection"), required=True)
    assert collection is not None
    await run_in_threadpool(c.lifecycle.set_mode, p.tenant, collection, True)
    out = await run_in_threadpool(_start_backfill, c, p.tenant, collection, "promote", False)
    return JSONResponse({"collection": collection, "mode": "eager", **out})


@router.delete("/semantic/promote", dependencies=AUTHENTICATED, responses={
    **ok(Demoted, "the collection is lazy"), **errors(400)}, openapi_extra={"parameters": [
    query("collection", COLLECTION_NAME, True, "the collection to demote")]})
async def delete_promote(request: Request, collection: str | None = Query(None, include_in_schema=False),
                         p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    name = _collection(collection, required=True)
    assert name is not None
    await run_in_threadpool(c.lifecycle.set_mode, p.tenant, name, False)
    return JSONResponse({"collection": name, "mode": "lazy"})


def _mode_body(m: CollectionMode) -> dict[str, object]:
    return {"collection": m.collection, "state": m.mode, "since": iso(m.since), "reason": m.reason,
            "manual": m.manual, "figures": m.figures}


@router.get("/semantic/promotions", dependencies=AUTHENTICATED, responses={
    **ok(Promotions, "each collection's mode and the recent promotion backfills"), **errors()})
async def get_promotions(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    modes = await run_in_threadpool(c.store.collection_modes, p.tenant)
    tasks = await run_in_threadpool(c.store.tasks, p.tenant)
    pinned = await run_in_threadpool(c.store.pinned_count, p.tenant, c.store.clock())
    return JSONResponse({"collections": [_mode_body(m) for m in modes], "pinnedDocuments": pinned,
                         "backfills": [progress(t) for t in tasks if t.kind == "promote"][-50:]})


@router.get("/semantic/scheduler", dependencies=AUTHENTICATED, responses={
    **ok(SchedulerView, "the lifecycle scheduler's policy, its last tick and what it last changed for the tenant"),
    **errors()})
async def get_scheduler(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """When the scheduler last ran (whichever process holds its lease: `serve`'s thread or Celery
    beat) and when and what it last changed for this tenant (collections promoted and demoted,
    documents pinned, vectors evicted, retired spaces removed); never another tenant's."""
    c = _c(request)
    last, mine = await run_in_threadpool(c.store.last_ticks, p.tenant)
    failed = await run_in_threadpool(c.store.last_tick_failures)
    cfg, s = c.lifecycle.cfg, c.settings
    return JSONResponse({
        "intervalSeconds": s.scheduler_interval_seconds, "lastTickAt": iso(last), "lastTickFailed": failed,
        "lastChange": {"at": iso(mine[0]), **mine[1]} if mine else None,
        "policy": {"promoteMinQueries": cfg.promotion.min_queries, "promoteMinHits": cfg.promotion.min_hits,
                   "promoteWindowSeconds": cfg.promotion.window_seconds,
                   "demoteIdleSeconds": cfg.promotion.demote_idle_seconds,
                   "docPromoteTouches": cfg.doc_promote_touches, "docPromoteTtlSeconds": cfg.doc_promote_ttl_seconds,
                   "evictIdleSeconds": cfg.evict_idle_seconds, "coldCodec": cfg.codec,
                   "retiredSpaceRetentionSeconds": cfg.retired_retention_seconds}})


@router.get("/semantic/backfills", dependencies=AUTHENTICATED, responses={
    **ok(Backfills, "the tenant's recent backfill tasks"), **errors()})
async def get_backfills(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    tasks = await run_in_threadpool(_c(request).store.tasks, p.tenant)
    return JSONResponse({"backfills": [progress(t) for t in tasks][-200:]})


@router.post("/semantic/evict", dependencies=AUTHENTICATED, openapi_extra=body(EvictIn), responses={
    **ok(Evicted, "how many vectors went to the cold store"), **errors(400, 413)})
async def post_evict(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Evict now what the scheduler would: this collection's vectors unused for `idleSeconds`
    (default VIBE_EVICT_IDLE_SECONDS), outside eager collections and pinned documents."""
    c = _c(request)
    body = await optional_object(request, EvictIn)
    collection = _collection(body.get("collection"), required=True)
    idle = body.get("idleSeconds", c.settings.evict_idle_seconds)
    if isinstance(idle, bool) or not isinstance(idle, int | float) or not 0 <= idle <= 10 * 365 * 86400:
        raise invalid("idleSeconds must be a number of seconds from 0 to ten years", field="idleSeconds")
    n = await run_in_threadpool(lambda: c.lifecycle.evict(c.lifecycle.clock(), float(idle), p.tenant, collection))
    return JSONResponse({"collection": collection, "evicted": n, "idleSeconds": idle})


def _price(c: Container, model: str) -> float:
    s = c.settings
    if s.embed_cost_per_million_tokens is not None:
        return s.embed_cost_per_million_tokens
    # text-embedding-3-small's list price for the OpenAI API; local and hash models cost no fee
    return 0.02 if model.startswith("openai:") else 0.0


@router.get("/semantic/usage", dependencies=AUTHENTICATED, responses={
    **ok(Usage, "provider calls, tokens and estimated cost by day"), **errors(400)}, openapi_extra={"parameters": [
    query("collection", COLLECTION_NAME, False, "one collection (default: the whole tenant)")]})
async def get_usage(request: Request, collection: str | None = Query(None, include_in_schema=False),
                    days: int = Query(30, json_schema_extra={"minimum": 1, "maximum": MAX_USAGE_DAYS},
                                      description="how many days back"),
                    p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    name = _collection(collection, required=False)
    if not 1 <= days <= MAX_USAGE_DAYS:
        raise invalid(f"days must be between 1 and {MAX_USAGE_DAYS}", field="days")
    rows = await run_in_threadpool(c.store.usage_by_day, p.tenant, name, days)
    model = await run_in_threadpool(c.active_model, p.tenant)
    price = _price(c, model)
    today = utc_day(c.store.clock())
    used = await run_in_threadpool(c.store.tokens_used, p.tenant, today)
    cap = c.settings.tenant_daily_tokens
    return JSONResponse({
        "collection": name, "model": model, "pricePerMillionTokens": price, "currency": "USD",
        "dailyTokenCap": cap or None, "today": {"day": today, "tokens": used,
                                                 "remaining": max(0, cap - used) if cap else None},
        "days": [{**r, "estimatedCost": round(int(r["tokens"]) * price / 1e6, 6)} for r in rows],  # type: ignore[call-overload]
    })


SPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")



@router.get("/semantic/spaces", dependencies=AUTHENTICATED, responses={
    **ok(Spaces, "the tenant's spaces"), **errors()})
async def get_spaces(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """The tenant's spaces with model, dimension, state, coverage and migration progress."""
    return JSONResponse(await run_in_threadpool(list_spaces, _c(request), p.tenant))



@router.post("/semantic/spaces", status_code=202, dependencies=AUTHENTICATED, openapi_extra=body(SpaceIn),
             responses={**ok(Migrating, "the migration started", 202), **errors(400, 409, 413, 503)})
async def post_space(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    body = await optional_object(request, SpaceIn)
    space, model, dim, scope = body.get("space"), body.get("model"), body.get("dim"), body.get("scope", "all")
    if not isinstance(space, str) or not SPACE_RE.match(space):
        raise invalid("space must be 1-64 letters, digits, '_', '.', '@' or '-'", field="space")
    if not isinstance(model, str) or not 0 < len(model) <= 200:
        raise invalid("model must be a model name or id (hash:v1@64, openai:<model>, local:<model>)", field="model")
    if isinstance(dim, float) and dim.is_integer():
        dim = int(dim)  # JSON does not tell 8 from 8.0
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM):
        raise invalid(f"dim must be an integer from 1 to {MAX_DIM}", field="dim")
    if scope not in ("all", "ready"):
        raise invalid("scope must be 'all' or 'ready'", field="scope")
    try:  # by its text alone, before any lease or build (shared/model_specs.py)
        _c(request).embedders.spec(model, dim)
    except ValueError as e:
        raise invalid(f"cannot use model {model[:80]!r}: {str(e)[:200]}", field="model") from e
    out = await run_in_threadpool(start_migration, _c(request), p.tenant, space, model, dim, scope)
    return JSONResponse(out, status_code=202)



@router.post("/semantic/spaces/{space}/activate", dependencies=AUTHENTICATED,
             openapi_extra=body(ActivateIn, required=False),
             responses={**ok(Activated, "the space is active; the old one is retired (its vectors move to the "
                                        "cold store in the background)"),
                        **errors(400, 404, 409, 413, 503)})
async def post_activate(space: str, request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    body = await optional_object(request, ActivateIn)
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise invalid("force must be true or false", field="force")
    return JSONResponse(await run_in_threadpool(activate, _c(request), p.tenant, space, force))


@router.get("/semantic/deadLetters", dependencies=AUTHENTICATED, responses={
    **ok(DeadLetters, "quarantined index changes"), **errors()})
async def get_dead_letters(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Index changes a follower quarantined because the index refused them for good: the documents
    were removed from that index; rewriting them retries."""
    rows = await run_in_threadpool(_c(request).store.dead_letters, p.tenant)
    for r in rows:
        r["at"] = iso(float(r["at"]))  # type: ignore[arg-type]
    return JSONResponse({"deadLetters": rows})

