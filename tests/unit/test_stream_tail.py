"""A stream's work after its first event runs on lower-priority threads (shared/threads.py,
services/api/routes_read.py `_tail_runner`), in the caller's context."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading

import pytest

from services.api.routes_read import _tail_runner
from shared.threads import niced_pool

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="per-thread nice is Linux's")
def test_the_tail_runs_below_the_request_threads_priority_with_the_callers_context() -> None:
    pool = niced_pool(2, 5, "test-tail")
    tail = _tail_runner(pool)

    def seen(extra: str) -> tuple[int, str, str]:
        return _nice(), REQUEST_ID.get(), extra

    async def request() -> tuple[int, str, str]:
        REQUEST_ID.set("r-1")
        return await tail(seen, "arg")

    try:
        base = _nice()
        nice, rid, extra = asyncio.run(request())
    finally:
        pool.shutdown()
    assert (nice, rid, extra) == (min(19, base + 5), "r-1", "arg")


def test_no_lowering_asked_keeps_the_process_priority() -> None:
    pool = niced_pool(1, 0, "test-plain")
    try:
        assert pool.submit(_nice).result() == _nice()
    finally:
        pool.shutdown()
