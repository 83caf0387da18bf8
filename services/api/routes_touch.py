"""The touch policy's "auto" follow-up switch, as the store of record holds it (services/planner/
touch_switch.py `FollowUpSwitch`): which of the tenant's collections follow up their first reads and
how. Scope `admin`; every answer is the key's tenant's alone."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
from services.api.schemas import AUTHENTICATED, FOLLOW_UP_COLLECTION, FollowUpView, errors, ok, query
from services.api.timefmt import iso
from services.container import Container
from shared.errors import invalid
from shared.follow_up import switch_state
from shared.model import Principal

router = APIRouter()
MAX_PAGE = 1000
_NAME = re.compile(FOLLOW_UP_COLLECTION["pattern"])


@router.get("/semantic/touch", dependencies=AUTHENTICATED, responses={
    **ok(FollowUpView, "the tenant's collections' \"auto\" follow-up states, by collection name"), **errors(400)},
    openapi_extra={"parameters": [query("after", FOLLOW_UP_COLLECTION, False,
                                        "the previous page's `next`: collections after this name")]})
async def get_touch(request: Request, after: str | None = Query(None, include_in_schema=False),
                    limit: int = Query(100, json_schema_extra={"minimum": 1, "maximum": MAX_PAGE},
                                       description="collections per page"),
                    p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Each collection's "auto" follow-up state as every replica learned it (the store's rows;
    this process's observations not yet written are written first), in collection-name order,
    a page of `limit` at a time."""
    c: Container = request.app.state.container
    if after is not None and not _NAME.fullmatch(after):
        raise invalid("after must be a collection name (a previous page's `next`)", field="after")
    if not 1 <= limit <= MAX_PAGE:
        raise invalid(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    switch, t = c.planner.follow_ups, c.planner.cfg.touch
    await run_in_threadpool(switch.flush)
    rows = await run_in_threadpool(c.store.follow_up_rows, p.tenant, after or "", limit)
    return JSONResponse({
        "followUp": t.follow_up, "after": t.auto_after, "below": t.auto_below,
        "flushEvery": switch.flush_every, "refreshSeconds": switch.refresh_seconds,
        "collections": [{"collection": r.collection, "state": switch_state(r.reads, r.mean, t.auto_after, t.auto_below),
                         "reads": r.reads, "mean": r.mean, "updatedAt": iso(r.updated_at)} for r in rows],
        "next": rows[-1].collection if len(rows) == limit else None,
    })
