"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from httpx_sse import EventSource

from vibe_semantic_client import _core as core
from vibe_semantic_client._base import ClientConfig, ClientOptions
from vibe_semantic_client._surface import JsonCalls
from vibe_semantic_client.models import JSON, BulkResult, Event, ReadAnswer, Strategy

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")


class Client(ClientConfig, JsonCalls[JSON]):
    """A vibe-semantic client. Use it as a context manager (or call `close()`)::

        with Client("http://127.0.0.1:8080", "my-key") as vibe:
            answer = vibe.read_once("posts", "consent UX for shared notes")

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
                request = self._http.build_request(**self.request_args(call))
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

    def _json(self, call: core.Call[JSON]) -> JSON:
        return self._do(call)

    # -- documents (put, get, delete, admin: JsonCalls) --------------------------------------

    def mget(self, collection: str, ids: Sequence[str]) -> list[JSON | None]:
        """Several documents in one call, in the order of `ids`; None where absent or unreadable."""
        return self._do(core.mget(collection, ids))

    def bulk(self, collection: str, docs: Iterable[Mapping[str, Any]], batch_size: int = 500,
             progress: core.Progress | None = None) -> BulkResult:
        """Write many documents (each with `_id`) in batches of `batch_size`. A bad document does
        not sink the others: see `.failed`. `progress(done, total)` is called after each batch."""
        total, chunks = core.batches(docs, batch_size)
        tally = core.BulkTally(total, progress)
        for chunk in chunks:
            tally.add(len(chunk), self._do(core.bulk(collection, chunk)))
        return tally.result()

    # -- read --------------------------------------------------------------------------------

    def read_once(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
                  **options: Any) -> ReadAnswer:
        """What is ready now, as one answer (the keyword ranking at once; vectors already made).
        `collection` may be `"any"`. Options: see `_core.read_body` (`filter`, `cursor`,
        `fields`, `highlights`, `include_semantic`, `k`, `like`, `semantic={...}`, ...)."""
        return self._do(core.read(core.read_body(collection, q, strategy, limit, options)))

    def pages(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
              **options: Any) -> Iterator[ReadAnswer]:
        """`read_once` page after page (`limit` hits each), following `next_cursor` to the end
        of the ranking. Stop iterating to stop asking."""
        body = core.read_body(collection, q, strategy, limit, options)
        while True:
            page = self._do(core.read(body))
            yield page
            if not page.next_cursor:
                return
            body = {**body, "cursor": page.next_cursor}

    def stream(self, collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
               **options: Any) -> Iterator[Event]:
        """The readOnce stream: `Lexical` first, then `Warming` / `Semantic` as embeddings arrive,
        and `Done` (or `Error`) last. Breaking out of the loop closes the connection."""
        call = core.read_stream(core.read_body(collection, q, strategy, limit, options))
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
