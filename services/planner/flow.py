"""The event flow of a read: its answers as domain events, in the order they go out.

`lexical` (the first answer, built by the caller as the read opens), then `semantic` when the
deferred semantic leg changes the page, `warming` once the touch has queued embeddings, a
`semantic` for each re-ranking and a `warming` for each change in what is pending as workers
finish, and `done`. A read that reranks shows `lexical` and each `semantic` fused, each followed
by a `rerank` event with the same page reranked; `done` is reranked, as the JSON answer is. The
JSON answer is the first event alone; the SSE route streams them all and renders each
(services/api/render.py). Blocking steps run through `run` (the API's thread pool), so the flow
never blocks the event loop it is iterated on."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

from services.planner.answer import Answer, Warming
from services.planner.session import ReadSession
from shared.metrics import METRICS
from shared.model import DocKey

POLL_SECONDS = 0.25  # also catches jobs finished by other processes (Celery workers)

T = TypeVar("T")
Run = Callable[..., Awaitable[Any]]  # runs a blocking call off the event loop: run(fn, *args)
Event = tuple[str, Answer | Warming]


class JobSignal(Protocol):
    """Wakes a stream when jobs finish (listeners are called from any thread)."""

    def subscribe(self, fn: Callable[[list[DocKey]], None]) -> None: ...

    def unsubscribe(self, fn: Callable[[list[DocKey]], None]) -> None: ...


def after_first_answers(session: ReadSession, step: Callable[[], T]) -> T:
    """A step of a stream's tail, after any first answer in flight (shared/foreground.py)."""
    session.p.foreground.yield_to_requests()
    return step()


async def tail(session: ReadSession, run: Run, signal: JobSignal, grace_seconds: float,
               wait_seconds: float) -> AsyncIterator[Event]:
    """The events after the first answer, until `done`."""
    # The rest is this query's second answer, which must not hold up another query's first
    # one: a client reading first events back to back (search as you type, an SDK's
    # readOnce) sends its next query about now. So the steps start after a short grace and
    # each waits for first answers in flight (at most VIBE_FOREGROUND_MAX_WAIT_SECONDS).
    # Without the grace the tail would start before the next query arrives, and waiting for
    # first answers in flight would find none (README Performance).
    if session.req.rerank:  # the first event showed the fused page; the reranked one follows at once
        yield "rerank", await run(session.answer)
    await asyncio.sleep(grace_seconds)
    if await run(after_first_answers, session, session.complete_semantic):
        async for event in ranked(session, run):
            yield event
    await run(after_first_answers, session, session.touch)
    if session.pending:
        yield "warming", await run(session.warming)  # re-checks the pending documents: a store read
    async for event in backfill(session, run, signal, wait_seconds):
        yield event
    yield "done", await run(session.answer, True)


async def ranked(session: ReadSession, run: Run) -> AsyncIterator[Event]:
    """A `semantic` event (the fused page), and when the read reranks, the same page reranked as
    a `rerank` event: a client sees each new ranking without waiting for the reranker."""
    yield "semantic", await run(session.answer, False, False)
    if session.req.rerank:
        yield "rerank", await run(session.answer)


async def backfill(session: ReadSession, run: Run, signal: JobSignal, wait_seconds: float) -> AsyncIterator[Event]:
    """Re-rank as workers finish, until nothing this query waits for is pending or the
    wait bound passes."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def listener(keys: list[DocKey]) -> None:
        loop.call_soon_threadsafe(wake.set)

    signal.subscribe(listener)
    deadline = time.monotonic() + wait_seconds
    try:
        while time.monotonic() < deadline:
            if not session.awaits_backfill:
                # its touch has landed: a query's first read may touch once more (TouchPolicy.follow_up;
                # off by default, so most streams end here without a thread hop)
                if not session.p.cfg.touch.follow_up or not await run(session.follow_up):
                    break
                yield "warming", await run(session.warming)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SECONDS)
            wake.clear()
            before = len(session.pending)
            changed = await run(session.refresh)
            if changed:
                METRICS.backfill_events.inc()
                async for event in ranked(session, run):
                    yield event
            if len(session.pending) != before:
                yield "warming", await run(session.warming)
    finally:
        signal.unsubscribe(listener)
