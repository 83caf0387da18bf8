"""Settings of the distributed profile: Celery and Redis, the reconciler, the provider breaker."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DistributedSettings(BaseModel):
    """Celery/Redis behaviour, the reconciler and the circuit breaker."""

    # `vibe-semantic worker` serves Prometheus metrics for the whole worker (prefork children
    # included) on this port; None = off.
    metrics_port: int | None = Field(default=None, description=(
        "Port on which `vibe-semantic worker` serves Prometheus metrics for the whole worker; unset = "
        "off."))
    # A message a worker took but did not ack comes back after this long; it must exceed the
    # longest batch plus the longest retry countdown, or a slow batch would run twice.
    celery_visibility_timeout: float = Field(default=3600.0, description=(
        "Seconds before a message a worker took but did not acknowledge is delivered again; must exceed "
        "the longest batch plus retry."))
    # how often workers sweep for messages past the visibility timeout
    celery_restore_interval: int = Field(default=10, description=(
        "Seconds between workers' sweeps for messages past the visibility timeout."))
    # lanes a worker consumes, strictly in this order
    worker_queues: str = Field(default="interactive,control,bulk", description=(
        "Lanes a worker consumes, strictly in this order (comma-separated)."))
    # a dead broker must not stall a read or a write
    redis_timeout_seconds: float = Field(default=0.5, description=(
        "Timeout of each Redis call, so a dead broker does not stall reads or writes."))
    # after a Redis error, skip Redis this long (no per-call timeouts)
    redis_down_backoff_seconds: float = Field(default=2.0, description="After a Redis error, skip Redis for this long.")
    # a pending job key older than this no longer blocks a re-enqueue
    job_dedupe_ttl_seconds: float = Field(default=3600.0, description=(
        "A pending-job key older than this no longer blocks a re-enqueue."))
    job_backoff_max_seconds: float = Field(default=60.0, description="Longest retry delay of an embedding job.")
    reconcile_interval_seconds: float = Field(default=30.0, description=(
        "How often the reconciler looks for rows stuck in `queued`."))
    # `queued` longer than this without progress = a lost job
    reconcile_stuck_seconds: float = Field(default=300.0, description=(
        "A row `queued` this long without progress counts as a lost job and is repaired or re-enqueued."))
    reconcile_batch: int = Field(default=10_000, description="Most stuck rows the reconciler handles per pass.")
    # workers announce finished jobs on Redis pub/sub (faster stream wake-ups)
    queue_pubsub: bool = Field(default=True, description=(
        "Workers announce finished jobs on Redis pub/sub, so streams wake up sooner."))
    # consecutive non-429 provider failures that open the circuit
    breaker_failures: int = Field(default=5, description=(
        "Consecutive non-429 provider failures that open the circuit breaker (reads then answer "
        "lexically)."))
    # open → half-open (one probe call) after this long
    breaker_cooldown_seconds: float = Field(default=30.0, description=(
        "How long the circuit stays open before one probe call."))
    # per provider call (openai embedder)
    embed_timeout_seconds: float = Field(default=30.0, description="Timeout of each call to the `openai` embedder.")
