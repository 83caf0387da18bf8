"""Several processes doing one thing at the same moment, for races between processes (not
threads: what is tested is a lock that holds across them)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def at_once(target: Callable[..., None], args: tuple[Any, ...], n: int = 4, timeout: float = 60) -> list[Any]:
    """Run `target(*args, start, out)` in `n` fresh (spawned) processes: each waits on the
    barrier `start` before the racy part and puts its result on the queue `out`. Returns the
    results, after asserting every process exited cleanly."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, start, out)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    assert [p.exitcode for p in procs] == [0] * n
    return [out.get(timeout=5) for _ in procs]
