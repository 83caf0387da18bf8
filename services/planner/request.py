"""What a read asks for: the planner's input, parsed and bounded by the front door."""

from __future__ import annotations

from dataclasses import dataclass

from shared.model import Strategy
from shared.ports import FieldCondition


@dataclass
class ReadRequest:
    collection: str
    q: str
    strategy: Strategy = "auto"
    query_text: str | None = None
    query_doc: tuple[str, str, list[str] | None] | None = None
    k: int | None = None
    limit: int = 20
    include_semantic: bool = False
    include_highlights: bool = False
    include_fields: bool | tuple[str, ...] = False  # True: every stored field; a tuple: those
    where: tuple[FieldCondition, ...] = ()  # metadata conditions (shared/filters.py), inside every engine query
    offset: int = 0  # the page starts here (cursor pagination)
    rerank: bool = False  # the page re-ordered by the configured reranker (services/planner/rerank.py)
    domain_hint: str | None = None  # `semantic.domainHint`: reported, used where it names a space (hints.py)
    rerank_provider: str = "default"  # which one (VIBE_RERANK_PROVIDERS; `default`: VIBE_RERANK_URL)
    # a caller's own query vector (admin diagnostics): never embedded, cached or sent anywhere
    query_vector: tuple[float, ...] | None = None
    graph_depth: int = 0  # `graph.depth`: each result's neighbours by edges, to this depth (services/planner/graph.py)
