"""The checks behind GET /readyz: the store of record, the lexical and vector indexes, the job
queue, each run on its own thread with a time bound so a server that hangs is reported, not
waited for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from services.container import Container
from shared.logging import current_request_id
from shared.readiness import ReadinessCheck, reason

TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Check:
    name: str
    probe: Callable[[], None]
    # False: the service still answers without this part, degraded: a broker outage leaves reads
    # and writes working (jobs are re-enqueued from the store when it is back), and a balancer
    # taking every replica out for it would turn that degradation into an outage.
    required: bool = True


@dataclass(frozen=True)
class Outcome:
    ok: bool
    required: bool
    ms: float
    error: str | None = None

    def json(self) -> dict[str, object]:
        out: dict[str, object] = {"ok": self.ok, "required": self.required, "ms": self.ms}
        if self.error is not None:
            out["error"] = self.error
        return out


def _probe(part: object) -> Callable[[], None]:
    if isinstance(part, ReadinessCheck):
        return part.check_ready
    return lambda: None  # an adapter with nothing to check (a test double) is taken as ready


def checks_of(c: Container) -> list[Check]:
    """Every store implements `change_log_head`: one cheap read proves the store answers (and
    needs no store-specific code)."""
    store = c.store

    def ping_store() -> None:
        if isinstance(store, ReadinessCheck):
            store.check_ready()
        else:
            store.change_log_head()

    return [Check("store", ping_store), Check("lexical", _probe(c.lexical)), Check("vectors", _probe(c.vectors)),
            Check("queue", _probe(c.queue), required=False)]


def not_ready_body(message: str, details: dict[str, object]) -> dict[str, object]:
    """The 503's error envelope. `not_ready` is no VibeError code: nothing else answers it, and
    it is an answer about this process, not a failed request."""
    err: dict[str, object] = {"code": "not_ready", "message": message, "details": details}
    if (request_id := current_request_id()) is not None:
        err["requestId"] = request_id
    return {"error": err}


class Checker:
    """Runs checks concurrently, each on a daemon thread (a hung check must not keep the process
    from exiting) bounded by `timeout`. A check still running from an earlier call is not
    started again, so a hung server costs one thread, not one per probe."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS, clock: Callable[[], float] = time.perf_counter):
        self.timeout = timeout
        self.clock = clock
        self._running: dict[str, Future[float]] = {}
        self._lock = threading.Lock()

    def _start(self, check: Check) -> Future[float] | None:
        with self._lock:
            earlier = self._running.get(check.name)
            if earlier is not None and not earlier.done():
                return None
            done: Future[float] = Future()
            self._running[check.name] = done

        def run() -> None:
            started = self.clock()
            try:
                check.probe()
            except Exception as e:  # noqa: BLE001 - reported as the check's outcome
                done.set_exception(e)
            else:
                done.set_result(self.clock() - started)

        threading.Thread(target=run, name=f"vibe-readyz-{check.name}", daemon=True).start()
        return done

    def run(self, checks: Sequence[Check]) -> dict[str, Outcome]:
        started = self.clock()
        futures = {c.name: self._start(c) for c in checks}
        return {c.name: self._outcome(c, futures[c.name], started) for c in checks}

    def _outcome(self, check: Check, future: Future[float] | None, started: float) -> Outcome:
        if future is None:
            return Outcome(False, check.required, 0.0, f"an earlier check has not answered in {self.timeout:g} s")
        try:
            seconds = future.result(timeout=max(0.0, self.timeout - (self.clock() - started)))
        except TimeoutError:
            return Outcome(False, check.required, round(self.timeout * 1000, 1), f"no answer in {self.timeout:g} s")
        except Exception as e:  # noqa: BLE001 - the check's own failure, reported as its outcome
            return Outcome(False, check.required, round((self.clock() - started) * 1000, 2), reason(e))
        return Outcome(True, check.required, round(seconds * 1000, 2))
