"""`Cache-Control: no-store` on every answer to a request that carries a key.

An answer computed for one key (results, documents, admin figures, even its errors) must never
be kept by a browser or a shared proxy and shown to whoever asks next with another key. It
replaces a weaker header a route set (the SSE answer's `no-cache` still allows storing); the
`/ui` static files are fetched without a key and keep their own. Pure ASGI, so streamed
answers (SSE) pass through untouched.
"""

from __future__ import annotations

from services.api.ratelimit import ASGIApp, Message, Receive, Scope, Send

_NO_STORE = (b"cache-control", b"no-store")


class NoStoreForKeyedRequests:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(k == b"authorization" for k, _ in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, _NO_STORE]}
            await send(message)

        await self.app(scope, receive, send_no_store)
