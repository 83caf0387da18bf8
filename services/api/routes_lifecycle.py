"""Lifecycle endpoints: promotions, eviction,
backfills (reindex, promotion), provider usage. Scope `admin`; every answer is the key's
tenant's alone."""

from __future__ import annotations

import re
import time
from typing import cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
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
from services.api.writes import check_collection
from services.container import Container
from services.core.backfill import progress, with_state
from shared.costs import utc_day
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import BackfillTask, CollectionMode, Principal, SemanticStatus, SpaceInfo
from shared.model_specs import MAX_DIM
from shared.ports import EmbedderError

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


def iso(ts: float | None) -> str | None:
    """A store time as the API writes it (UTC, seconds); 0 or None: unknown."""
    if not ts:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _start_backfill(c: Container, tenant: str, collection: str | None, kind: str, force: bool,
                    space: str | None = None) -> dict[str, object]:
    """Create the task and run its first step now, so small collections need no wait."""
    backfills = c.lifecycle.backfills
    task = backfills.start(tenant, collection, space or c.spaces.active(tenant), kind, force)
    queued = c.lifecycle.first_step(task)
    # the answer shows the task after its first step: read before the scheduler, woken to go on,
    # can take a second one
    out = {"queued": queued, "task": progress(with_state(task, c.store))}
    c.scheduler.wake()
    return out


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


def _space_coverage(c: Container, tenant: str, space: str) -> dict[str, object]:
    """A space's coverage over all the tenant's documents, those it has no sidecar row for yet as
    `none`: a space being built gets its rows as the migration reaches them, so its report grew
    from 0 to the tenant's size instead (seen: 2,010 of 7,240 documents, "0.55% indexed")."""
    cov = c.store.coverage(tenant, None, space)
    documents = c.store.count_docs(tenant, None)
    unlisted = documents - int(cast(int, cov["total"]))
    if unlisted <= 0:
        return cov
    states = dict(cast(dict[str, int], cov["states"]))
    states[SemanticStatus.NONE.value] += unlisted
    ready = int(cast(int, cov["ready"]))
    return {**cov, "total": documents, "indexedPct": round(100.0 * ready / documents, 2), "states": states}


def _space_body(c: Container, tenant: str, info: SpaceInfo, tasks: list[BackfillTask],
                cold: dict[str, tuple[int, int]]) -> dict[str, object]:
    task = next((t for t in reversed(tasks) if t.space == info.space and t.kind in ("migrate", "rehydrate")), None)
    out: dict[str, object] = {
        "space": info.space, "model": info.model_id, "dim": info.dim, "state": info.state,
        "createdAt": iso(info.created_at), "activatedAt": iso(info.activated_at),
    }
    if info.state == "building":
        out["scope"] = info.scope
        out["toEmbed"] = sum(c.lifecycle.migration_backlog(info).values())
    if info.state not in ("retired", "expiring"):
        out["coverage"] = _space_coverage(c, tenant, info.space)
    else:
        count, nbytes = cold.get(info.space, (0, 0))
        out["state"] = "retired"
        out["retiredAt"] = iso(info.retired_at)
        out["retentionUntil"] = iso(c.lifecycle.retention_until(info.retired_at))
        out["cold"] = {"vectors": count, "bytes": nbytes}
        out["retiring"] = _retiring_body(c, tenant, info.space)
        if info.state == "expiring":
            out["expiring"] = True  # past its retention, being removed: no longer re-activated
    if task is not None:
        out["migration"] = progress(task)
    return out


def _spaces(c: Container, tenant: str) -> list[SpaceInfo]:
    """The tenant's spaces; the configured one is listed as active until a migration replaces it."""
    rows = c.store.tenant_spaces(tenant)
    if not any(r.state == "active" for r in rows) and not any(r.space == c.settings.space for r in rows):
        since = _serving_since(c, tenant) or 0.0  # 0: no document yet (`createdAt` null)
        default = SpaceInfo(tenant, c.settings.space, c.embedder.model_id, c.embedder.dim, "active", since, since)
        rows = [default, *rows]
    return rows


def _serving_since(c: Container, tenant: str) -> float | None:
    """Since when the configured space has served a tenant that never migrated: created and
    active from the tenant's start, which the store keeps no record of; the oldest of its
    documents as they stand now is the nearest the data tells (at least since then; a rewrite
    of that document moves it later). Read, not recorded: a row for the configured space would
    tie the tenant to it, and a tenant without a row follows VIBE_SPACE when an operator
    changes it. A migration records the row with this time (`_start_migration`), and from then
    the time stands. One seek of an index (docs_by_update), whatever the tenant's size."""
    return c.store.oldest_doc_at(tenant)


def list_spaces(c: Container, tenant: str) -> dict[str, object]:
    tasks = c.store.tasks(tenant)
    cold = c.store.cold_by_space(tenant)
    return {"spaces": [_space_body(c, tenant, r, tasks, cold) for r in _spaces(c, tenant)]}


@router.get("/semantic/spaces", dependencies=AUTHENTICATED, responses={
    **ok(Spaces, "the tenant's spaces"), **errors()})
async def get_spaces(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """The tenant's spaces with model, dimension, state, coverage and migration progress."""
    return JSONResponse(await run_in_threadpool(list_spaces, _c(request), p.tenant))


def _binding(c: Container, tenant: str, space: str) -> tuple[str, int] | None:
    """What a tenant's space of this name holds: the configured space is the operator's model
    for every tenant; any other name is the tenant's own (two tenants may both have `core@v2`,
    with different models), bound by the tenant's row once it has one."""
    if space == c.settings.space:
        return c.embedder.model_id, c.embedder.dim
    return c.store.tenant_space_binding(tenant, space)


def start_migration(c: Container, tenant: str, space: str, model: str, dim: int | None,
                    scope: str = "all") -> dict[str, object]:
    """`_start_migration` under a per-tenant lease: two requests at once (two replicas) both
    found no migration, both answered 202 with different scopes, and two tasks ran, one of
    them re-embedding the whole corpus that the other had scoped to what was ready. The second
    request now answers 409 `conflict`."""
    with c.store.lease(f"migration:{tenant}") as mine:
        if not mine:
            raise VibeError(ErrorCode.CONFLICT, "another request is starting a migration for this tenant; look at "
                                                "GET /semantic/spaces and try again")
        return _start_migration(c, tenant, space, model, dim, scope)


def _start_migration(c: Container, tenant: str, space: str, model: str, dim: int | None,
                     scope: str) -> dict[str, object]:
    """A rolling, budgeted re-embed into `space` of every document of the tenant, or with
    scope `ready` of what the active space holds ready now and of eager collections: a lazy tenant
    then pays for what its reads use, not for its whole corpus (the rest is embedded on its first
    touch once the space is active)."""
    active, building = c.spaces.of(tenant)
    if space == active:
        raise VibeError(ErrorCode.CONFLICT, f"{space!r} is already the active space")
    if building and building != [space]:
        raise VibeError(ErrorCode.CONFLICT, f"a migration to {building[0]!r} is in progress; activate it first")
    try:
        emb = c.embedders.prepare(model, dim)
    except (ValueError, RuntimeError, OSError) as e:
        raise invalid(f"cannot use model {model[:80]!r}: {str(e)[:160]}", field="model") from e
    except EmbedderError as e:
        raise VibeError(ErrorCode.EMBEDDER_UNAVAILABLE, f"the provider did not answer for {model[:80]!r}") from e
    if emb is None:  # a local model loading (or exporting to ONNX) in the background, never in this thread
        raise VibeError(ErrorCode.EMBEDDER_UNAVAILABLE, f"model {model[:80]!r} is being prepared on this server; "
                        "try again in a minute", {"retryAfterSeconds": 30})
    model_id, size = emb.model_id, emb.dim
    bound = _binding(c, tenant, space)
    if bound is not None and bound != (model_id, size):  # dim safety: a space never holds two models
        raise VibeError(ErrorCode.DIMENSION_MISMATCH,
                        f"space {space!r} holds vectors of {bound[0]} ({bound[1]} dims), not {model_id} ({size} dims)")
    now = c.store.clock()
    if not any(r.space == active for r in c.store.tenant_spaces(tenant)):
        # the configured space, recorded now: with the time it was listed with (it served
        # before this migration; recorded as `now`, `createdAt` became the migration's start)
        current = c.embedders(active, tenant)
        since = _serving_since(c, tenant)
        since = now if since is None else since
        c.store.put_tenant_space(SpaceInfo(tenant, active, current.model_id, current.dim, "active", since, since))
    was = next((r for r in c.store.tenant_spaces(tenant) if r.space == space), None)
    to = SpaceInfo(tenant, space, model_id, size, "building", now, scope="ready" if scope == "ready" else "all")
    if was is not None and was.state in ("retired", "expiring"):
        # Back to a retired space, gradually: its cold vectors rehydrate without a provider call.
        # Realigned in batches first, the rest in the same transaction, and never once its
        # retention expiry has claimed it.
        gone = VibeError(ErrorCode.CONFLICT, f"{space!r} is past its retention and being removed")
        if was.state == "expiring":
            raise gone
        since = c.lifecycle.realign_rows(tenant, space)
        if c.store.switch_space(to, "retired", None, now, realigned_since=since) is None:
            raise gone
    else:
        c.store.put_tenant_space(to)
    out = _start_backfill(c, tenant, None, "migrate", False, space)
    return {"space": space, "model": model_id, "dim": size, "state": "building", "scope": to.scope, **out}


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


def activate(c: Container, tenant: str, space: str, force: bool) -> dict[str, object]:
    """Cut over: the building space becomes active and the old one is retired, in one store
    transaction, at once whatever the size of the space. The retired space's vectors then move
    to the cold store in the background, in batches (`Lifecycle.cool_retired`, woken now; model
    rollback: re-activating it needs no provider call for content that did not change); they
    are kept for VIBE_RETIRED_SPACE_RETENTION_SECONDS. A retired space is re-activated the same
    way (see `reactivate`)."""
    active, building = c.spaces.of(tenant)
    rows = {r.space: r for r in c.store.tenant_spaces(tenant)}
    if space not in building and space in rows and rows[space].state in ("retired", "expiring"):
        return reactivate(c, tenant, space, active, building, rows)
    if space not in building:
        raise VibeError(ErrorCode.NOT_FOUND, f"no migration to {space[:64]!r} is in progress")
    waiting = sum(c.lifecycle.migration_backlog(rows[space]).values())
    tasks = [t for t in c.store.tasks(tenant, running_only=True) if t.space == space]
    if (tasks or waiting) and not force:
        raise VibeError(ErrorCode.CONFLICT, f"{space!r} is not complete: {waiting} documents still to embed; "
                        "wait for the migration or activate with force", {"waiting": waiting})
    filled_since = c.lifecycle.fill_rows(tenant, space) if force else None
    now = c.store.clock()
    new = rows[space]
    to = SpaceInfo(tenant, space, new.model_id, new.dim, "active", new.created_at, now)
    if c.store.switch_space(to, "building", _retiring(c, tenant, active, rows.get(active), now), now,
                            fill_rows=force, filled_since=filled_since) is None:
        raise VibeError(ErrorCode.CONFLICT, f"{space!r} changed meanwhile (another activation?); look again")
    _cancel_tasks(c, tenant, {space, active}, now)
    c.follower.sync()
    c.scheduler.wake()
    return {"space": space, "state": "active", "reactivated": False, **_retired_body(c, tenant, active, now)}


def _retiring(c: Container, tenant: str, space: str, old: SpaceInfo | None, now: float) -> SpaceInfo:
    """The tenant's current space as it is once retired (the configured space may have no row)."""
    model, dim = (old.model_id, old.dim) if old else (c.embedder.model_id, c.embedder.dim)
    return SpaceInfo(tenant, space, model, dim, "retired", old.created_at if old else now,
                     old.activated_at if old else None, retired_at=now)


def _cancel_tasks(c: Container, tenant: str, spaces: set[str], now: float) -> None:
    for t in c.store.tasks(tenant, running_only=True):
        if t.space in spaces:
            c.store.update_task(t.id, t.cursor, t.examined, t.queued, "cancelled", now)


def _retiring_body(c: Container, tenant: str, space: str) -> dict[str, object]:
    """How far the background move of a retired space's vectors to the cold store is."""
    states = c.store.coverage(tenant, None, space)["states"]
    assert isinstance(states, dict)
    left, moved = int(states.get("ready", 0)), int(states.get("cold", 0))
    return {"toMove": left, "moved": moved, "state": "moving" if left else "done"}


def _retired_body(c: Container, tenant: str, space: str, now: float) -> dict[str, object]:
    retiring = _retiring_body(c, tenant, space)
    count, nbytes = c.store.cold_by_space(tenant).get(space, (0, 0))
    return {"retired": space, "droppedSidecars": 0, "retiredToCold": retiring["moved"],
            "retiredToMove": retiring["toMove"], "retiredCold": {"vectors": count, "bytes": nbytes},
            "retentionUntil": iso(c.lifecycle.retention_until(now))}


def reactivate(c: Container, tenant: str, space: str, active: str, building: list[str],
               rows: dict[str, SpaceInfo]) -> dict[str, object]:
    """Model rollback: a retired space becomes active again and the current one is retired (its
    vectors going cold in turn, in the background). In the same transaction the re-activated
    space's rows are brought up to date with the documents (edited ones are embedded normally,
    new ones get a row), and a budgeted `rehydrate` backfill restores every cold vector from the
    cold store without a provider call; a touch rehydrates what a read needs first. Refused
    while a migration is in progress, once the space's retention expiry has started, and when
    the space's model no longer gives vectors of its dimension (never compared)."""
    if building:
        raise VibeError(ErrorCode.CONFLICT, f"a migration to {building[0]!r} is in progress; activate it first")
    info = rows[space]
    if info.state == "expiring":
        raise VibeError(ErrorCode.CONFLICT, f"{space!r} is past its retention and being removed")
    try:  # the configured space is the operator's model; a local one loads in the background, not here
        emb = c.embedder if space == c.settings.space else c.embedders.prepare(info.model_id, info.dim)
    except (LookupError, ValueError, RuntimeError, OSError) as e:
        raise VibeError(ErrorCode.CONFLICT, f"cannot use the model of {space!r} ({info.model_id[:80]}): "
                        f"{str(e)[:160]}") from e
    except EmbedderError as e:
        raise VibeError(ErrorCode.EMBEDDER_UNAVAILABLE,
                        f"the provider did not answer for {info.model_id[:80]!r}") from e
    if emb is None:
        raise VibeError(ErrorCode.EMBEDDER_UNAVAILABLE, f"the model of {space!r} is being prepared on this server; "
                        "try again in a minute", {"retryAfterSeconds": 30})
    held = (info.model_id, info.dim)
    if (emb.model_id, emb.dim) != held:
        raise VibeError(ErrorCode.DIMENSION_MISMATCH,
                        f"space {space!r} holds vectors of {info.model_id} ({info.dim} dims), but its model now gives "
                        f"{emb.model_id} ({emb.dim} dims)")
    # realigned in batches first: in the cut-over's transaction it held the tenant's writes for
    # the whole pass (1.4-1.6 s at 1M documents on SQLite, bench.cutover_writes); the cut-over
    # then looks only at what was written since
    since = c.lifecycle.realign_rows(tenant, space)
    now = c.store.clock()
    to = SpaceInfo(tenant, space, info.model_id, info.dim, "active", info.created_at, now)
    realigned = c.store.switch_space(to, "retired", _retiring(c, tenant, active, rows.get(active), now), now,
                                     realigned_since=since)
    if realigned is None:  # a retention expiry claimed it first, or another switch did
        raise VibeError(ErrorCode.CONFLICT, f"{space!r} is no longer retired (past its retention, or switched "
                        "meanwhile); look again")
    _cancel_tasks(c, tenant, {active}, now)
    states = c.store.coverage(tenant, None, space)["states"]
    assert isinstance(states, dict)
    backfill = _start_backfill(c, tenant, None, "rehydrate", False, space)
    c.follower.sync()
    return {"space": space, "state": "active", "reactivated": True, **_retired_body(c, tenant, active, now),
            "rehydration": {"fromCold": int(states.get("cold", 0)), "realigned": realigned,
                            "toEmbed": _rollback_embeds(c, tenant, space, states), **backfill}}


def _rollback_embeds(c: Container, tenant: str, space: str, states: dict[str, object]) -> int:
    """What the `rehydrate` backfill embeds with a provider call (services/worker/backfill.py):
    documents edited since the retirement (`stale`), and in eager collections every document
    without a vector; elsewhere a document never embedded waits for its first touch."""
    n = int(states.get("stale", 0))  # type: ignore[call-overload]
    for t, collection in sorted(c.store.promoted()):
        if t == tenant:
            coll = c.store.coverage(tenant, collection, space)["states"]
            assert isinstance(coll, dict)
            n += sum(int(coll.get(s, 0)) for s in ("none", "failed"))
    return n


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
