"""readOnce (DESIGN.md §5, V§7): one JSON answer, or an SSE stream
`lexical → warming → semantic* → done`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse

from services.api.auth import require
from services.api.bodies import ReadBody, json_body, parse_model
from services.api.schemas import AUTHENTICATED, READ_SSE, Explanation, ReadAnswer, ReadIn, body, errors
from services.planner.planner import ReadRequest, ReadSession
from services.wiring import Container
from shared.errors import ErrorCode, VibeError, invalid
from shared.metrics import METRICS
from shared.model import DocKey, Principal

router = APIRouter()
POLL_SECONDS = 0.25  # also catches jobs finished by other processes (Celery workers)


def to_request(body: ReadBody, c: Container) -> ReadRequest:
    s = c.settings
    sem = body.semantic
    query_text = sem.query.text if sem.query else None
    qd = sem.query.doc if sem.query else None
    query_doc = (qd.collection, qd.id, qd.fields) if qd else None
    if not body.q.strip() and not (query_text or "").strip() and query_doc is None:
        raise invalid("q must not be empty (or give semantic.query)", field="q")
    for name, text in (("q", body.q), ("semantic.query.text", query_text), ("semantic.domainHint", sem.domainHint)):
        if text is not None and len(text) > s.max_query_chars:
            raise invalid(f"{name} must be at most {s.max_query_chars} characters", field=name)
    if body.limit > s.max_limit:
        raise invalid(f"limit must be at most {s.max_limit}", field="limit")
    if sem.k is not None and sem.k > s.max_k:
        raise invalid(f"semantic.k must be at most {s.max_k}", field="semantic.k")
    if body.collection != "any" and not body.collection:
        raise invalid("collection must be a name or 'any'", field="collection")
    return ReadRequest(body.collection, body.q, sem.strategy, query_text, query_doc,
                       max(sem.k or s.lexical_candidates, body.limit), body.limit,
                       body.include.semantic, body.include.highlights)


@router.post("/v1/read", dependencies=AUTHENTICATED, openapi_extra=body(ReadIn), responses={
    200: {"model": ReadAnswer, "content": {"text/event-stream": READ_SSE},
          "description": "`Accept: application/json`: what is ready now; `Accept: text/event-stream`: the stream"},
    **errors(400, 404, 413)})
async def read(request: Request, p: Principal = Depends(require("read"))) -> Response:
    c: Container = request.app.state.container
    body = parse_model(ReadBody, await json_body(request, 1_048_576))
    req = to_request(body, c)
    started = time.perf_counter()
    mode = "sse" if "text/event-stream" in request.headers.get("accept", "") else "json"
    session: ReadSession = await run_in_threadpool(c.planner.open, p, req, mode == "sse")
    METRICS.read_seconds.labels(strategy=session.strategy, mode=mode).observe(time.perf_counter() - started)
    if mode == "json":
        payload = await run_in_threadpool(session.payload)
        return Response(orjson.dumps(payload), media_type="application/json")
    return StreamingResponse(_stream(c, session, started), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _event(name: str, data: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def _stream(c: Container, session: ReadSession, started: float) -> AsyncIterator[bytes]:
    try:
        yield _event("lexical", await run_in_threadpool(session.payload))
        if await run_in_threadpool(session.complete_semantic):
            yield _event("semantic", await run_in_threadpool(session.payload))
        await run_in_threadpool(session.touch)
        if session.pending:
            yield _event("warming", session.warming())
        async for chunk in _backfill(c, session):
            yield chunk
        yield _event("done", await run_in_threadpool(session.payload, True))
        METRICS.stream_done_seconds.labels(strategy=session.strategy).observe(time.perf_counter() - started)
    except VibeError as e:
        yield _event("error", e.body()["error"])
    except Exception:  # the stream has started: report in-band, never a stack trace
        yield _event("error", {"code": ErrorCode.INTERNAL_ERROR.code, "message": "internal error"})
        raise


async def _backfill(c: Container, session: ReadSession) -> AsyncIterator[bytes]:
    """Re-rank as workers finish, until nothing this query waits for is pending or the
    wait bound passes."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def listener(keys: list[DocKey]) -> None:
        loop.call_soon_threadsafe(wake.set)

    c.signal.subscribe(listener)
    deadline = time.monotonic() + c.settings.stream_wait_seconds
    try:
        while session.awaits_backfill and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SECONDS)
            wake.clear()
            before = len(session.pending)
            changed = await run_in_threadpool(session.refresh)
            if changed:
                METRICS.backfill_events.inc()
                yield _event("semantic", await run_in_threadpool(session.payload))
            if len(session.pending) != before:
                yield _event("warming", session.warming())
    finally:
        c.signal.unsubscribe(listener)


@router.get("/v1/explain/{explain_id}", dependencies=AUTHENTICATED, responses={
    200: {"model": Explanation, "description": "why the result is where it is"}, **errors(404)})
async def explain(explain_id: str, request: Request, p: Principal = Depends(require("read"))) -> JSONResponse:
    c: Container = request.app.state.container
    record = c.planner.explain.get(p, explain_id)
    doc = None
    if record is not None:
        doc = c.store.get_doc(DocKey(p.tenant, str(record["collection"]), str(record["id"])))
    if record is None or doc is None or not doc.readable_by(p):
        raise VibeError(ErrorCode.NOT_FOUND, "unknown or expired explainId")
    return JSONResponse(record)
