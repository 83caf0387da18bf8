"""Streamable HTTP for the MCP tools, mounted by the API at `/mcp`.

Stateless mode: every POST is a complete exchange and carries its own bearer key, so the key
decides tenant and principals per request, exactly as for the HTTP API (no session can be
borrowed by another key). A request without a known key is answered 401 in the contract's
error shape before the MCP layer sees it; tools check the key again from the headers.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager

from mcp.server.mcpserver import MCPServer
from starlette.types import Receive, Scope, Send

from services.container import Container
from services.core.keyring import KeyRing, split_identity
from services.mcp.runtime import ToolRuntime, build_runtime
from services.mcp.server import build_server
from shared.errors import ErrorCode, VibeError


class McpHttp:
    """An ASGI endpoint (a class instance, so Starlette's `Route` passes the raw ASGI call)."""

    def __init__(self, container: Container, keys: KeyRing):
        self.keys = keys
        self.runtime: ToolRuntime = build_runtime(container, keys)
        self.server: MCPServer = build_server(self.runtime)
        s = container.settings
        # Only to construct the SDK's session manager (with DNS-rebinding protection on a
        # loopback host); requests are handed to it directly below.
        self.server.streamable_http_app(stateless_http=True, json_response=True, host=s.host)

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.server.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            await _unauthorized(send)
            return
        await self.server.session_manager.handle_request(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), "")
        kind, _, token = header.partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            return False
        if self.keys.lookup(token) is not None:
            return True
        # extract_key_info clients' `Bearer <identity>@<token>`, when the operator enabled it
        identity, key = split_identity(token)
        return self.runtime.settings.extract_task_from_bearer and identity is not None \
            and self.keys.lookup(key) is not None

    def close(self) -> None:
        self.runtime.close()


async def _unauthorized(send: Send) -> None:
    body = json.dumps(VibeError(ErrorCode.UNAUTHORIZED, "missing or unknown bearer key").body()).encode()
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
    await send({"type": "http.response.body", "body": body})
