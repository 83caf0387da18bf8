"""Admin and ops endpoints: scope `admin`, always within the key's tenant."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import iterate_in_threadpool

from services.api import ledger as ledger_api
from services.api.auth import require
from services.api.readiness import checks_of, not_ready_body
from services.api.render import iso_ms, semantic_projection
from services.api.schemas import (
    ANY_COLLECTION_NAME,
    AUTHENTICATED,
    METRICS_TEXT,
    OPTIONAL_BEARER,
    Coverage,
    DocStatus,
    ErrorBody,
    Health,
    Lag,
    Mismatch,
    QueueDepth,
    Readiness,
    errors,
    ok,
)
from services.container import Container
from services.core.content_view import checked_hash, content_view
from shared.errors import ErrorCode, VibeError
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus
from shared.names import check_collection_name
from shared.spaces import embedding_spaces
from shared.tenant_metrics import TENANT_METRICS

router = APIRouter()
REQUEUE_FROM = (SemanticStatus.NONE, SemanticStatus.STALE, SemanticStatus.FAILED)
MISMATCH_EXAMPLES = 20  # keys listed per kind of disagreement


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


@router.get("/semantic/status", dependencies=AUTHENTICATED, responses={
    **ok(DocStatus, "the document's `__semantic` in the active space and its lifecycle"), **errors(400, 404)})
async def get_status(request: Request, collection: str = Query(description="the document's collection",
                                                                pattern=ANY_COLLECTION_NAME),
                     _id: str = Query(description="the document's id"),
                     contentHash: str | None = Query(  # noqa: N803 - the wire name
                         None, pattern=r"^(blake3|sha256):[0-9a-fA-F]{64}$",
                         description="a content hash to compare with the document's "
                         "(`sha256:<hex>` or `blake3:<hex>`): the answer's `contentMatches`"),
                     p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    check_collection_name(collection)
    given = checked_hash(contentHash)
    key = DocKey(p.tenant, collection, _id)
    doc = await run_in_threadpool(c.store.get_doc, key)
    if doc is None:
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")
    space = await run_in_threadpool(c.spaces.active, p.tenant)
    side = await run_in_threadpool(c.store.sidecar, key, space)
    life = await run_in_threadpool(c.lifecycle.doc_state, key, side)
    view = content_view(doc, side, space, c.docs.embed_fields, given)
    return JSONResponse({**semantic_projection(side, space), **view, "lifecycle": {
        "eager": life.eager, "lastUsedAt": iso_ms(life.last_used_at), "touches": life.touches,
        "pinnedUntil": iso_ms(life.pinned_until), "evictableAt": iso_ms(life.evictable_at)}})


@router.get("/semantic/coverage", dependencies=AUTHENTICATED, responses={
    **ok(Coverage, "documents per semantic state in the active space"), **errors()})
async def get_coverage(request: Request, collection: str | None = Query(
                           None, description="one collection (default: every collection of the tenant)",
                           pattern=ANY_COLLECTION_NAME),
                       p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    if collection is not None:
        check_collection_name(collection)
    space = await run_in_threadpool(c.spaces.active, p.tenant)
    cov = await run_in_threadpool(c.store.coverage, p.tenant, collection, space)
    out: dict[str, object] = {"collection": collection, "space": space, **cov}
    if collection is not None:
        modes = await run_in_threadpool(c.store.collection_modes, p.tenant)
        out["eager"] = any(m.collection == collection and m.mode == "eager" for m in modes)
        out["language"] = c.collection_directory().language(p.tenant, collection)  # a stored setting first
    out["storage"] = await run_in_threadpool(c.store.storage_report, p.tenant)
    return JSONResponse(out)


@runtime_checkable
class _ReconciledQueue(Protocol):
    """A queue that reports its reconciler's last pass: the Celery queue (the beat task) and the
    in-process one (its process's start and scheduler thread)."""

    def reconcile_report(self, tenant: str) -> dict[str, object]: ...


@runtime_checkable
class _ListedQueue(Protocol):
    """A queue that can list the jobs pending for a tenant across every process: the Celery
    queue (Redis). An in-process queue sees only its own process's jobs."""

    def pending_job_keys(self, tenant: str) -> set[tuple[str, ...]] | None: ...


def _stuck_count(c: Container, tenant: str) -> int:
    """This tenant's `queued` rows with no progress for longer than the reconciler's bound: one
    count per space (it read up to a reconcile batch of rows per space and counted them here)."""
    cutoff = c.store.clock() - c.settings.reconcile_stuck_seconds
    return sum(c.store.stuck_count(tenant, space, cutoff) for space in embedding_spaces(c.spaces, tenant))


@router.get("/semantic/queueDepth", dependencies=AUTHENTICATED, responses={
    **ok(QueueDepth, "the tenant's pending embedding jobs"), **errors()})
async def get_queue_depth(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    depth = await run_in_threadpool(c.queue.depth, p.tenant)  # this tenant's jobs only
    broker = "unreachable" if depth.pop("unreachable", 0) else "ok"
    spaces = await run_in_threadpool(embedding_spaces, c.spaces, p.tenant)
    queued = 0
    for space in spaces:
        queued += await run_in_threadpool(c.store.queued_count, space, p.tenant)
    return JSONResponse({**depth, "total": sum(depth.values()), "queuedInStore": queued, "broker": broker})


def _lag(c: Container, tenant: str) -> dict[str, object]:
    # A migration's jobs are lag too: with only the active space counted, a migration whose
    # workers had died showed `queued: 0` here beside 150 jobs in /semantic/queueDepth.
    now = c.store.clock()
    queued: dict[str, int] = {}
    age: dict[str, float] = {}
    for space in embedding_spaces(c.spaces, tenant):
        oldest = c.store.oldest_queued(space, tenant)
        queued[space], age[space] = c.store.queued_count(space, tenant), round(now - oldest, 3) if oldest else 0.0
    pending = c.store.changes_pending(c.follower.applied(tenant), tenant)
    out: dict[str, object] = {
        "oldestQueuedAgeSeconds": max(age.values()),
        "queued": sum(queued.values()),
        "indexFollowerLag": pending,
        "stuckQueued": _stuck_count(c, tenant),
        "stuckAfterSeconds": c.settings.reconcile_stuck_seconds,
        "bySpace": {sp: {"queued": queued[sp], "oldestQueuedAgeSeconds": age[sp]} for sp in queued},
    }
    if isinstance(c.queue, _ReconciledQueue):
        out["reconciler"] = c.queue.reconcile_report(tenant)
    return out


@router.get("/semantic/lag", dependencies=AUTHENTICATED, responses={
    **ok(Lag, "how far embedding and the index follower are behind"), **errors()})
async def get_lag(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(_lag, _c(request), p.tenant))


def _space_dim(c: Container, tenant: str, space: str) -> int | None:
    """The dimension a tenant's space is built with (None: not bound yet, nothing to compare)."""
    if space == c.settings.space:
        return c.embedder.dim
    binding = c.store.tenant_space_binding(tenant, space)
    return binding[1] if binding else None


def _mismatch(c: Container, tenant: str) -> dict[str, object]:
    """Sidecar says ready but no vector of record exists (should never happen), or one of
    another dimension than the space's; and, with the Celery queue, `queued` rows that no
    pending job covers (what the reconciler will re-enqueue). Set-based: a fixed number of
    store statements whatever the tenant's size."""
    space = c.spaces.active(tenant)
    audit = c.store.vector_audit(tenant, space, _space_dim(c, tenant, space), MISMATCH_EXAMPLES)
    out: dict[str, object] = {"ready": audit.ready, "missingVectors": audit.missing,
                              "examples": [k.ref for k in audit.missing_examples],
                              "wrongDimension": audit.wrong_dim,
                              "wrongDimensionExamples": [k.ref for k in audit.wrong_dim_examples]}
    if isinstance(c.queue, _ListedQueue):
        pending = c.queue.pending_job_keys(tenant)
        if pending is None:
            out["queuedWithoutJob"] = None  # the broker cannot be asked right now
            return out
        # Bounded by the reconciler's batch: the rows it would look at next.
        queued = c.store.keys_in_status(space, [SemanticStatus.QUEUED], limit=c.settings.reconcile_batch,
                                        tenant=tenant)
        orphans = [r.key.ref for r in queued if r.key.tenant == tenant
                   and EmbedJob(r.key, space, r.content_hash).job_key not in pending]
        out.update(queuedWithoutJob=len(orphans), queuedWithoutJobExamples=orphans[:MISMATCH_EXAMPLES])
    return out


@router.get("/semantic/mismatch", dependencies=AUTHENTICATED, responses={
    **ok(Mismatch, "index and store disagreements (0 when healthy)"), **errors()})
async def get_mismatch(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(_mismatch, _c(request), p.tenant))


@router.get("/healthz", responses={**ok(Health, "the process is up"), **errors(authenticated=False)})
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", responses={
    **ok(Readiness, "ready to serve: every required check passed"), **errors(authenticated=False),
    503: {"model": ErrorBody, "description": "not_ready: `details.failed` names the required checks that failed, "
                                             "`details.checks` says why"}})
async def readyz(request: Request) -> JSONResponse:
    c = _c(request)
    outcomes = await run_in_threadpool(request.app.state.readiness.run, checks_of(c))
    checks = {name: o.json() for name, o in outcomes.items()}
    failed = [name for name, o in outcomes.items() if o.required and not o.ok]
    if failed:
        why = "; ".join(f"{name}: {outcomes[name].error}" for name in failed)
        return JSONResponse(not_ready_body(f"not ready: {why}", {"failed": failed, "checks": checks}), status_code=503)
    return JSONResponse({"status": "ready", "ready": True, "embedder": c.embedder.model_id, "dim": c.embedder.dim,
                         "checks": checks})


@router.get("/metrics", response_class=PlainTextResponse, openapi_extra=OPTIONAL_BEARER,
            responses={**METRICS_TEXT, **errors(401, authenticated=False, json_route=False)})
async def metrics(request: Request) -> Response:
    """Prometheus text. With VIBE_METRICS_TOKEN set, only `Authorization: Bearer <token>` is
    answered (Prometheus: `authorization.credentials_file`); unset, anyone who reaches the
    port may scrape, as before."""
    _metrics_token(request)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def _metrics_token(request: Request) -> None:
    import hmac

    token = _c(request).settings.metrics_token
    if token:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise VibeError(ErrorCode.UNAUTHORIZED, "metrics need the metrics token (Authorization: Bearer ...)")


@router.get("/metrics/tenants", response_class=PlainTextResponse, openapi_extra=OPTIONAL_BEARER,
            responses={**METRICS_TEXT, **errors(401, 404, authenticated=False, json_route=False)})
async def tenant_metrics(request: Request) -> Response:
    """The agent tools' `tool_calls_total`, `embedding_latency_seconds` and
    `bm25_latency_seconds` labelled by tenant (shared/tenant_metrics.py), kept off
    `/metrics`; 404 unless VIBE_MCP_TENANT_METRICS is `hashed` or `name`. Same token rule as
    `/metrics`."""
    _metrics_token(request)
    if _c(request).settings.mcp_tenant_metrics == "off":
        raise VibeError(ErrorCode.NOT_FOUND, "tenant metrics are off (VIBE_MCP_TENANT_METRICS)")
    return Response(TENANT_METRICS.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get("/semantic/ledger", dependencies=AUTHENTICATED, responses={
    200: {"model": ledger_api.LedgerPage, "description": (
        "the tenant's provider calls, one row per call per document, oldest first (with `format=ndjson` "
        f"or `Accept: {ledger_api.NDJSON}`: every matching row, one JSON object a line)"),
        "content": {ledger_api.NDJSON: {"schema": {"type": "string"}}}},
    **errors(400)})
async def get_ledger(request: Request,
                     collection: str | None = Query(None, description="one collection", pattern=ANY_COLLECTION_NAME),
                     _id: str | None = Query(None, min_length=1, max_length=256, description="one document"),
                     since: str | None = Query(None, max_length=48, pattern=ledger_api.SINCE_PATTERN, description=(
                         "rows from this time on: ISO 8601 (UTC when no zone is given) or epoch seconds")),
                     limit: int = Query(100, json_schema_extra={"minimum": 1, "maximum": ledger_api.MAX_LIMIT},
                                        description="rows per page"),
                     cursor: str | None = Query(None, pattern=ledger_api.CURSOR_PATTERN,
                                                description="`nextCursor` of the previous page"),
                     format: str | None = Query(None, pattern="^(json|ndjson)$",  # noqa: A002 - the wire name
                                                description="`ndjson`: export every matching row as NDJSON"),
                     p: Principal = Depends(require("admin"))) -> Response:
    c = _c(request)
    ledger_api.check_filters(collection, _id, limit)
    after, start = ledger_api.parse_cursor(cursor), ledger_api.parse_since(since)
    if format not in (None, "json", "ndjson"):
        raise VibeError(ErrorCode.INVALID_PARAMS, "format must be json or ndjson", {"field": "format"})
    store = c.ledger()
    if format == "ndjson" or (format is None and ledger_api.NDJSON in request.headers.get("accept", "")):
        rows = ledger_api.export(store, p.tenant, collection, _id, start, after)
        return StreamingResponse(iterate_in_threadpool(rows), media_type=ledger_api.NDJSON)
    body = await run_in_threadpool(ledger_api.page, store, p.tenant, collection, _id, start, after, limit,
                                   c.settings.ledger_retention_days)
    return JSONResponse(body)
