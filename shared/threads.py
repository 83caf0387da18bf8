"""Threads for work that must yield the cores to requests waiting for a first answer.

Linux nice is per thread, so a pool whose threads lower their own priority at start keeps
background work (document batches, the tail of a streamed read) off a core a request needs;
threads they start (onnxruntime's) inherit the level. Where lowering is not permitted the
threads run at the process's priority: slower to yield, still correct.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def lower_priority(by: int) -> Callable[[], None]:
    """A thread initializer that runs the calling thread `by` nice levels below the process."""
    def lower() -> None:
        if by <= 0 or not hasattr(os, "setpriority"):
            return
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):  # not permitted here: same priority as the rest, still correct
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    return lower


def niced_pool(workers: int, by: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads run `by` nice levels below the process."""
    return ThreadPoolExecutor(max(1, workers), thread_name_prefix=name, initializer=lower_priority(by))
