"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from httpx_sse import EventSource

from vibe_semantic_client import _core as core
from vibe_semantic_client._base import ClientConfig, ClientOptions
from vibe_semantic_client._surface import Calls, SyncTransport
from vibe_semantic_client.models import BulkResult, Event, ReadAnswer, Strategy
from vibe_semantic_client.streams import ReadStream

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")


class Client(ClientConfig, SyncTransport, Calls):
    """A vibe-semantic client. Use it as a context manager (or call `close()`)::

        with Client("http://127.0.0.1:8080", "my-key") as vibe:
            answer = vibe.read("posts", "consent UX for shared notes")
            for event in vibe.read_once("posts", "consent UX for shared notes"):
                print(event.event, [hit.id for hit in event.results])

    Every failure raises a `VibeError` subclass (`NotFound`, `Forbidden`, `RateLimited`, ...).
    See `ClientConfig` for `timeout`, `retries`, `http_client` and the environment defaults.
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 http_client: httpx.Client | None = None, **options: Unpack[ClientOptions]) -> None:
        super().__init__(base_url, api_key, **options)
        self._owns_http = http_client is None  # a client passed in stays open: its owner closes it
        self._http = http_client or httpx.Client(timeout=self.timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    # -- transport ---------------------------------------------------------------------------

    def _send(self, call: core.Call[Any], stream: bool = False) -> httpx.Response:
        """Send `call`, retrying as the policy allows; the last answer is returned as is."""
        attempt = 0
        while True:
            try:
                request = self._http.build_request(**self._request_args(call))
                resp = self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                wait = self.retry.after_exception(call, attempt, e)
                if wait is None:
                    raise core.transport_error(e) from e
            else:
                wait = self.retry.after_response(call, attempt, resp)
                if wait is None:
                    return resp
                resp.close()
            attempt += 1
            time.sleep(wait)

    def _do(self, call: core.Call[T]) -> T:
        return core.finish(call, self._send(call))

    # -- documents (put, get, delete, mget: Calls) --------------------------------------------

    def bulk(self, collection: str, docs: Iterable[Mapping[str, Any]], batch_size: int = 500,
             progress: core.Progress | None = None) -> BulkResult:
        """Write many documents (each with `_id`) in batches of `batch_size`. A bad document does
        not sink the others: see `.failed`. `progress(done, total)` is called after each batch."""
        total, chunks = core.batches(docs, batch_size)
        tally = core.BulkTally(total, progress)
        for chunk in chunks:
            tally.add(len(chunk), self._do(core.bulk(collection, chunk)))
        return tally.result()

    # -- read (read, the one JSON answer: Calls) ---------------------------------------------

    def pages(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
              **options: Any) -> Iterator[ReadAnswer]:
        """`read` page after page (`limit` hits each), following `next_cursor` to the end of the
        ranking. Stop iterating to stop asking."""
        body = core.read_body(collection, q, strategy, limit, options)
        while True:
            page = self._do(core.read(body))
            yield page
            if not page.next_cursor:
                return
            body = {**body, "cursor": page.next_cursor}

    def read_once(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
                  **options: Any) -> ReadStream:
        """The streaming read: `Lexical` (the keyword ranking) at once, then `Warming` /
        `Semantic` as workers embed, and `Done` (or `Error`) last. The same arguments as `read`;
        the request is sent when the first event is asked for, and breaking out of the loop
        closes the connection. See `ReadStream`."""
        body = core.read_body(collection, q, strategy, limit, options)
        return ReadStream(self._events(core.read_stream(body)))

    # The name the streaming read had before `read_once` took it (the CLI and older code use it).
    stream = read_once

    def _events(self, call: core.Call[None]) -> Generator[Event, None, None]:
        with self._open(call) as resp:
            try:
                for sse in EventSource(resp).iter_sse():
                    event = core.to_event(sse)
                    if event is None:
                        continue
                    yield event
                    if event.event in core.STREAM_END:
                        return
            except httpx.TransportError as e:  # cut mid-stream, or not an event stream at all
                raise core.transport_error(e) from e
        raise core.cut_short()

    @contextmanager
    def _open(self, call: core.Call[Any]) -> Iterator[httpx.Response]:
        resp = self._send(call, stream=True)
        try:
            if not resp.is_success:
                resp.read()
                raise core.error_for(resp)
            yield resp
        finally:
            resp.close()
