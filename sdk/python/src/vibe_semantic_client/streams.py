"""What `read_once` returns: the events of one streaming read, as `Client` and `AsyncClient` give them.

Iterate it once: `Lexical` first, then `Warming` / `Semantic` as workers embed (each ranking
followed by a `Rerank` when the read reranks), `Done` (or `Error`) last. Nothing is sent before
the first event is asked for; leaving the loop early (or `close()`) closes the connection.
`final()` reads what is left and returns the last ranking.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any

from vibe_semantic_client.errors import TransportError
from vibe_semantic_client.models import JSON, Done, Error, Event, Hit, Lexical, ReadAnswer, Rerank, Semantic, Warming

# `read_once` returned the one-shot answer before it streamed (as `readOnce` does in the
# TypeScript SDK). Code written then reads `.results` (or awaits it, in asyncio): it still
# works, on the stream's last ranking, and is told where the one-shot answer went.
MOVED = ("read_once() streams now (lexical, semantic re-rankings, done): use read() for the one-shot "
         "answer, or .final() for the stream's last ranking")


class _Outcome:
    """The last ranking seen and the error event, if the stream ended with one."""

    def __init__(self) -> None:
        self.ranking: ReadAnswer | None = None
        self.error: Error | None = None

    def see(self, event: Event) -> None:
        if isinstance(event, Lexical | Semantic | Rerank | Done):
            self.ranking = event.answer
        elif isinstance(event, Error):
            self.error = event

    def answer(self) -> ReadAnswer:
        if self.error is not None:
            raise self.error.exception()
        if self.ranking is None:
            raise TransportError("the stream ended without a ranking")
        return self.ranking


class ReadStream(Iterator[Event]):
    """The events of one `Client.read_once`; also a context manager that closes it."""

    def __init__(self, events: Generator[Event, None, None]) -> None:
        self._events = events
        self._outcome = _Outcome()

    def __iter__(self) -> ReadStream:
        return self

    def __next__(self) -> Event:
        event = next(self._events)
        self._outcome.see(event)
        return event

    def close(self) -> None:
        self._events.close()

    def __enter__(self) -> ReadStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def final(self) -> ReadAnswer:
        """The last ranking (`Done`'s), after reading the events not read yet; an `Error` event
        is raised as its typed error."""
        for _ in self:
            pass
        return self._outcome.answer()

    # -- the one-shot answer's attributes, for code from before read_once streamed ----------

    def _moved(self) -> ReadAnswer:
        warnings.warn(MOVED, DeprecationWarning, stacklevel=3)
        return self.final()

    @property
    def results(self) -> list[Hit]:
        return self._moved().results

    @property
    def ids(self) -> list[str]:
        return self._moved().ids

    @property
    def warming(self) -> Warming:
        return self._moved().warming

    @property
    def strategy(self) -> str:
        return self._moved().strategy

    @property
    def diagnostics(self) -> JSON:
        return self._moved().diagnostics

    @property
    def next_cursor(self) -> str | None:
        return self._moved().next_cursor


class AsyncReadStream(AsyncIterator[Event]):
    """The events of one `AsyncClient.read_once` (`async for`); an async context manager that
    closes it. `await`-ing it (what code from before it streamed does) gives `final()`, with a
    DeprecationWarning."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._outcome = _Outcome()

    def __aiter__(self) -> AsyncReadStream:
        return self

    async def __anext__(self) -> Event:
        event = await self._events.__anext__()
        self._outcome.see(event)
        return event

    async def aclose(self) -> None:
        await self._events.aclose()

    async def __aenter__(self) -> AsyncReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def final(self) -> ReadAnswer:
        """See `ReadStream.final`."""
        async for _ in self:
            pass
        return self._outcome.answer()

    def __await__(self) -> Generator[Any, None, ReadAnswer]:
        warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
        return self.final().__await__()
