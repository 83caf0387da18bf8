"""Circuit breaker around any Embedder (both profiles).

After `failures` consecutive provider failures the circuit opens: calls fail at once with
`CircuitOpen` instead of waiting on a dead or hanging provider, so reads answer lexically at
their usual speed and say the semantic leg is degraded. After `cooldown` one probe call is let
through (half-open); its success closes the circuit, its failure re-opens it. Nothing manual.

A 429 is the provider pacing us, not failing: it never counts, and surfaces as `RateLimited`
so job runners can postpone the batch instead of spending an attempt on it. Any other 4xx is
the provider refusing this request (an over-long input, a bad parameter): the provider is up,
so it never counts either (one tenant's bad input must not open the circuit
for every tenant), and a half-open probe answered with a 4xx closes the circuit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from shared.metrics import METRICS
from shared.ports import Embedder, EmbedderError

T = TypeVar("T")


class RateLimited(EmbedderError):
    """The provider answered 429; `retry_after` is its requested delay when it gave one."""


class CircuitOpen(EmbedderError):
    """The breaker refused the call; `retry_after` is the time left until the next probe."""

    reached_provider = False  # nothing was sent: the provider-call ledger has no row for it


def is_rate_limit(e: EmbedderError) -> bool:
    """Provider adapters chain the HTTP error they got; 429 is the only status that means
    'slow down' rather than 'broken'."""
    if isinstance(e, RateLimited):
        return True
    return getattr(e.__cause__, "status_code", None) == 429


def status_of(e: EmbedderError) -> int | None:
    status = getattr(e.__cause__, "status_code", None)
    return status if isinstance(status, int) else None


def is_refusal(e: EmbedderError) -> bool:
    """The provider answered and refused this request (4xx other than 429): not an outage."""
    status = status_of(e)
    return status is not None and 400 <= status < 500 and status != 429


class BreakerEmbedder:
    def __init__(self, inner: Embedder, failures: int = 5, cooldown: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.inner = inner
        self.failures = max(1, failures)
        self.cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive = 0
        self._opened_at: float | None = None
        self._probing = False
        self._publish("closed", transition=False)

    # -- Embedder ----------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._call(lambda: self.inner.embed(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._call(lambda: self.inner.embed_query(text))

    # -- state machine -----------------------------------------------------------------

    @property
    def state(self) -> str:
        with self._lock:
            return self._state_locked()

    def _state_locked(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self.cooldown else "open"

    def _call(self, fn: Callable[[], T]) -> T:
        self._admit()
        try:
            result = fn()
        except EmbedderError as e:
            self._failed(e)
            if is_rate_limit(e) and not isinstance(e, RateLimited):
                raise RateLimited(str(e), e.retry_after, e.transient) from e
            raise
        except BaseException:
            self._release_probe()  # not a provider verdict (e.g. a bug or KeyboardInterrupt)
            raise
        self._succeeded()
        return result

    def _admit(self) -> None:
        """Closed: pass. Open: refuse. Half-open: exactly one caller probes; others refuse."""
        with self._lock:
            state = self._state_locked()
            if state == "closed":
                return
            if state == "half_open" and not self._probing:
                self._probing = True
                self._publish("half_open")
                return
            assert self._opened_at is not None
            left = max(0.0, self.cooldown - (self._clock() - self._opened_at))
        METRICS.breaker_rejected.inc()
        raise CircuitOpen(f"embedding provider circuit open (retry in {left:.1f}s)", retry_after=left or None)

    def _failed(self, e: EmbedderError) -> None:
        with self._lock:
            probing, self._probing = self._probing, False
            if is_rate_limit(e) or is_refusal(e):
                if probing:  # the provider answered: it is up, just busy or refusing this input
                    self._close_locked()
                return
            self._consecutive += 1
            if probing or self._consecutive >= self.failures:
                self._opened_at = self._clock()
                self._publish("open")

    def _succeeded(self) -> None:
        with self._lock:
            self._probing = False
            self._consecutive = 0
            if self._opened_at is not None:
                self._close_locked()

    def _close_locked(self) -> None:
        self._opened_at = None
        self._consecutive = 0
        self._publish("closed")

    def _release_probe(self) -> None:
        with self._lock:
            self._probing = False

    @staticmethod
    def _publish(state: str, transition: bool = True) -> None:
        for s in ("closed", "open", "half_open"):
            METRICS.breaker_state.labels(state=s).set(1.0 if s == state else 0.0)
        if transition:
            METRICS.breaker_transitions.labels(to=state).inc()
