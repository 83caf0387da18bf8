"""The indexes: lexical (BM25) and vector (ANN), and the filter every query carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from shared.conditions import FieldCondition
from shared.model import DocKey, DocVectors, Hit, StoredDoc


@dataclass(frozen=True)
class SearchFilter:
    """Tenant + collections + ACL (+ metadata conditions and an id allow-list), applied inside
    every engine query, before scoring: never as a post-filter on a top-k."""

    tenant: str
    collections: tuple[str, ...] | None  # None = every collection of the tenant
    acl: tuple[str, ...]  # the caller's readable ACL tokens
    where: tuple[FieldCondition, ...] = ()  # all must hold
    ids: tuple[DocKey, ...] | None = None  # None = any document; () = none
    # Certificates the caller holds. A document passes only if it requires none outside these
    # (doc certs ⊆ caller certs); the default, none held, admits only documents requiring none.
    certs: frozenset[str] = frozenset()

    def admits_certs(self, certs: Sequence[str]) -> bool:
        """The certificate part of the filter for one document (re-checks beside a query)."""
        return all(c in self.certs for c in certs)


class Candidates(Protocol):
    """A lexical search's hits, best first, whose documents are looked up as they are asked
    for: a first page needs the keys of its own hits only, while its scores (and so the
    statistics fusion standardises with) are every hit's."""

    @property
    def scores(self) -> Sequence[float]:
        """Every hit's score, best first (what `search` would return, without the keys)."""

    def keys(self, n: int) -> list[DocKey]:
        """The first `n` hits' keys (all of them when `n` is larger); looked up once each."""


class ResolvedCandidates:
    """Candidates whose keys came with the hits (an engine that returns ids with scores)."""

    def __init__(self, hits: Sequence[Hit]):
        self._hits = hits
        self.scores = [h.score for h in hits]

    def keys(self, n: int) -> list[DocKey]:
        return [h.key for h in self._hits[:n]]


@runtime_checkable
class LexicalIndex(Protocol):
    """BM25 with tenant and ACL filters inside the engine query; statistics per tenant."""

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        """Index documents and remove deleted ones; visible to searches when it returns."""

    def search(self, flt: SearchFilter, text: str, limit: int) -> list[Hit]: ...

    def candidates(self, flt: SearchFilter, text: str, limit: int) -> Candidates:
        """`search`'s hits with their keys looked up on demand, from the same snapshot of the
        index however much later they are asked for (same filter, same order, same scores)."""

    def highlights(self, flt: SearchFilter, text: str, docs: Sequence[StoredDoc]) -> dict[DocKey, list[str]]: ...

    def close(self) -> None: ...


@runtime_checkable
class Rebuildable(Protocol):
    """An index whose layout (fields, payload, analysis) carries a schema version. When the
    stored index was written by another version, its follower resets it and replays the change
    log from the store of record (shared/indexing.py `IndexFollower.ensure_schema`)."""

    def schema_outdated(self) -> bool:
        """True when documents exist in a layout other than this code's."""

    def reset_schema(self) -> None:
        """Drop every document and mark the index as the current version (then: replay)."""


@runtime_checkable
class VectorIndex(Protocol):
    """ANN with payload filters (tenant, collection, ACL) inside the query."""

    def upsert(self, space: str, items: Sequence[tuple[StoredDoc, Sequence[float] | DocVectors]]) -> None:
        """A point per document holding its passage vectors (or its one vector); a search scores
        a document by its best passage."""

    def delete(self, space: str, keys: Sequence[DocKey]) -> None: ...

    def search(
        self,
        space: str,
        flt: SearchFilter,
        vector: list[float],
        limit: int,
        only: Sequence[DocKey] | None = None,
    ) -> list[Hit]: ...

    def close(self) -> None: ...
