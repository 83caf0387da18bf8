"""readOnce: one JSON answer, or an SSE stream
`lexical → (rerank) → warming → (semantic → (rerank))* → done`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse

from services.api import cursors
from services.api.auth import principal_of, require
from services.api.bodies import json_body, parse_model
from services.api.read_similar import NODES, authorize_vector, checked_vector, scope_of
from services.api.render import answer_body, semantic_projection, warming_body
from services.api.rerank_choice import choose_reranker
from services.api.schemas import (
    AUTHENTICATED,
    READ_SSE,
    ExplainAnswer,
    ReadBody,
    ReadIn,
    body,
    errors,
)
from services.api.schemas.read import DOMAIN_HINT_PATTERN, MAX_DOMAIN_HINT_CHARS, ReadOnceAnswer
from services.container import Container
from services.core.documents import check_doc_id
from services.core.edge_access import edge_visible
from services.planner import flow
from services.planner.answer import Answer, Warming
from services.planner.explain import explained
from services.planner.planner import ReadRequest, ReadSession
from shared.edges import EDGES
from shared.errors import ErrorCode, VibeError, invalid
from shared.filters import FilterError, parse_filter
from shared.metrics import METRICS
from shared.model import DocKey, Principal
from shared.names import check_collection_name, check_field_name

router = APIRouter()
log = logging.getLogger("vibe.api")


def to_request(body: ReadBody, c: Container, offset: int = 0, p: Principal | None = None) -> ReadRequest:
    """The planner's request; `p`: the caller, whose collection's rerank default applies."""
    s = c.settings
    sem = body.semantic
    query_text = sem.query.text if sem.query else None
    qd = sem.query.doc if sem.query else None
    query_doc = (qd.collection, qd.id, qd.fields) if qd else None
    query_vector = checked_vector(sem.query.vector if sem.query else None, body.q, sem.strategy,
                                  body.rerank not in (None, False))
    collection = scope_of(body.collection, query_doc, query_vector)  # semantic.nodes: every readable collection
    if not body.q.strip() and not (query_text or "").strip() and query_doc is None and query_vector is None:
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
    check_collection_name(body.collection)  # before it reaches a store, a usage row or a metric
    if query_doc is not None:
        check_collection_name(query_doc[0], field="semantic.query.doc.collection")
        if query_doc[0] == EDGES:  # an edge is no document to find others like (and is never embedded)
            raise invalid("semantic.query.doc names a document, not an edge of semantic.edges",
                          field="semantic.query.doc.collection")
        for name in query_doc[2] or ():
            check_field_name(name, field="semantic.query.doc.fields")
    # Accepted options are never ignored. `global` ("cross-db search") is what
    # collection `any` does: every collection of the key's tenant (never another tenant's).
    if body.global_ and body.collection not in ("any", NODES):  # semantic.nodes is every collection too
        raise invalid("global: true searches every collection of the tenant; give collection 'any' "
                      "(or omit global to search one collection)", field="global")
    hint = sem.domainHint  # mapped to a space in the planner (services/planner/hints.py), or reported unused
    if hint is not None and not (0 < len(hint) <= MAX_DOMAIN_HINT_CHARS and re.match(DOMAIN_HINT_PATTERN, hint)):
        raise invalid(f"semantic.domainHint must be 1-{MAX_DOMAIN_HINT_CHARS} characters, no control characters",
                      field="semantic.domainHint")
    rerank = choose_reranker(body, c, p, query_text)
    try:
        where = parse_filter(body.filter)
    except FilterError as e:
        raise invalid(str(e), field="filter") from None
    fields = body.include.fields
    return ReadRequest(collection, body.q, sem.strategy, query_text, query_doc,
                       # a cursor's page needs candidates down to its end; pages end at VIBE_MAX_K
                       max(sem.k or s.lexical_candidates, min(offset + body.limit, s.max_k)), body.limit,
                       body.include.semantic, body.include.highlights,
                       include_fields=tuple(dict.fromkeys(fields)) if isinstance(fields, list) else fields,
                       where=where, offset=offset, rerank=rerank is not None, rerank_provider=rerank or "default",
                       query_vector=query_vector, domain_hint=hint,
                       graph_depth=body.graph.depth if body.graph is not None else 0)


def check_by_id(body: ReadBody) -> str:
    """A read by `_id` names one document of one collection: options that rank, page or search
    several collections have nothing to act on, so they are refused rather than ignored."""
    doc_id = check_doc_id(body.id)
    if body.collection == "any" or body.global_:
        raise invalid("_id reads one document of one collection: give its collection (not 'any' or global)",
                      field="_id")
    sem = body.semantic
    if body.q.strip() or sem.query is not None:
        raise invalid("_id reads one document: give _id, or q / semantic.query, not both", field="_id")
    for name, given in (("filter", body.filter is not None), ("cursor", body.cursor is not None),
                        ("rerank", body.rerank not in (None, False)), ("graph", body.graph is not None)):
        if given:
            raise invalid(f"_id reads one document: {name} does not apply", field=name)
    check_collection_name(body.collection)
    return doc_id


def read_by_id(c: Container, p: Principal, collection: str, doc_id: str, semantic: bool) -> dict[str, Any]:
    """The document as GET /v1/collections/{collection}/docs/{id} answers it. One the caller may
    not read (ACL or certificates) is answered exactly like a missing one."""
    doc = c.store.get_doc(DocKey(p.tenant, collection, doc_id))
    if doc is None or not edge_visible(c.store, p, doc):  # an edge also needs both its ends readable
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")
    out: dict[str, Any] = {"_id": doc_id, **doc.fields}
    if doc.vibe:
        out["_vibe"] = doc.vibe
    if semantic:
        space = c.spaces.active(doc.key.tenant)
        out["__semantic"] = semantic_projection(c.store.sidecar(doc.key, space), space)
    return out


def _bound(body: ReadBody, request: Request) -> bytes:
    """The cursor binding of this request: its ranking-deciding fields (as parsed, so an
    omitted default and the default spelled out bind alike) and its bearer key."""
    query = body.model_dump(mode="json", by_alias=True, include={"collection", "q", "semantic", "filter", "global_"})
    auth = request.headers.get("authorization", "")
    return cursors.binding(query, auth.partition(" ")[2].strip())


def _with_cursor(payload: dict[str, object], session: ReadSession, c: Container, bound: bytes) -> dict[str, object]:
    """`nextCursor`: the next page of the same query, or null when the ranking ends here (or
    the next page would pass the candidate bound)."""
    end = session.req.offset + session.req.limit
    more = session.has_more and end < c.settings.max_k
    payload["nextCursor"] = cursors.encode(c.settings, end, bound) if more else None
    return payload


@router.post("/v1/read", dependencies=AUTHENTICATED, openapi_extra=body(ReadIn), responses={
    200: {"model": ReadOnceAnswer, "content": {"text/event-stream": READ_SSE},
          "description": "`Accept: application/json`: what is ready now; `Accept: text/event-stream`: the stream; "
                         "with `_id`: that one document (as GET /v1/collections/{collection}/docs/{id})"},
    **errors(400, 404, 413, 503)})
async def read(request: Request, p: Principal = Depends(require("read"))) -> Response:
    c: Container = request.app.state.container
    body = parse_model(ReadBody, await json_body(request, 1_048_576))
    if body.id is not None:  # always one JSON document, also when a stream is asked for
        doc_id = check_by_id(body)
        got = await run_in_threadpool(read_by_id, c, p, body.collection, doc_id, body.include.semantic)
        return Response(orjson.dumps(got), media_type="application/json")
    bound = _bound(body, request)
    offset = cursors.decode(c.settings, body.cursor, bound) if body.cursor is not None else 0
    req = to_request(body, c, offset, p)
    authorize_vector(req, c, p)
    started = time.perf_counter()
    mode = "sse" if "text/event-stream" in request.headers.get("accept", "") else "json"

    def render(a: Answer) -> dict[str, object]:
        return _with_cursor(answer_body(a), session, c, bound)

    def first() -> tuple[ReadSession, dict[str, object] | Exception]:
        """Plan, rank and build the first answer in one trip to a worker thread: each trip
        waits for the event loop and a thread (and the GIL) once more before anything is sent."""
        with c.planner.foreground.serving():  # the pipeline waits for the whole first answer
            opened = c.planner.open(p, req, mode == "sse")
            try:
                # a stream's first event never waits for the reranker: its `rerank` event follows
                return opened, _with_cursor(answer_body(opened.answer(rerank=mode == "json")), opened, c, bound)
            except Exception as e:  # reported in the body (an `error` event for SSE), as a failure after it is
                return opened, e

    session, payload = await run_in_threadpool(first)
    METRICS.read_seconds.labels(strategy=session.strategy, mode=mode).observe(time.perf_counter() - started)
    if mode == "json":
        if isinstance(payload, Exception):
            raise payload
        return Response(orjson.dumps(payload), media_type="application/json")
    events = _while_authorized(request, session, _stream(c, session, started, render, payload))
    return _SessionStream(_hygienic(events, c.settings.stream_heartbeat_seconds, c.settings.stream_retry_ms),
                          lambda: c.planner.finish_left(session), media_type="text/event-stream",
                          headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class _SessionStream(StreamingResponse):
    """An SSE response that calls `on_close` however it ends: read to the end, or its reader
    gone at any point (before the first event, or while a step after it runs). The query's
    touch must not depend on its reader (`Planner.finish_left`)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self._on_close = on_close

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


def _event(name: str, data: Any) -> tuple[str, bytes]:
    return name, orjson.dumps(data)


# Neither the hint nor the heartbeat ends with a blank line: a blank line dispatches an event
# block, and some parsers (httpx-sse) then hand out an empty event once an `id:` was seen.
# `retry:` joins the first event's block; a comment line never dispatches anything.
HEARTBEAT = b": keep-alive\n"


async def _hygienic(events: AsyncIterator[tuple[str, bytes]], heartbeat: float, retry_ms: int) -> AsyncIterator[bytes]:
    """SSE framing (stream hygiene, so clients can resume): a `retry:` hint first, an `id:` on every event
    (1, 2, ... in order), a `: keep-alive` comment whenever `heartbeat` seconds pass without an
    event (proxies and browsers drop a silent connection), and the body always ends after the
    last event: `_stream` turns failures into an `error` event and returns."""
    yield f"retry: {retry_ms}\n".encode()
    n = 0
    it = events.__aiter__()
    pending: asyncio.Task[tuple[str, bytes]] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(it.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=heartbeat)
            if not done:
                yield HEARTBEAT  # the next event is still being computed; the task keeps running
                continue
            try:
                name, data = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            n += 1
            yield b"id: %d\nevent: %s\ndata: %s\n\n" % (n, name.encode(), data)
    finally:
        if pending is not None:  # the client went away mid-wait
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        with contextlib.suppress(Exception):
            await it.aclose()  # type: ignore[attr-defined]


async def _stream(c: Container, session: ReadSession, started: float, render: Callable[[Answer], dict[str, object]],
                  first: dict[str, object] | Exception) -> AsyncIterator[tuple[str, bytes]]:
    """The read's event flow (services/planner/flow.py) as SSE events; a failure ends it with an
    `error` event."""
    try:
        if isinstance(first, Exception):
            raise first
        yield _event("lexical", first)
        s = c.settings
        async for name, item in flow.tail(session, run_in_threadpool, c.signal, s.stream_tail_grace_seconds,
                                          s.stream_wait_seconds):
            yield _event(name, warming_body(item) if isinstance(item, Warming) else render(item))
        METRICS.stream_done_seconds.labels(strategy=session.strategy).observe(time.perf_counter() - started)
    except VibeError as e:
        session.failed = True
        yield _event("error", e.body()["error"])
    except Exception:  # the stream has started: report in-band (never a stack trace), end the body cleanly
        session.failed = True
        log.exception("read stream failed")
        yield _event("error", {"code": ErrorCode.INTERNAL_ERROR.code, "message": "internal error"})


async def _while_authorized(request: Request, session: ReadSession,
                            events: AsyncIterator[tuple[str, bytes]]) -> AsyncIterator[tuple[str, bytes]]:
    """Every event after the first is sent only while the bearer is still valid: a key revoked
    or a token expired while its stream is open ends the stream with an `unauthorized` error
    instead of streaming on to the wait bound. A lookup is a cached dictionary read."""
    sent = 0
    try:
        async for name, data in events:
            if sent:
                try:
                    principal_of(request)
                except VibeError as e:
                    session.failed = True
                    yield _event("error", e.body()["error"])
                    return
            sent += 1
            yield name, data
    finally:
        await events.aclose()  # type: ignore[attr-defined]


@router.get("/v1/explain/{explain_id}", dependencies=AUTHENTICATED, responses={
    200: {"model": ExplainAnswer, "description": (
        "why the result is where it is; for a neighbour a read's `graph` listed, the edge path")},
    **errors(404)})
async def explain(explain_id: str, request: Request, p: Principal = Depends(require("read"))) -> JSONResponse:
    """Answers on every replica until the id's TTL (VIBE_EXPLAIN_TTL_SECONDS), to the caller the
    ranking was made for while they may still read the document; anyone else, like an unknown or
    expired id, gets 404."""
    c: Container = request.app.state.container
    planner = c.planner
    record = await run_in_threadpool(explained, planner.explain, p, explain_id, c.store, c.lexical,
                                     lambda who, collection: planner.search_filter(who, collection))
    if record is None:
        raise VibeError(ErrorCode.NOT_FOUND, "unknown or expired explainId")
    return JSONResponse(record)
