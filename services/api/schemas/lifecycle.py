"""Lifecycle: backfills, reindexing, collection modes, eviction, usage, the scheduler, spaces and dead letters."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from services.api.schemas.common import SPACE_NAME, TEN_YEARS, _as, _name_field

# -- lifecycle -------------------------------------------------------------------------------------


class Backfill(BaseModel):
    """A backfill task (reindex, promote, migrate) and its progress."""

    model_config = ConfigDict(extra="allow")
    id: str
    kind: str
    collection: str | None
    space: str
    force: bool
    state: str
    examined: int
    total: int
    queued: int
    progressPct: float
    docsPerSecond: float | None = Field(description=(
        "documents examined per second over the last minute of steps (the average since the start when "
        "fewer were seen); null until a second step"))
    etaSeconds: float | None = Field(description=(
        "seconds until every document is examined at that rate (0 once done; null while no rate is known "
        "and for a cancelled task); the last queued jobs are embedded after it"))


class ReindexIn(BaseModel):
    model_config = ConfigDict(title="ReindexRequest", extra="forbid")
    space: str | SkipJsonSchema[None] = Field(default=None, description="the active space (default) or a building "
                                                                        "one; another answers 404")
    collection: str | None = _name_field("a collection; absent or null: every collection of the tenant", nullable=True)
    force: bool = Field(default=False, description="re-embed `ready` documents too (a provider call each)")


class Reindexing(BaseModel):
    model_config = ConfigDict(extra="allow")
    queued: int
    task: Backfill
    collection: str | None
    space: str
    force: bool


class CollectionIn(BaseModel):
    model_config = ConfigDict(title="CollectionRequest", extra="forbid")
    collection: str = _name_field("the collection")


class Promoted(BaseModel):
    model_config = ConfigDict(extra="allow")
    collection: str
    mode: Literal["eager"]
    queued: int
    task: Backfill


class Demoted(BaseModel):
    collection: str
    mode: Literal["lazy"]


class CollectionMode(BaseModel):
    model_config = ConfigDict(extra="allow")
    collection: str
    state: Literal["eager", "lazy"]
    since: str | None
    reason: str | None = Field(description="`manual` or `auto: <figures>`")
    manual: bool
    figures: dict[str, Any] | None = None


class Promotions(BaseModel):
    model_config = ConfigDict(extra="allow")
    collections: list[CollectionMode]
    pinnedDocuments: int = Field(description="documents of the tenant kept embedded by a pin")
    backfills: list[Backfill]


class Backfills(BaseModel):
    backfills: list[Backfill]


class EvictIn(BaseModel):
    model_config = ConfigDict(title="EvictRequest", extra="forbid")
    collection: str = _name_field("the collection")
    idleSeconds: Annotated[float, Field(ge=0, le=TEN_YEARS)] | SkipJsonSchema[None] = Field(
        default=None, description="default VIBE_EVICT_IDLE_SECONDS")


class Evicted(BaseModel):
    collection: str
    evicted: int
    idleSeconds: float


class UsageToday(BaseModel):
    day: str
    tokens: int
    remaining: int | None


class UsageDay(BaseModel):
    model_config = ConfigDict(extra="allow")
    day: str
    calls: int
    documents: int
    tokens: int
    estimatedCost: float


class Usage(BaseModel):
    collection: str | None
    model: str
    pricePerMillionTokens: float
    currency: str
    dailyTokenCap: int | None
    today: UsageToday
    days: list[UsageDay]


class ColdSize(BaseModel):
    vectors: int
    bytes: int


class SchedulerPolicy(BaseModel):
    promoteMinQueries: int = Field(description="VIBE_PROMOTE_MIN_QUERIES")
    promoteMinHits: int = Field(description="VIBE_PROMOTE_MIN_HITS")
    promoteWindowSeconds: float = Field(description="VIBE_PROMOTE_WINDOW_SECONDS")
    demoteIdleSeconds: float = Field(description="VIBE_DEMOTE_IDLE_SECONDS")
    docPromoteTouches: float = Field(description="VIBE_DOC_PROMOTE_TOUCHES: decayed touches that pin a document")
    docPromoteTtlSeconds: float = Field(description="VIBE_DOC_PROMOTE_TTL_SECONDS: how long a pin lasts")
    evictIdleSeconds: float = Field(description="VIBE_EVICT_IDLE_SECONDS")
    coldCodec: Literal["float16", "int8"] = Field(description="VIBE_COLD_CODEC")
    retiredSpaceRetentionSeconds: float = Field(description="VIBE_RETIRED_SPACE_RETENTION_SECONDS (0 = kept)")


class SchedulerChange(BaseModel):
    model_config = ConfigDict(extra="allow")
    at: str = Field(description="the tick that last changed something for the tenant")
    promoted: list[str] | SkipJsonSchema[None] = Field(default=None, description="collections made eager")
    demoted: list[str] | SkipJsonSchema[None] = Field(default=None, description="collections made lazy")
    pinned: int | SkipJsonSchema[None] = Field(default=None, description="documents pinned (or re-pinned)")
    evicted: int | SkipJsonSchema[None] = Field(default=None, description="vectors moved to the cold store")
    retiredExpired: list[str] | SkipJsonSchema[None] = Field(
        default=None, description="retired spaces removed after their retention")
    goneRows: int | SkipJsonSchema[None] = Field(
        default=None, description="sidecar rows of documents that are gone, deleted (left by earlier versions)")


class SchedulerView(BaseModel):
    intervalSeconds: float = Field(description="VIBE_SCHEDULER_INTERVAL_SECONDS")
    lastTickAt: str | None = Field(description="the last tick, by whichever process holds the scheduler's lease")
    lastTickFailed: list[str] = Field(description="stages of the last tick that failed (the others ran; logged, and "
                                                  "counted in vibe_scheduler_stage_errors_total)")
    lastChange: SchedulerChange | None = Field(description="the last tick that changed something for the tenant")
    policy: SchedulerPolicy


class Rehydration(BaseModel):
    model_config = ConfigDict(extra="allow")
    fromCold: int = Field(description="documents whose vector comes back from the cold store (no provider call)")
    toEmbed: int = Field(description="documents the rehydration embeds with a provider call: those edited since "
                                     "the retirement, and in eager collections every document without a vector (in "
                                     "a lazy one a document never embedded waits for its first touch)")
    realigned: int = Field(description="rows brought up to date with the documents")
    queued: int
    task: Backfill


class Retiring(BaseModel):
    model_config = ConfigDict(extra="allow")
    toMove: int = Field(description="vectors of the retired space still to move to the cold store (in the background)")
    moved: int = Field(description="documents of the retired space whose vector is in the cold store")
    state: Literal["moving", "done"]


class Space(BaseModel):
    model_config = ConfigDict(extra="allow")
    space: str
    model: str
    dim: int
    state: Literal["active", "building", "retired"]
    createdAt: str | None
    activatedAt: str | None
    coverage: dict[str, Any] | SkipJsonSchema[None] = Field(default=None, description="not for a retired space")
    migration: Backfill | SkipJsonSchema[None] = Field(
        default=None, description="the space's latest migration, or the rehydration after its re-activation")
    retiredAt: str | SkipJsonSchema[None] = Field(default=None, description="a retired space: when it was retired")
    retentionUntil: str | None | SkipJsonSchema[None] = Field(
        default=None, description="a retired space: when its cold vectors are pruned and the space removed "
                                  "(null: kept; VIBE_RETIRED_SPACE_RETENTION_SECONDS)")
    cold: ColdSize | SkipJsonSchema[None] = Field(
        default=None, description="a retired space: its vectors in the cold store (re-activation restores them)")
    retiring: Retiring | SkipJsonSchema[None] = Field(
        default=None, description="a retired space: how far the background move of its vectors to the cold store is")
    expiring: bool | SkipJsonSchema[None] = Field(
        default=None, description="a retired space past its retention, being removed (it can no longer be "
                                  "re-activated)")
    scope: Literal["all", "ready"] | SkipJsonSchema[None] = Field(
        default=None, description="a building space: what its migration embeds (POST /semantic/spaces `scope`)")
    toEmbed: int | SkipJsonSchema[None] = Field(
        default=None, description="a building space: documents its migration has still to embed (those in its "
                                  "scope without a vector there); activation waits for 0 unless forced")


class Spaces(BaseModel):
    spaces: list[Space]


class SpaceIn(BaseModel):
    model_config = ConfigDict(title="SpaceRequest", extra="forbid")
    space: str = Field(json_schema_extra=_as({**SPACE_NAME, "description": "the new space's name"}))
    model: str = Field(min_length=1, max_length=200,
                       description="a model id (hash:v1@64, openai:<model>, local:<model>) or a model name of the "
                                   "configured provider")
    dim: int | None = Field(default=None, ge=1, le=8192)
    scope: Literal["all", "ready"] = Field(
        default="all", description="`all`: re-embed every document of the tenant; `ready`: only those with a "
                                   "vector in the active space now (and every document of an eager collection), "
                                   "the rest being embedded on its first touch once the space is active, as in any "
                                   "lazy collection")


class Migrating(BaseModel):
    model_config = ConfigDict(extra="allow")
    space: str
    model: str
    dim: int
    state: Literal["building"]
    scope: Literal["all", "ready"]
    queued: int
    task: Backfill


class ActivateIn(BaseModel):
    model_config = ConfigDict(title="ActivateRequest", extra="forbid")
    force: bool = Field(default=False, description="activate although documents are still to embed")


class Activated(BaseModel):
    model_config = ConfigDict(extra="allow")
    space: str
    state: Literal["active"]
    retired: str
    droppedSidecars: int = Field(description="always 0: a retired space's vectors go to the cold store")
    reactivated: bool = Field(description="true when a retired space was made active again (model rollback)")
    retiredToCold: int = Field(description="documents of the retired space whose vector is in the cold store so far "
                                            "(the move runs in the background after the answer; often 0)")
    retiredToMove: int = Field(description="vectors of the retired space still to move to the cold store (in the "
                                           "background; GET /semantic/spaces shows the progress as `retiring`)")
    retiredCold: ColdSize = Field(description="the retired space's vectors in the cold store")
    retentionUntil: str | None = Field(description="when the retired space's cold vectors are pruned and the space "
                                                   "removed (null: kept; VIBE_RETIRED_SPACE_RETENTION_SECONDS)")
    rehydration: Rehydration | SkipJsonSchema[None] = Field(
        default=None, description="a re-activation: what comes back from the cold store and what is embedded")


class DeadLetter(BaseModel):
    model_config = ConfigDict(extra="allow")
    follower: str
    seq: int
    collection: str
    doc_id: str
    op: str
    error: str
    at: str | None


class DeadLetters(BaseModel):
    """Index changes a follower quarantined."""

    deadLetters: list[DeadLetter]
