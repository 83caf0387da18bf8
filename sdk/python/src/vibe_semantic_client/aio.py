"""The asynchronous client: `Client`'s surface with `await` and `async for`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from httpx_sse import EventSource

from vibe_semantic_client import _core as core
from vibe_semantic_client._base import ClientConfig, ClientOptions
from vibe_semantic_client._surface import AsyncTransport, Calls
from vibe_semantic_client.models import BulkResult, Event, ReadAnswer, Strategy
from vibe_semantic_client.streams import AsyncReadStream

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")


class AsyncClient(ClientConfig, AsyncTransport, Calls):
    """Like `Client`, for asyncio::

        async with AsyncClient("http://127.0.0.1:8080", "my-key") as vibe:
            async for event in vibe.read_once("posts", "consent UX"):
                print(event.event, [h.id for h in event.results])
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 http_client: httpx.AsyncClient | None = None, **options: Unpack[ClientOptions]) -> None:
        super().__init__(base_url, api_key, **options)
        self._owns_http = http_client is None  # a client passed in stays open: its owner closes it
        self._http = http_client or httpx.AsyncClient(timeout=self.timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    # -- transport (the same steps as Client._send; the decisions are RetryPolicy's) ---------

    async def _send(self, call: core.Call[Any], stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            try:
                request = self._http.build_request(**self._request_args(call))
                resp = await self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                wait = self.retry.after_exception(call, attempt, e)
                if wait is None:
                    raise core.transport_error(e) from e
            else:
                wait = self.retry.after_response(call, attempt, resp)
                if wait is None:
                    return resp
                await resp.aclose()
            attempt += 1
            await asyncio.sleep(wait)

    async def _do(self, call: core.Call[T]) -> T:
        return core.finish(call, await self._send(call))

    # -- documents (put, get, delete, mget: Calls) --------------------------------------------

    async def bulk(self, collection: str, docs: Iterable[Mapping[str, Any]], batch_size: int = 500,
                   progress: core.Progress | None = None) -> BulkResult:
        """See `Client.bulk`."""
        total, chunks = core.batches(docs, batch_size)
        tally = core.BulkTally(total, progress)
        for chunk in chunks:
            tally.add(len(chunk), await self._do(core.bulk(collection, chunk)))
        return tally.result()

    # -- read (read, the one JSON answer: Calls) ---------------------------------------------

    async def pages(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
                    **options: Any) -> AsyncIterator[ReadAnswer]:
        """See `Client.pages`; consume with `async for`."""
        body = core.read_body(collection, q, strategy, limit, options)
        while True:
            page = await self._do(core.read(body))
            yield page
            if not page.next_cursor:
                return
            body = {**body, "cursor": page.next_cursor}

    def read_once(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
                  **options: Any) -> AsyncReadStream:
        """See `Client.read_once`; consume with `async for`."""
        body = core.read_body(collection, q, strategy, limit, options)
        return AsyncReadStream(self._events(core.read_stream(body)))

    # The name the streaming read had before `read_once` took it (the CLI and older code use it).
    stream = read_once

    async def _events(self, call: core.Call[None]) -> AsyncGenerator[Event, None]:
        async with self._open(call) as resp:
            try:
                async for sse in EventSource(resp).aiter_sse():
                    event = core.to_event(sse)
                    if event is None:
                        continue
                    yield event
                    if event.event in core.STREAM_END:
                        return
            except httpx.TransportError as e:  # cut mid-stream, or not an event stream at all
                raise core.transport_error(e) from e
        raise core.cut_short()

    @asynccontextmanager
    async def _open(self, call: core.Call[Any]) -> AsyncIterator[httpx.Response]:
        resp = await self._send(call, stream=True)
        try:
            if not resp.is_success:
                await resp.aread()
                raise core.error_for(resp)
            yield resp
        finally:
            await resp.aclose()
