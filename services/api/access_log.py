"""One JSON line per HTTP request (logger `vibe.access`), written when its answer is complete:
a stream's line comes when the stream ends, with its whole duration and size.

Only what identifies the request's shape goes in: method, raw path (ASGI keeps the query string
apart, and it is never logged: it can carry filters and text), route template, status,
duration, bytes sent, tenant, request id. Never a body, a header, a key or a token. Off with
VIBE_ACCESS_LOG=false; `/mcp` is left out with MCP_NO_LOG (tool calls keep counters only)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from starlette.routing import BaseRoute

from services.api.ratelimit import ASGIApp, Message, Receive, Scope, Send, TenantRateLimit, bearer
from services.api.route_template import RouteTemplates
from services.core.keyring import KeyRing

log = logging.getLogger("vibe.access")
MAX_PATH_CHARS = 512  # a path is the caller's text: bounded, like every other logged value


class AccessLog:
    def __init__(self, app: ASGIApp, keys: KeyRing, routes: Sequence[BaseRoute] = (),
                 clock: Callable[[], float] = time.perf_counter, quiet: Sequence[str] = ()) -> None:
        self.app = app
        self.quiet = tuple(quiet)  # paths (and their sub-paths) that are never logged
        # The rate limit's own bearer -> principal rule (`<task>@<key>` bearers too), never
        # charging anything (rate 0): the line names the tenant the limit charged.
        self.principals = TenantRateLimit(app, keys, rate=0, burst=1)
        self.templates = RouteTemplates(routes)
        self.clock = clock

    def _quiet(self, path: str) -> bool:
        return any(path == q or path.startswith(q + "/") for q in self.quiet)

    def _tenant(self, scope: Scope) -> str | None:
        found = self.principals.principal(bearer(scope))  # from the key ring's cache by now
        return found.tenant if found is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._quiet(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        started = self.clock()
        sent = {"status": 0, "bytes": 0}

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = int(message["status"])
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self._write(scope, sent["status"] or 500, sent["bytes"], self.clock() - started)

    def _write(self, scope: Scope, status: int, bytes_out: int, seconds: float) -> None:
        try:
            tenant = self._tenant(scope)
        except Exception:  # a key store away must not turn a served answer into a lost log line
            tenant = None
        log.info("request", extra={
            "method": str(scope.get("method", "")), "path": str(scope.get("path", ""))[:MAX_PATH_CHARS],
            "route": self.templates.of(scope), "status": status, "durationMs": round(seconds * 1000, 2),
            "bytesOut": bytes_out, "tenant": tenant})  # `requestId`: stamped on every record (shared/logging.py)
