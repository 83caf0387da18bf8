"""The FastAPI app: routers, the one error handler, request metrics, the per-tenant rate limit.

Middleware order, outermost first: Starlette's ServerErrorMiddleware (answers 500 to an
unhandled exception, then re-raises it), `RequestId` (so every answer below, and every log line
written meanwhile, carries the id), `AccessLog`, CORS when configured, `TimedRequests`,
`NoStoreForKeyedRequests`, `TenantRateLimit`, the exception
handlers, the routes. The timing sits outside the rate limit (a 429 is counted) and answers an
unhandled exception itself, as `internal_error` 500 (counted as a 500), which the former
BaseHTTPMiddleware never recorded. It does not re-raise: uvicorn then closed the connection
under the error body and clients saw a connection reset instead of the 500."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from prometheus_client import REGISTRY, Histogram
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Route

from services.api import (
    routes_admin,
    routes_collections,
    routes_docs,
    routes_keys,
    routes_lifecycle,
    routes_read,
    routes_touch,
    routes_ui,
    schemas,
)
from services.api.access_log import AccessLog
from services.api.auth import bind_keys
from services.api.nostore import NoStoreForKeyedRequests
from services.api.ratelimit import ASGIApp, Message, Receive, RequestCost, Scope, Send, TenantRateLimit
from services.api.read_similar import declare_vector_dim
from services.api.readiness import Checker
from services.api.request_id import RequestId
from services.api.rerank_choice import declare_providers
from services.api.route_template import RouteTemplates, leaf_routes
from services.container import Container
from services.core.keyring import KeyRing
from shared.errors import ErrorCode, VibeError
from shared.logging import current_request_id
from shared.metrics import _LATENCY_BUCKETS, METRICS

log = logging.getLogger("vibe.api")
_leaf_routes = leaf_routes  # the name tests/unit/test_openapi.py imports


def error_body(err: VibeError) -> dict[str, object]:
    """The error envelope, with the request's id inside `error` (as `requestId`): what a user
    quotes from an error page or a client log finds the server's lines of that request."""
    body = err.body()
    request_id = current_request_id()
    if request_id is not None:
        inner = body["error"]
        assert isinstance(inner, dict)
        inner["requestId"] = request_id
    return body


def _error(code: ErrorCode, message: str, **details: object) -> JSONResponse:
    return JSONResponse(error_body(VibeError(code, message, dict(details))), status_code=code.status)


async def _vibe_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, VibeError)
    return JSONResponse(error_body(exc), status_code=exc.code.status)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errs = exc.errors()
    first = errs[0] if errs else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return _error(ErrorCode.INVALID_PARAMS, f"{where}: {first.get('msg', 'invalid request')}")


def _allowed_methods(request: Request) -> str:
    """Every method the request's path answers (RFC 9110 `Allow`): the union over all the
    routes whose template matches it (one path may have several routes, one per method)."""
    scope = {**request.scope, "method": "GET"}
    methods: set[str] = set()
    for r in leaf_routes(request.app.router.routes):
        if r.matches(scope)[0] is not Match.NONE:
            methods |= set(getattr(r, "methods", None) or ())
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return _error(ErrorCode.NOT_FOUND, "no such route")
    if exc.status_code == 405:
        allow = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
        body = {"error": {"code": "method_not_allowed", "message": "method not allowed"}}
        if (request_id := current_request_id()) is not None:
            body["error"]["requestId"] = request_id
        return JSONResponse(body, status_code=405, headers={"Allow": allow} if allow else None)
    return _error(ErrorCode.INVALID_PARAMS, str(exc.detail))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return _error(ErrorCode.INTERNAL_ERROR, "internal error")


class Mounted(Protocol):
    """An ASGI endpoint served beside the API with the app's lifespan (MCP's /mcp)."""

    def lifespan(self) -> AbstractAsyncContextManager[None]: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def close(self) -> None: ...


def create_app(container: Container, keys: KeyRing, mcp: Callable[[], Mounted] | None = None) -> FastAPI:
    """The HTTP API; `mcp` (the composition root's) makes the endpoint served at /mcp."""
    bind_keys(keys, container)  # API-made keys and end-user tokens, from the store of record
    mounted = mcp() if mcp is not None else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        container.start()
        # the MCP session manager's task group
        async with mounted.lifespan() if mounted is not None else nullcontext():
            yield
        container.stop()
        if mounted is not None:
            mounted.close()

    app = FastAPI(title="vibe-semantic", version="0.1.0", lifespan=lifespan,
                  # /docs is routes_ui's: Swagger UI from our own copy (no CDN), no key kept in storage;
                  # no /redoc (FastAPI's loads its script and fonts from CDNs)
                  docs_url=None, redoc_url=None, swagger_ui_parameters={"persistAuthorization": False})
    app.state.container = container
    app.state.keys = keys
    app.state.readiness = Checker()
    app.add_exception_handler(VibeError, _vibe_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    # Every documents route authenticates: declare the bearer scheme on them (schemas.AUTHENTICATED
    # never refuses; the other routers declare it per route, as some of theirs are open).
    # ... and checks the collection name of its path (shared/names.py) before anything reads it.
    app.include_router(routes_docs.router, dependencies=[*schemas.AUTHENTICATED, *routes_collections.NAMED])
    app.include_router(routes_collections.router)
    for r in (routes_read.router, routes_admin.router, routes_lifecycle.router, routes_touch.router,
              routes_keys.router):
        app.include_router(r)
    app.include_router(routes_ui.router)  # the /ui page's static build: no key, no data
    if mounted is not None:
        app.router.routes.append(Route("/mcp", endpoint=mounted, methods=["GET", "POST", "DELETE"]))
    generate = app.openapi
    app.openapi = lambda: app.openapi_schema or declare_vector_dim(declare_providers(  # type: ignore[method-assign]
        schemas.openapi_components(generate()), container), container)
    s = container.settings
    app.add_middleware(TenantRateLimit, keys=keys, rate=s.per_tenant_requests_per_second,  # type: ignore[arg-type]
                       burst=s.per_tenant_request_burst, max_inflight=s.per_tenant_max_inflight,
                       cost=RequestCost(s.rate_cost_body_bytes, s.rate_cost_read_candidates, s.rate_cost_backfill,
                                        s.max_limit, s.max_k))
    app.add_middleware(NoStoreForKeyedRequests)  # type: ignore[arg-type]  # 429s and 500s too
    app.add_middleware(TimedRequests, routes=app.router.routes)  # type: ignore[arg-type]  # a 429 is timed too
    if s.cors_origins:  # outside ours: preflights answered at once, error answers (429, 500) carry the headers too
        app.add_middleware(CORSMiddleware, allow_origins=s.cors_origins, allow_methods=["*"],
                           allow_headers=["Authorization", "Content-Type", "Accept", "Last-Event-ID", "X-Request-Id"],
                           expose_headers=["Retry-After", "X-Request-Id"], max_age=600)
    if s.access_log:
        # MCP_NO_LOG: MCP tool calls leave counters only, not an access line per call either
        quiet = ("/mcp",) if s.mcp_no_log else ()
        app.add_middleware(AccessLog, keys=keys, routes=app.router.routes, quiet=quiet)  # type: ignore[arg-type]
    app.add_middleware(RequestId)  # type: ignore[arg-type]  # outermost: every answer and log line has the id
    return app


HTTP_LABELS = ("route", "method", "status")


def http_histogram() -> Histogram:
    """`vibe_http_request_seconds{route, method, status}`. shared/metrics.py declares it with
    route and status only; until it has `method` too, it is re-registered here once with the
    same name, help and buckets (nothing else observes it)."""
    h = METRICS.http_requests
    if tuple(getattr(h, "_labelnames", ())) != HTTP_LABELS:
        REGISTRY.unregister(h)
        h = Histogram("vibe_http_request_seconds", "HTTP request time", list(HTTP_LABELS), buckets=_LATENCY_BUCKETS)
        METRICS.http_requests = h
    return h


class TimedRequests:
    """Pure ASGI middleware: every HTTP request's time to its response head, by route
    template (never the raw path: ids would explode the label set), method and status. An
    exception before the response started is a 500 (what ServerErrorMiddleware answers);
    after it started (a broken stream), the status sent."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute] = (),
                 clock: Callable[[], float] = time.perf_counter):
        self.app = app
        self.templates = RouteTemplates(routes)
        self.clock = clock
        self.histogram = http_histogram()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = self.clock()
        head: dict[str, Any] = {}

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not head:
                head.update(status=int(message["status"]), at=self.clock())
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        except Exception as exc:
            if head:  # a stream broke after its head: nothing to answer, let the server close it
                raise
            log.exception("unhandled error", exc_info=exc)
            err = VibeError(ErrorCode.INTERNAL_ERROR, "internal error")
            await JSONResponse(error_body(err), status_code=500)(scope, receive, timed_send)
        finally:
            status = head.get("status", 500)
            elapsed = head.get("at", self.clock()) - started
            self.histogram.labels(route=self.templates.of(scope), method=str(scope.get("method", "")),
                                  status=str(status)).observe(elapsed)
