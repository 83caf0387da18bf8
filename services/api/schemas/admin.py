"""Admin: coverage, queue depth, lag, health and readiness."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from services.api.schemas.common import SECURITY_NAME

# -- admin ---------------------------------------------------------------------------------------


class Coverage(BaseModel):
    model_config = ConfigDict(extra="allow")
    collection: str | None
    space: str
    total: int
    ready: int
    indexedPct: float
    states: dict[str, int] = Field(description="documents per semantic state (`cold`: evicted to the cold store)")
    skipped: dict[str, int] = Field(description="skipped documents per reason")
    eager: bool | SkipJsonSchema[None] = Field(default=None, description="with `collection`: promoted (eager)")
    language: str | SkipJsonSchema[None] = Field(
        default=None, description="with `collection`: the language its text is analysed in for keyword search "
        "(an ISO 639-1 code, or `simple`; `VIBE_COLLECTION_LANGUAGES`, `VIBE_DEFAULT_LANGUAGE`)")
    storage: dict[str, int] = Field(
        description="the tenant's whole store, whatever `collection` says: vectors and cold vectors of every "
                    "collection and space (a vector is kept once per content hash, so it is not one collection's)")


class QueueDepth(BaseModel):
    """Pending jobs of the key's tenant per lane (the lanes are the other keys)."""

    model_config = ConfigDict(extra="allow")
    total: int
    queuedInStore: int
    broker: Literal["ok", "unreachable"]


class SpaceLag(BaseModel):
    queued: int
    oldestQueuedAgeSeconds: float


class Lag(BaseModel):
    model_config = ConfigDict(extra="allow")
    oldestQueuedAgeSeconds: float
    queued: int
    indexFollowerLag: int
    stuckQueued: int
    stuckAfterSeconds: float
    bySpace: dict[str, SpaceLag] = Field(
        description="per space embeddings go to: the active one, and one a migration is building (the totals above "
                    "are over both)")
    reconciler: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, description="the last reconcile pass (the Celery beat task, or the embedded scheduler thread)")


class Mismatch(BaseModel):
    model_config = ConfigDict(extra="allow")
    ready: int
    missingVectors: int
    examples: list[str] = Field(description="the oldest (at most 20) ready documents without a vector of record")
    wrongDimension: int = Field(default=0, description="ready documents whose vector of record has another "
                                                       "dimension than the active space's")
    wrongDimensionExamples: list[str] = Field(default_factory=list, description="the oldest (at most 20) of those")
    queuedWithoutJob: int | None = Field(default=None, description="with the Celery queue; null: broker unreachable")
    queuedWithoutJobExamples: list[str] | SkipJsonSchema[None] = None


class Health(BaseModel):
    status: Literal["ok"]


class ReadinessCheckResult(BaseModel):
    ok: bool
    required: bool = Field(description="false: the service answers without this part, degraded (the job queue's "
                                        "broker), so its failure alone does not make /readyz answer 503")
    ms: float = Field(description="how long the check took, in milliseconds")
    error: str | SkipJsonSchema[None] = Field(default=None, description="why it failed (never a secret)")


class Readiness(BaseModel):
    """Every required check passed. Otherwise 503 `not_ready`, whose `details` hold `failed` (the
    required checks that failed) and `checks` (every check, as here)."""

    status: Literal["ready"]
    ready: bool
    embedder: str
    dim: int
    checks: dict[str, ReadinessCheckResult] = Field(description="store, lexical, vectors, queue")


METRICS_TEXT: dict[int | str, dict[str, Any]] = {200: {
    "description": "Prometheus text exposition format",
    "content": {"text/plain": {"schema": {"type": "string"}}}}}
# /metrics asks for the metrics token (a bearer) only when VIBE_METRICS_TOKEN is set.
OPTIONAL_BEARER: dict[str, Any] = {"security": [{}, {SECURITY_NAME: []}]}
