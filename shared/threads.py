"""Background threads below the request threads (Linux `nice` is per thread)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable


def lower_priority(by: int) -> Callable[[], None]:
    """A thread initializer: the thread that runs it goes `by` nice levels below the process, so
    on a small machine the scheduler hands a core to a query before it hands it to background
    work. Threads a library starts from it (onnxruntime's pool) inherit the level."""
    def lower() -> None:
        if by <= 0 or not hasattr(os, "setpriority"):
            return
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):  # not permitted here: same priority as the rest, still correct
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    return lower
