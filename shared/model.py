"""Domain model shared by the core and every adapter. Plain dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, NamedTuple

# Every principal of a tenant may read a document stored without `_acl`.
PUBLIC_PRINCIPAL = "*"


class SemanticStatus(StrEnum):
    """Sidecar states (V§4.1, DESIGN.md §4). `failed` extends the list: a job that ran out of
    retries stays visible with its reason instead of looking `queued` forever."""

    NONE = "none"
    QUEUED = "queued"
    READY = "ready"
    STALE = "stale"
    DENIED = "denied"
    DEFERRED = "deferred"
    FAILED = "failed"


Strategy = Literal["auto", "keyword", "semantic", "hybrid"]
Scope = Literal["read", "write", "admin"]


@dataclass(frozen=True)
class Principal:
    """Who is asking: decided by the API key, never by the request body."""

    tenant: str
    principals: tuple[str, ...]
    scopes: frozenset[str]

    @property
    def readable_acl(self) -> list[str]:
        """ACL tokens this caller matches: its principals plus the tenant-wide marker."""
        return [PUBLIC_PRINCIPAL, *self.principals]

    def may(self, scope: str) -> bool:
        return scope in self.scopes


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
    intent: str | None  # writer intent from `_vibe.semantic.intent` (V§2.3)
    content_hash: str
    updated_at: float
    vibe: dict[str, Any] = field(default_factory=dict)

    def readable_by(self, principal: Principal) -> bool:
        return principal.tenant == self.key.tenant and bool(
            set(self.acl) & set(principal.readable_acl)
        )


@dataclass
class SidecarEntry:
    """Semantic state of one document in one space (V§3.1). Never shown to other tenants."""

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
    """Idempotent by `{docId, space, contentHash}` (V§13, DESIGN.md §4)."""

    key: DocKey
    space: str
    content_hash: str
    priority: Literal["interactive", "bulk"] = "interactive"
    attempt: int = 0

    @property
    def job_key(self) -> tuple[str, str, str, str, str]:
        return (self.key.tenant, self.key.collection, self.key.doc_id, self.space, self.content_hash)


class Hit(NamedTuple):
    """One engine hit: a document reference and the engine's own score."""

    key: DocKey
    score: float


@dataclass(frozen=True)
class Decision:
    """What the eligibility policy decided for one document (V§5)."""

    action: Literal["embed", "ignore", "defer"]
    reason: str
    fields: tuple[str, ...] | None = None  # fields to embed; None = the collection default
    space: str | None = None
