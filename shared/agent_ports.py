"""Ports of the agent tools: the citation registry, the tool audit log, the
pre-call check, the extract_key_info budget and task ledger, and the reranker. Kept apart from
the shared/ports package, which holds the retrieval core's ports.

Adapters: shared/adapters/citations_sqlite.py (embedded), citations_redis.py (when the
queue is Celery: several API processes), shared/adapters/mcp_audit_sqlite.py (audit log,
budget, task ledger), shared/adapters/rerank_http.py (Cohere/TEI `/rerank`). All are built
by the composition root, services/wiring/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class CitationEntry:
    """One registered citable unit (a SurfSense-compatible citation). `n` never changes meaning within its
    conversation."""

    n: int
    source_type: str  # "kb_chunk" | "kb_document" | "thought" | "kg_entity" | ...
    locator: dict[str, Any]
    display: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"n": self.n, "source_type": self.source_type, "locator": self.locator, "display": self.display}


@runtime_checkable
class CitationRegistry(Protocol):
    """Per-conversation find-or-create numbering (as SurfSense-compatible clients expect). `owner` scopes a
    conversation to the caller that opened it, so another key naming the same conversation id
    sees a different (empty) registry."""

    def register(self, owner: str, conversation: str, source_type: str, locator: dict[str, Any],
                 display: dict[str, Any]) -> int:
        """Find-or-create by the stable source key; returns the entry's [n]."""

    def resolve(self, owner: str, conversation: str, n: int) -> CitationEntry | None:
        """Unknown n → None (the caller drops it)."""

    def close(self) -> None: ...


@dataclass
class AuditRecord:
    """One tool call (the audit record extract_key_info operators expect): parameters (sizes and ids, never material
    text), timing and outcome."""

    tool: str
    tenant: str
    user: str
    params: dict[str, Any]
    outcome: str  # "ok" or an error code
    duration_ms: float
    task: str | None = None
    result_count: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class AuditLog(Protocol):
    def record(self, rec: AuditRecord) -> None: ...

    def recent(self, tenant: str, limit: int = 100) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class PreCallDenied(Exception):
    """Raised by a PreCallCheck to refuse a call before any embedding or storage work."""


@runtime_checkable
class PreCallCheck(Protocol):
    """The pre-call billing check of the extract_key_info contract, made pluggable: no billing
    system exists here, so the default allows everything and deployments plug their own
    (`VIBE_MCP_PRECALL_CHECK=module:attr`)."""

    def __call__(self, tenant: str, user: str, tool: str, params: dict[str, Any]) -> None:
        """Return to allow; raise PreCallDenied to refuse."""


class BudgetExceeded(Exception):
    """A MaterialBudget refused a charge; nothing was added."""

    def __init__(self, quota: str, limit: int, used: int, requested: int):
        super().__init__(f"{quota}: {used} used of {limit}, {requested} requested")
        self.quota = quota
        self.limit = limit
        self.used = used
        self.requested = requested


@runtime_checkable
class MaterialBudget(Protocol):
    """What one API key may feed `extract_key_info` per UTC day:
    characters of materials submitted and new chunks stored (each of which is embedded)."""

    def charge(self, key: str, day: str, chars: int, chunks: int, max_chars: int, max_chunks: int) -> None:
        """Add both amounts atomically, or raise BudgetExceeded (adding nothing) when either
        total would pass its limit."""

    def used(self, key: str, day: str) -> tuple[int, int]:
        """(characters, chunks) charged to the key on that day."""

    def close(self) -> None: ...


class RerankError(Exception):
    """The reranker could not answer (unreachable, timed out, refused, malformed reply)."""


@runtime_checkable
class Reranker(Protocol):
    """A cross-encoder behind a provider port: scores each passage
    against the query. Adapters: shared/adapters/rerank_http.py (Cohere/TEI `/rerank`)."""

    model_id: str

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        """One relevance score per passage, in the passages' order (higher is better); raises
        RerankError when the provider fails."""

    def close(self) -> None: ...


@runtime_checkable
class TaskLedger(Protocol):
    """When each extract_key_info task collection was last used (retention: tasks
    inactive for N days are purged)."""

    def touch(self, tenant: str, collection: str, now: float) -> None: ...

    def stale(self, before: float, limit: int = 100) -> list[tuple[str, str]]:
        """(tenant, collection) of tasks last used before `before`."""

    def forget(self, tenant: str, collection: str) -> None: ...

    def close(self) -> None: ...
