"""Domain model shared by the core and every adapter. Plain dataclasses, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, NamedTuple

from shared.conditions import FieldCondition, matches

# Every principal of a tenant may read a document stored without `_acl`.
PUBLIC_PRINCIPAL = "*"


class SemanticStatus(StrEnum):
    """Sidecar states. `failed` extends the list: a job that ran out of
    retries stays visible with its reason instead of looking `queued` forever."""

    NONE = "none"
    QUEUED = "queued"
    READY = "ready"
    STALE = "stale"
    DENIED = "denied"
    DEFERRED = "deferred"
    FAILED = "failed"


# A stored status to its member: `SemanticStatus(value)` goes through EnumType.__call__, a few
# microseconds per sidecar row read, and reads load hundreds of rows per query.
STATUS_OF: dict[str, SemanticStatus] = {s.value: s for s in SemanticStatus}


Strategy = Literal["auto", "keyword", "semantic", "hybrid"]
Scope = Literal["read", "write", "admin"]


@dataclass(frozen=True)
class Principal:
    """Who is asking: decided by the API key, never by the request body."""

    tenant: str
    principals: tuple[str, ...]
    scopes: frozenset[str]
    certs: frozenset[str] = frozenset()  # certificates held ("issuer:name"), carried for the certificate filter
    key_id: str | None = None  # the key's id; for an end-user token, the id of the key that minted it
    # An end-user token's `filter`: ANDed to every read made with it (engine queries and re-checks)
    filter: tuple[FieldCondition, ...] = ()
    via_token: bool = False  # an end-user token, not a key: it may not mint tokens or manage keys

    @property
    def readable_acl(self) -> list[str]:
        """ACL tokens this caller matches: its principals plus the tenant-wide marker."""
        return [PUBLIC_PRINCIPAL, *self.principals]

    def may(self, scope: str) -> bool:
        return scope in self.scopes

    def holds(self, certs: Sequence[str]) -> bool:
        """Whether this caller holds every one of a document's certificates (none: always)."""
        return all(c in self.certs for c in certs)

    def admits(self, fields: dict[str, Any]) -> bool:
        """Whether a document's fields meet this caller's own filter (always, without one)."""
        if not self.filter:
            return True
        return matches(self.filter, fields)


class DocKey(NamedTuple):
    """A value type built ~500 times per query: a NamedTuple is created and hashed in C,
    several times faster than a frozen dataclass on this hot path."""

    tenant: str
    collection: str
    doc_id: str

    @property
    def ref(self) -> str:
        """Collection-qualified id, unique within a tenant."""
        return f"{self.collection}/{self.doc_id}"


@dataclass
class StoredDoc:
    key: DocKey
    fields: dict[str, Any]
    acl: list[str]
    intent: str | None  # writer intent from `_vibe.semantic.intent`
    content_hash: str
    updated_at: float
    vibe: dict[str, Any] = field(default_factory=dict)
    # Certificates a reader must hold, every one of them, besides the ACL ("issuer:name").
    # Documents stored before certificates existed have none, so they require none.
    certs: list[str] = field(default_factory=list)

    def readable_by(self, principal: Principal) -> bool:
        return principal.tenant == self.key.tenant and bool(
            set(self.acl) & set(principal.readable_acl)
        ) and principal.holds(self.certs) and principal.admits(self.fields)


# Where a document's certificates are kept in the store: beside `_vibe`, in the same JSON
# column, so documents stored before certificates existed read back with none and no schema
# change is needed. `_vibe` itself may not use this key (services/core/documents.py).
CERTS_IN_VIBE = "_certs"


def vibe_column(doc: StoredDoc) -> dict[str, Any]:
    """What the store writes in a document's `vibe` column: `_vibe`, plus its certificates."""
    return {**doc.vibe, CERTS_IN_VIBE: list(doc.certs)} if doc.certs else doc.vibe


def from_vibe_column(stored: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A `vibe` column read back: (`_vibe`, certificates)."""
    if CERTS_IN_VIBE not in stored:
        return stored, []
    vibe = {k: v for k, v in stored.items() if k != CERTS_IN_VIBE}
    certs = stored[CERTS_IN_VIBE]
    return vibe, [str(c) for c in certs] if isinstance(certs, list) else []


@dataclass
class SidecarEntry:
    """Semantic state of one document in one space. Never shown to other tenants."""

    key: DocKey
    space: str
    status: SemanticStatus
    content_hash: str
    reason: str | None = None
    model_id: str | None = None
    last_embedded_at: float | None = None
    attempts: int = 0
    updated_at: float = 0.0
    cold_ref: str | None = None


@dataclass(frozen=True)
class EmbedJob:
    """Idempotent by `{docId, space, contentHash}`."""

    key: DocKey
    space: str
    content_hash: str
    priority: Literal["interactive", "bulk"] = "interactive"
    attempt: int = 0
    # A forced re-embed (`POST /semantic/reindex {"force": true}`) calls the provider even when
    # a stored or cold vector of the same content exists.
    fresh: bool = False
    # Why the provider is called (the ledger's `purpose`: touch, eager, backfill, migration,
    # tool); not part of the job's identity, so a touch and a backfill of one version dedupe.
    purpose: str = "touch"

    @property
    def job_key(self) -> tuple[str, str, str, str, str]:
        return (self.key.tenant, self.key.collection, self.key.doc_id, self.space, self.content_hash)


class Hit(NamedTuple):
    """One engine hit: a document reference and the engine's own score."""

    key: DocKey
    score: float


# Hot-loop constructors (engines and fusion build ~500 of each per query): a NamedTuple's
# `__new__` is Python code; `tuple.__new__` builds the same value in C, ~100-200 ns less each.
_tuple_new = tuple.__new__


def doc_key(tenant: str, collection: str, doc_id: str) -> DocKey:
    return _tuple_new(DocKey, (tenant, collection, doc_id))


def hit(key: DocKey, score: float) -> Hit:
    return _tuple_new(Hit, (key, score))


Vector = list[float]
# A document's embedding: one vector per passage (shared/text/passages.py), in passage order; a
# document that fits the model's window has exactly one.
DocVectors = list[Vector]


def as_doc_vectors(value: Sequence[float] | Sequence[Sequence[float]]) -> DocVectors:
    """A single vector as the one passage of a short document; passage vectors as they are."""
    if value and not isinstance(value[0], int | float):
        return [list(v) for v in value]  # type: ignore[arg-type]
    return [list(value)]  # type: ignore[arg-type]


def flatten(vectors: DocVectors) -> Vector:
    """Passage vectors end to end (how stores and the cold store keep them, with the dimension)."""
    return [x for v in vectors for x in v] if len(vectors) != 1 else vectors[0]


def unflatten(flat: Sequence[float], dim: int) -> DocVectors | None:
    """`flatten`'s inverse; None when `flat` is not a whole number of `dim`-vectors."""
    if dim <= 0 or not flat or len(flat) % dim:
        return None
    return [list(flat[i:i + dim]) for i in range(0, len(flat), dim)]


def centroid(vectors: DocVectors) -> Vector:
    """One direction for a whole document (more-like-this queries with it): the normalised mean
    of its passage vectors; a one-passage document's own vector."""
    if len(vectors) == 1:
        return vectors[0]
    dim = len(vectors[0])
    mean = [sum(v[i] for v in vectors) / len(vectors) for i in range(dim)]
    norm = sum(x * x for x in mean) ** 0.5
    return [x / norm for x in mean] if norm > 0 else mean


@dataclass(frozen=True)
class Decision:
    """What the eligibility policy decided for one document."""

    action: Literal["embed", "ignore", "defer"]
    reason: str
    fields: tuple[str, ...] | None = None  # fields to embed; None = the collection default
    space: str | None = None


# Eviction leaves the sidecar `none` with a cold reference; clients and coverage
# see that as the state `cold`.
COLD = "cold"


def visible_status(side: SidecarEntry) -> str:
    """The state shown to clients: `cold` for an evicted vector, else the sidecar's state."""
    if side.status == SemanticStatus.NONE and side.cold_ref:
        return COLD
    return side.status.value


@dataclass(frozen=True)
class CollectionUsage:
    """Queries and page hits of one collection within a window, and its last query."""

    tenant: str
    collection: str
    queries: int
    hits: int
    last_query_at: float | None


@dataclass(frozen=True)
class CollectionMode:
    """Whether a collection embeds on write (`eager`) or on touch (`lazy`), since when and why.
    `manual` decisions (an operator's promote or demote) are never overridden by the scheduler."""

    tenant: str
    collection: str
    mode: Literal["eager", "lazy"]
    since: float
    reason: str
    manual: bool
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class UsageBatch:
    """Usage a process observed since its last flush (services/planner/usage.py)."""

    queries: dict[tuple[str, str], int] = field(default_factory=dict)  # (tenant, collection) -> n
    hits: dict[tuple[str, str], int] = field(default_factory=dict)
    last_query: dict[tuple[str, str], float] = field(default_factory=dict)
    touches: dict[DocKey, int] = field(default_factory=dict)  # documents a query could embed
    used: dict[DocKey, float] = field(default_factory=dict)  # documents shown on a page: last use
    pages: list[tuple[DocKey, ...]] = field(default_factory=list)  # for co-occurrence
    # query embeddings sent to the provider: (tenant, collection) -> [calls, estimated tokens]
    provider: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.queries or self.touches or self.used or self.pages or self.provider)


@dataclass(frozen=True)
class BackfillTask:
    """A rolling, budgeted pass over a tenant's documents (promotion backfill, reindex, space
    migration) that the scheduler advances step by step from a durable cursor, so a restart
    resumes it."""

    id: str
    tenant: str
    collection: str | None
    space: str
    kind: Literal["promote", "reindex", "migrate", "rehydrate"]
    force: bool
    cursor: str
    examined: int
    queued: int
    total: int
    state: Literal["running", "done", "cancelled"]
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class SpaceInfo:
    """A tenant's space: which model it holds and where it is in its life."""

    tenant: str
    space: str
    model_id: str
    dim: int
    # `expiring`: a retired space whose retention passed, being removed (never re-activated)
    state: Literal["active", "building", "retired", "expiring"]
    created_at: float
    activated_at: float | None = None
    # When it was last retired (its vectors went to the cold store); None unless `retired`. Its
    # cold files are kept for VIBE_RETIRED_SPACE_RETENTION_SECONDS from then (model rollback).
    retired_at: float | None = None
    # What a migration into it (state `building`) embeds: `all` the tenant's documents, or
    # only what the active space holds `ready` (and every document of an eager collection); the
    # rest is embedded on its first touch once the space is active, as anywhere in a lazy tenant.
    scope: Literal["all", "ready"] = "all"
