"""The tenant's embedding spaces as the admin endpoints change and show them: listing with
coverage and migration progress, starting a migration to a new model, and the cut-over
(activation of a built space, re-activation of a retired one for a model rollback). The routes
in routes_lifecycle.py validate the request and call these."""

from __future__ import annotations

from typing import cast

from services.api.backfills import _start_backfill
from services.api.timefmt import iso
from services.container import Container
from services.core.backfill import progress
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import BackfillTask, SemanticStatus, SpaceInfo
from shared.ports import EmbedderError


def _space_coverage(c: Container, tenant: str, space: str) -> dict[str, object]:
    """A space's coverage over all the tenant's documents, those it has no sidecar row for yet as
    `none`: a space being built gets its rows as the migration reaches them, so counting its rows
    alone would report a fraction of the tenant as the whole (2,010 of 7,240 documents as
    "0.55% indexed")."""
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


def _binding(c: Container, tenant: str, space: str) -> tuple[str, int] | None:
    """What a tenant's space of this name holds: the configured space is the operator's model
    for every tenant; any other name is the tenant's own (two tenants may both have `core@v2`,
    with different models), bound by the tenant's row once it has one."""
    if space == c.settings.space:
        return c.embedder.model_id, c.embedder.dim
    return c.store.tenant_space_binding(tenant, space)


def start_migration(c: Container, tenant: str, space: str, model: str, dim: int | None,
                    scope: str = "all") -> dict[str, object]:
    """`_start_migration` under a per-tenant lease: without it two requests at once (two
    replicas) would both find no migration, both answer 202 with different scopes and start two
    tasks, one re-embedding the whole corpus the other had scoped to what was ready. The second
    request answers 409 `conflict`."""
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
        # the configured space, recorded now with the time it was listed with: it served
        # before this migration, so `createdAt` must not become the migration's start
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
    # realigned in batches first: in the cut-over's transaction it would hold the tenant's writes
    # for the whole pass (1.4-1.6 s at 1M documents on SQLite); the cut-over then looks only at
    # what was written since
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
    """What the `rehydrate` backfill embeds with a provider call (services/core/backfill.py):
    documents edited since the retirement (`stale`), and in eager collections every document
    without a vector; elsewhere a document never embedded waits for its first touch."""
    n = int(states.get("stale", 0))  # type: ignore[call-overload]
    for t, collection in sorted(c.store.promoted()):
        if t == tenant:
            coll = c.store.coverage(tenant, collection, space)["states"]
            assert isinstance(coll, dict)
            n += sum(int(coll.get(s, 0)) for s in ("none", "failed"))
    return n
