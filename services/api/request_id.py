"""`X-Request-Id` on every answer, and in every log line written while serving it.

A caller's own id is kept when it is well formed, so a client, a proxy and this service can
name one request alike; anything else (too long, or characters that could forge log fields or
headers) is replaced by a fresh id rather than refused: an id is a convenience, never a
reason to fail a request. Pure ASGI: SSE streams pass through unbuffered, and the header is
set on answers made outside the routes too (429, the outermost 500)."""

from __future__ import annotations

import re
import uuid

from services.api.ratelimit import ASGIApp, Message, Receive, Scope, Send
from shared.logging import REQUEST_ID

HEADER = b"x-request-id"
MAX_CHARS = 128
_WELL_FORMED = re.compile(rb"[A-Za-z0-9._:+=/-]{1,%d}" % MAX_CHARS)


def accepted_id(raw: bytes | None) -> str:
    """The caller's id when it is well formed, else a new one (32 hex characters)."""
    if raw is not None and _WELL_FORMED.fullmatch(raw):
        return raw.decode("ascii")
    return uuid.uuid4().hex


def _incoming(scope: Scope) -> bytes | None:
    return next((v for k, v in scope.get("headers", ()) if k == HEADER), None)


class RequestId:
    """Sets the request's id in `shared.logging.REQUEST_ID` for as long as it is served, and as
    the `X-Request-Id` header of its answer (replacing one a route may have set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = accepted_id(_incoming(scope))
        token = REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, request_id.encode("ascii"))]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
