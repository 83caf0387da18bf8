"""What a Celery worker process does with one embedding message.

It runs the same `EmbedHandler` as the embedded runner (the composition root builds both), then:
finished jobs stop being pending (dedupe set) and are announced on pub/sub; jobs the handler
wants retried are re-sent with exponential backoff and jitter, never sooner than the
provider's Retry-After. A 429 or an open circuit postpones the whole batch without spending an
attempt: the provider is pacing us, the documents are not at fault.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from celery import Celery

from services.core.handlers import BatchOutcome, EmbedHandler
from services.core.lifecycle import Lifecycle
from shared.adapters.celery_queue import CeleryQueue, decode
from shared.adapters.embedders.breaker import CircuitOpen, RateLimited
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import EmbedJob
from shared.ports import Embedder, EmbedderError, StoreOfRecord

log = logging.getLogger("vibe.worker")


class Postponed(Exception):
    """Raised through the handler (which only catches EmbedderError) so the batch is put back
    untouched: no failure recorded, no attempt spent."""

    def __init__(self, reason: str, retry_after: float | None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class PostponingEmbedder:
    """Worker-side view of the (breaker-wrapped) embedder: rate limits and an open circuit
    become `Postponed`."""

    def __init__(self, inner: Embedder):
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            return self.inner.embed(texts)
        except RateLimited as e:
            raise Postponed("rate_limited", e.retry_after) from e
        except CircuitOpen as e:
            raise Postponed("circuit_open", e.retry_after) from e
        except EmbedderError as e:
            # The failure that opened the circuit (or a failed half-open probe) says the
            # provider is down, not that these documents are bad: not charged either.
            if e.transient and getattr(self.inner, "state", "closed") != "closed":
                raise Postponed("circuit_open", getattr(self.inner, "cooldown", None)) from e
            raise

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Exponential backoff with jitter ("equal jitter": half fixed, half random, so retries of
    many batches spread out but none comes back immediately), never below Retry-After."""
    exp = min(cap, base * (2 ** max(attempt - 1, 0)))
    delay = exp / 2 + random.uniform(0, exp / 2)
    return max(delay, retry_after or 0.0)


@dataclass
class Runtime:
    """One per worker process, built after the fork (SQLite connections and HTTP clients
    must not cross a fork)."""

    settings: Settings
    store: StoreOfRecord
    handler: EmbedHandler
    queue: CeleryQueue
    lifecycle: Lifecycle

    def run_batch(self, payload: list[Any], lane: str) -> dict[str, int]:
        jobs = [decode(raw) for raw in payload]
        started = time.perf_counter()
        try:
            out = self.handler.run(jobs)
        except Postponed as p:
            return self._postpone(jobs, p)
        except Exception:  # a bug or a locked store: retry like a failure, keep the worker alive
            log.exception("embed batch crashed", extra={"jobs": len(jobs)})
            out = self._crashed(jobs)
        METRICS.celery_batch_seconds.labels(queue=lane).observe(time.perf_counter() - started)
        return self._settle(jobs, out)

    def _postpone(self, jobs: list[EmbedJob], p: Postponed) -> dict[str, int]:
        s = self.settings
        delay = p.retry_after if p.retry_after else s.job_backoff_seconds
        delay = min(delay + random.uniform(0, s.job_backoff_seconds), s.job_backoff_max_seconds)
        METRICS.jobs_postponed.labels(reason=p.reason).inc(len(jobs))
        log.info("embed batch postponed", extra={"jobs": len(jobs), "reason": p.reason, "delay": round(delay, 3)})
        self.queue.send(jobs, countdown=delay)
        return {"postponed": len(jobs)}

    def _crashed(self, jobs: list[EmbedJob]) -> BatchOutcome:
        out = BatchOutcome()
        out.retry = [replace(j, attempt=j.attempt + 1)
                     for j in jobs if j.attempt + 1 < self.settings.job_max_attempts]
        return out

    def _settle(self, jobs: list[EmbedJob], out: BatchOutcome) -> dict[str, int]:
        retrying = {j.job_key for j in out.retry}
        finished = [j for j in jobs if j.job_key not in retrying]
        if out.retry:
            s = self.settings
            attempt = max(j.attempt for j in out.retry)
            delay = backoff_delay(attempt, s.job_backoff_seconds, s.job_backoff_max_seconds, out.retry_after)
            METRICS.jobs_retried.inc(len(out.retry))
            self.queue.send(out.retry, countdown=delay)
        self.queue.release(finished)
        self.queue.announce(out.changed)
        log.info("embed batch done", extra={"jobs": len(jobs), "changed": len(out.changed),
                                            "retry": len(out.retry), "provider_calls": out.provider_calls})
        return {"jobs": len(jobs), "changed": len(out.changed), "retry": len(out.retry)}


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


# How the composition root builds a worker process's runtime: (settings, the Celery app, the
# embedder's dimension when the preflight already probed it).
RuntimeBuilder = Callable[[Settings, "Celery | None", "int | None"], Runtime]


def runtime(settings: Settings, app: Celery, dim: int | None, build: RuntimeBuilder) -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = build(settings, app, dim)
        return _runtime
