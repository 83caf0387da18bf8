"""The app served by uvicorn on a real socket inside the test's own process: for tests that
need the container itself at hand (an injected clock, a fault put in mid-stream)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import uvicorn

from harness.server import free_port
from services.core.keyring import KeyRing
from services.wiring import Container, create_app
from shared.config import ApiKey


class ManualClock:
    """A clock the test moves by hand (`build(settings, clock=)`)."""

    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


class UvicornThread:
    """`container` served on 127.0.0.1:`port` until `stop()` (which also closes its store)."""

    def __init__(self, container: Container, keys: Sequence[ApiKey]):
        self.container = container
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        app = create_app(container, KeyRing(list(keys)))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 60
        while not self.server.started:
            assert time.time() < deadline and self.thread.is_alive(), "in-process server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.container.store.close()
