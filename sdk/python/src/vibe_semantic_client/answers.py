"""Typed answers of the document writes, admin, collection, key and token calls.

Each class is the TypeScript SDK's type of the same name (the OpenAPI schema it is generated
from), field for field, with snake_case attributes. Like `models`: frozen dataclasses filled by
plain copying (no validation library), and each keeps the JSON it came from in `raw`.

`answer["wireName"]` (and `in`, `.get`) reads that JSON: these calls returned plain dicts before
they were typed, and code written then keeps working; it is also how to reach a field a newer
server added before this package names it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, Union

JSON = dict[str, Any]
M = TypeVar("M", bound="Model")


@dataclass(frozen=True, slots=True)
class Model:
    """Base of the typed answers. `schema`: the OpenAPI schema a class mirrors (its own name
    unless set; None for an answer the SDK makes itself)."""

    raw: JSON = field(default_factory=dict, repr=False, compare=False, kw_only=True)
    schema: ClassVar[str | None] = None

    @classmethod
    def from_json(cls: type[M], data: Any) -> M:
        d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        values = {f.name: _value(d, wire, hint, f) for f, wire, hint in _fields(cls)}
        return cls(**values, raw=dict(d))

    def __getitem__(self, wire: str) -> Any:
        return self.raw[wire]

    def __contains__(self, wire: object) -> bool:
        return wire in self.raw

    def get(self, wire: str, default: Any = None) -> Any:
        return self.raw.get(wire, default)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_Fields = tuple[tuple[dataclasses.Field[Any], str, Any], ...]
_FIELDS: dict[type[Model], _Fields] = {}


def _fields(cls: type[Model]) -> _Fields:
    """Each field, its JSON name (`metadata["wire"]` where it is not the camelCase of the
    attribute) and its resolved type; worked out once per class."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple((f, f.metadata.get("wire") or _camel(f.name), hints[f.name])
                                     for f in dataclasses.fields(cls) if f.name != "raw")
    return found


def _value(d: Mapping[str, Any], name: str, hint: Any, f: dataclasses.Field[Any]) -> Any:
    if name in d:
        return _convert(hint, d[name])
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _convert(hint, None)


# What a field the server left out holds (the parsing never raises, as in `models`).
_EMPTY: dict[Any, Any] = {int: 0, float: 0.0, str: "", bool: False}


def _convert(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(args[0], value) if len(args) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Model):
        return hint.from_json(value)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, v) for v in value or ()]
    if origin is dict:
        _, item = typing.get_args(hint)
        return {k: _convert(item, v) for k, v in (value or {}).items()}
    if value is None:
        return _EMPTY.get(hint)
    return value


# -- documents ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Written(Model):
    """`put`: `result` is "created" or "updated"."""

    id: str = field(metadata={"wire": "_id"})  # not the camelCase of its name
    collection: str
    result: str


@dataclass(frozen=True, slots=True)
class Deleted(Model):
    """`delete`: `result` is "deleted"."""

    id: str = field(metadata={"wire": "_id"})  # not the camelCase of its name
    collection: str
    result: str


@dataclass(frozen=True, slots=True)
class MatchReason(Model):
    """A leg found the document: its rank and score there; for the keyword leg, per `field`,
    the highlight fragments (matched terms in <b>, HTML-escaped)."""

    type: str  # "match"
    leg: str  # "keyword" | "semantic"
    rank: int
    score: float
    field: str | None = None
    highlights: list[str] | None = None


@dataclass(frozen=True, slots=True)
class EdgeReason(Model):
    """Reached through the graph overlay: `collection/id` of each document on the way (the hit
    first), the edges of the path as stored, and how many edges from the hit."""

    type: str  # "edge"
    path: list[str]
    edges: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    depth: int | None = None


@dataclass(frozen=True, slots=True)
class CertReason(Model):
    """A certificate (`issuer:name`) the document requires, which the caller holds."""

    type: str  # "cert"
    issuer: str
    name: str
    rule: str  # "required"


@dataclass(frozen=True, slots=True)
class NotEmbeddedReason(Model):
    """Why the document has no vector in the ranking's space (`status`, and the sidecar's
    `reason`: a policy rule, the writer's intent, `budget`, `cert`, ...)."""

    type: str  # "not_embedded"
    status: str
    reason: str | None
    space: str


@dataclass(frozen=True, slots=True)
class OtherReason(Model):
    """A reason of a type this package does not know yet (a newer server): see `raw`."""

    schema: ClassVar[str | None] = None
    type: str


ExplainReason = MatchReason | EdgeReason | CertReason | NotEmbeddedReason | OtherReason
_REASONS: dict[str, type[Model]] = {"match": MatchReason, "edge": EdgeReason, "cert": CertReason,
                                    "not_embedded": NotEmbeddedReason}


@dataclass(frozen=True, slots=True)
class LegContribution(Model):
    """What one leg put into the ranking's score: `contribution` = `weight` x `normalised`
    (its z-score, 1/(k + rank) for RRF, or the raw score alone); a ranking's sum to its score."""

    leg: str
    rank: int | None
    raw_score: float | None = field(metadata={"wire": "raw"})  # `raw` is every answer's JSON
    normalised: float
    weight: float
    contribution: float
    stand_in: bool | None = None


@dataclass(frozen=True, slots=True)
class RerankContribution(Model):
    """What a read's rerank stage (`rerank=True`) did with a hit: its fused and shown rank (from
    1) and the reranker's score (None: not sent, it kept its place)."""

    fused_rank: int
    rank: int
    score: float | None


@dataclass(frozen=True, slots=True)
class Explanation(Model):
    """`explain`: why a hit is where it is: the fusion used, each leg's contribution, and the
    reasons (`MatchReason`, `CertReason`, `NotEmbeddedReason`, `EdgeReason`)."""

    id: str
    collection: str
    strategy: str
    score: float
    fusion: str  # "zscore" | "rrf" | "none"
    shown_score: float
    weights: dict[str, float]
    contributions: list[LegContribution]
    reasons: list[ExplainReason]
    expires_at: float
    rerank: RerankContribution | None = None  # the read asked for `rerank` and the reranker answered

    @classmethod
    def from_json(cls, data: Any) -> Explanation:
        # `Model.from_json` leaves a list of several classes as JSON: each reason is typed by its `type`
        out = Model.from_json.__func__(cls, data)  # type: ignore[attr-defined]  # zero-arg super() fails in slots classes
        reasons = [_REASONS.get(str(r.get("type")), OtherReason).from_json(r) if isinstance(r, Mapping) else r
                   for r in out.raw.get("reasons") or ()]
        return dataclasses.replace(out, reasons=reasons)  # type: ignore[no-any-return]


# -- semantic state, coverage, lifecycle --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Coverage(Model):
    collection: str | None
    space: str
    total: int
    ready: int
    indexed_pct: float
    states: dict[str, int]
    skipped: dict[str, int]
    storage: dict[str, int]
    eager: bool | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class DocLifecycle(Model):
    eager: bool
    last_used_at: str | None
    touches: float
    pinned_until: str | None
    evictable_at: str | None


@dataclass(frozen=True, slots=True)
class PendingJob(Model):
    doc_id: str
    space: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class DocStatus(Model):
    status: str
    last_embedded_at: str | None
    space: str
    lifecycle: DocLifecycle
    content_hash: str  # `sha256:<hex>` of the document's normalized text
    reason: str | None = None
    job: PendingJob | None = None  # while the document is `queued`
    content_matches: bool | None = None  # with `contentHash=`: whether it names the content


@dataclass(frozen=True, slots=True)
class Backfill(Model):
    id: str
    kind: str
    collection: str | None
    space: str
    force: bool
    state: str
    examined: int
    total: int
    queued: int
    progress_pct: float
    docs_per_second: float | None = None  # documents examined per second lately (None: not measured yet)
    eta_seconds: float | None = None  # seconds left at that rate (0.0 once done)


@dataclass(frozen=True, slots=True)
class CollectionMode(Model):
    collection: str
    state: str
    since: str | None
    reason: str | None
    manual: bool
    figures: JSON | None = None


@dataclass(frozen=True, slots=True)
class Promotions(Model):
    collections: list[CollectionMode]
    pinned_documents: int
    backfills: list[Backfill]


@dataclass(frozen=True, slots=True)
class Promoted(Model):
    collection: str
    mode: str
    queued: int
    task: Backfill


@dataclass(frozen=True, slots=True)
class Demoted(Model):
    collection: str
    mode: str


@dataclass(frozen=True, slots=True)
class SchedulerChange(Model):
    at: str
    promoted: list[str] | None = None
    demoted: list[str] | None = None
    pinned: int | None = None
    evicted: int | None = None
    retired_expired: list[str] | None = None
    gone_rows: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerPolicy(Model):
    promote_min_queries: int
    promote_min_hits: int
    promote_window_seconds: float
    demote_idle_seconds: float
    doc_promote_touches: float
    doc_promote_ttl_seconds: float
    evict_idle_seconds: float
    cold_codec: str
    retired_space_retention_seconds: float


@dataclass(frozen=True, slots=True)
class SchedulerView(Model):
    interval_seconds: float
    last_tick_at: str | None
    last_tick_failed: list[str]
    last_change: SchedulerChange | None
    policy: SchedulerPolicy


@dataclass(frozen=True, slots=True)
class QueueDepth(Model):
    total: int
    queued_in_store: int
    broker: str


@dataclass(frozen=True, slots=True)
class SpaceLag(Model):
    queued: int
    oldest_queued_age_seconds: float


@dataclass(frozen=True, slots=True)
class Lag(Model):
    oldest_queued_age_seconds: float
    queued: int
    index_follower_lag: int
    stuck_queued: int
    stuck_after_seconds: float
    by_space: dict[str, SpaceLag]
    reconciler: JSON | None = None


@dataclass(frozen=True, slots=True)
class Reindexing(Model):
    queued: int
    task: Backfill
    collection: str | None
    space: str
    force: bool


@dataclass(frozen=True, slots=True)
class UsageToday(Model):
    day: str
    tokens: int
    remaining: int | None


@dataclass(frozen=True, slots=True)
class UsageDay(Model):
    day: str
    calls: int
    documents: int
    tokens: int
    estimated_cost: float


@dataclass(frozen=True, slots=True)
class Usage(Model):
    collection: str | None
    model: str
    price_per_million_tokens: float
    currency: str
    daily_token_cap: int | None
    today: UsageToday
    days: list[UsageDay]


@dataclass(frozen=True, slots=True)
class LedgerEntry(Model):
    """One document's part of one provider call; a query's row has no `id` nor `fields`."""

    call_id: str
    tenant: str
    collection: str
    id: str | None = field(metadata={"wire": "_id"})  # not the camelCase of its name
    fields: list[str] | None = None
    space: str = ""
    provider: str = ""
    model: str = ""
    tokens: int = 0
    purpose: str = ""
    at: str = ""
    outcome: str = ""


@dataclass(frozen=True, slots=True)
class LedgerPage(Model):
    rows: list[LedgerEntry]
    next_cursor: str | None
    oldest_at: str | None
    retention_days: int


@dataclass(frozen=True, slots=True)
class Evicted(Model):
    collection: str
    evicted: int
    idle_seconds: float


@dataclass(frozen=True, slots=True)
class Mismatch(Model):
    ready: int
    missing_vectors: int
    examples: list[str]
    wrong_dimension: int | None = None  # ready documents whose vector has another dimension than the space's
    wrong_dimension_examples: list[str] | None = None
    queued_without_job: int | None = None
    queued_without_job_examples: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Backfills(Model):
    backfills: list[Backfill]


@dataclass(frozen=True, slots=True)
class DeadLetter(Model):
    follower: str
    seq: int
    collection: str
    doc_id: str = field(metadata={"wire": "doc_id"})
    op: str
    error: str
    at: str | None


@dataclass(frozen=True, slots=True)
class DeadLetters(Model):
    dead_letters: list[DeadLetter]


@dataclass(frozen=True, slots=True)
class FollowUpCollection(Model):
    collection: str
    state: str
    reads: int
    mean: float
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class FollowUpView(Model):
    """`touch`: `follow_up` is "auto", True or False."""

    follow_up: bool | str
    after: int
    below: float
    flush_every: int
    refresh_seconds: float
    collections: list[FollowUpCollection]
    next: str | None


# -- spaces ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ColdSize(Model):
    vectors: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Retiring(Model):
    to_move: int
    moved: int
    state: str


@dataclass(frozen=True, slots=True)
class Space(Model):
    space: str
    model: str
    dim: int
    state: str
    created_at: str | None
    activated_at: str | None
    coverage: JSON | None = None
    migration: Backfill | None = None
    retired_at: str | None = None
    retention_until: str | None = None
    cold: ColdSize | None = None
    retiring: Retiring | None = None
    expiring: bool | None = None
    scope: str | None = None
    to_embed: int | None = None


@dataclass(frozen=True, slots=True)
class Spaces(Model):
    spaces: list[Space]


@dataclass(frozen=True, slots=True)
class Migrating(Model):
    """`create_space`: the rolling re-embed that started."""

    space: str
    model: str
    dim: int
    state: str
    scope: str
    queued: int
    task: Backfill


@dataclass(frozen=True, slots=True)
class Rehydration(Model):
    from_cold: int
    to_embed: int
    realigned: int
    queued: int
    task: Backfill


@dataclass(frozen=True, slots=True)
class Activated(Model):
    space: str
    state: str
    retired: str
    dropped_sidecars: int
    reactivated: bool
    retired_to_cold: int
    retired_to_move: int
    retired_cold: ColdSize
    retention_until: str | None
    rehydration: Rehydration | None = None


# -- collections -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CollectionItem(Model):
    name: str
    language: str
    eager: bool
    embed_fields: list[str] | None
    filterable_fields: list[str] | None
    documents: int | None = None
    rerank: bool = False  # its reads rerank unless they say otherwise


@dataclass(frozen=True, slots=True)
class CollectionList(Model):
    collections: list[CollectionItem]
    next: str | None


@dataclass(frozen=True, slots=True)
class CollectionDeleted(Model):
    """`state` "deleted", or "deleting" while `remaining` documents are left (call again)."""

    collection: str
    state: str
    deleted: int
    remaining: int


@dataclass(frozen=True, slots=True)
class DeletedByFilter(Model):
    collection: str
    deleted: int
    examined: int
    more: bool
    after: str | None


@dataclass(frozen=True, slots=True)
class CollectionSettings(Model):
    collection: str
    language: str
    embed_fields: list[str] | None
    filterable_fields: list[str] | None
    eager: bool
    updated_at: float | None
    rerank: bool = False  # its reads rerank (with `default`) unless a read says `rerank` itself
    schema: ClassVar[str | None] = "CollectionSettingsOut"


# -- keys, tokens, health ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class KeyCreated(Model):
    """The secret `key` is in this answer only."""

    id: str
    key: str
    name: str
    principals: list[str]
    certs: list[str]
    scopes: list[str]
    created_at: str


@dataclass(frozen=True, slots=True)
class KeyView(Model):
    id: str
    name: str
    principals: list[str]
    certs: list[str]
    scopes: list[str]
    created_at: str | None
    bootstrap: bool


@dataclass(frozen=True, slots=True)
class Keys(Model):
    keys: list[KeyView]


@dataclass(frozen=True, slots=True)
class Revoked(Model):
    """`revoke_key`: the API answers 204 without a body; this names the key that is gone."""

    id: str
    revoked: bool = True
    schema: ClassVar[str | None] = None


@dataclass(frozen=True, slots=True)
class TokenCreated(Model):
    token: str
    expires_at: str


@dataclass(frozen=True, slots=True)
class Health(Model):
    status: str


def schema_name(cls: type[Model]) -> str | None:
    """The OpenAPI schema `cls` mirrors: its `schema` if it sets one, else its class name."""
    return cls.__dict__.get("schema", cls.__name__)


def wire_names(cls: type[Model]) -> set[str]:
    """The JSON names of `cls`'s fields (what the schema's properties must be)."""
    return {name for _, name, _ in _fields(cls)}
