"""The FastAPI app: routers, the one error handler, request metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from services.api import routes_admin, routes_docs, routes_read
from services.api.auth import KeyRing
from services.mcp.http import McpHttp
from shared.errors import ErrorCode, VibeError
from shared.metrics import METRICS
from services.wiring import Container

log = logging.getLogger("vibe.api")


def _error(code: ErrorCode, message: str, **details: object) -> JSONResponse:
    return JSONResponse(VibeError(code, message, dict(details)).body(), status_code=code.status)


async def _vibe_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, VibeError)
    return JSONResponse(exc.body(), status_code=exc.code.status)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errs = exc.errors()
    first = errs[0] if errs else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return _error(ErrorCode.INVALID_PARAMS, f"{where}: {first.get('msg', 'invalid request')}")


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return _error(ErrorCode.NOT_FOUND, "no such route")
    if exc.status_code == 405:
        return JSONResponse({"error": {"code": "method_not_allowed", "message": "method not allowed"}},
                            status_code=405)
    return _error(ErrorCode.INVALID_PARAMS, str(exc.detail))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return _error(ErrorCode.INTERNAL_ERROR, "internal error")


def create_app(container: Container, keys: KeyRing) -> FastAPI:
    mcp = McpHttp(container, keys)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        container.start()
        async with mcp.lifespan():  # the MCP session manager's task group (issue #4)
            yield
        container.stop()
        mcp.close()

    app = FastAPI(title="vibe-semantic", version="0.1.0", lifespan=lifespan)
    app.state.container = container
    app.state.keys = keys
    app.add_exception_handler(VibeError, _vibe_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    for r in (routes_docs.router, routes_read.router, routes_admin.router):
        app.include_router(r)
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"]))
    app.middleware("http")(_timed)
    return app


async def _timed(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    started = time.perf_counter()
    response = await call_next(request)
    route = request.scope.get("route")
    path = getattr(route, "path", "unmatched")
    METRICS.http_requests.labels(route=path, status=str(response.status_code)).observe(
        time.perf_counter() - started)
    return response
