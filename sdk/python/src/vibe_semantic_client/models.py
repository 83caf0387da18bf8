"""Typed answers of `/v1/read` and the events of its SSE stream.

Each object keeps the JSON it came from in `raw`, so fields a newer server adds are reachable
before this package names them. Parsing is plain attribute copying (no validation library):
the SDK's added latency over a raw HTTP call must stay well under a millisecond.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from vibe_semantic_client.errors import VibeError, error_from_body

JSON = dict[str, Any]
Strategy = Literal["auto", "keyword", "semantic", "hybrid"]


@dataclass(frozen=True, slots=True)
class Passage:
    """Where a long document's best-matching passage sits: the field holding it (`name[i]` for
    one string of a list field), its character offsets in that string, and the Markdown heading
    path above it (outermost first)."""

    field: str
    start: int
    end: int
    headings: list[str]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Passage:
        return cls(field=str(d.get("field", "")), start=int(d.get("start") or 0), end=int(d.get("end") or 0),
                   headings=[str(h) for h in d.get("headings") or ()])


@dataclass(frozen=True, slots=True)
class Neighbor:
    """A document joined to a hit by edges of `semantic.edges` (a read with `graph={"depth": 1|2}`):
    the last edge's `predicate` and `weight`, `direction` (`out`: from `via` to this document),
    `path` (`collection/id` of each document on the way, the hit first) and `edges` (each as stored)."""

    id: str
    collection: str
    predicate: str
    weight: float
    direction: str
    depth: int
    via: tuple[str, str]  # (collection, id)
    path: list[str]
    edges: list[JSON]
    explain_id: str | None = None
    fields: JSON | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Neighbor:
        via = d.get("via") or {}
        return cls(id=str(d["id"]), collection=str(d.get("collection", "")), predicate=str(d.get("predicate", "")),
                   weight=float(d.get("weight") or 0.0), direction=str(d.get("direction", "")),
                   depth=int(d.get("depth") or 0), via=(str(via.get("collection", "")), str(via.get("id", ""))),
                   path=[str(p) for p in d.get("path") or ()], edges=[dict(e) for e in d.get("edges") or ()],
                   explain_id=d.get("explainId"), fields=d.get("fields"))


@dataclass(frozen=True, slots=True)
class Hit:
    """One result. `score` is comparable within one answer (higher is better); `fields` holds
    the document's permitted fields when the read asked for them (`fields=` / `include.fields`);
    `passage`, where a long document was matched by the semantic leg, its best passage;
    `neighbors`, with `graph={"depth": 1|2}`, the documents joined to it by edges."""

    id: str
    collection: str
    score: float
    matched_by: list[str]
    explain_id: str | None = None
    fields: JSON | None = None
    highlights: Any = None
    semantic: JSON | None = None
    passage: Passage | None = None
    neighbors: list[Neighbor] | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Hit:
        passage = d.get("passage")
        return cls(id=str(d["id"]), collection=str(d.get("collection", "")), score=float(d.get("score") or 0.0),
                   matched_by=list(d.get("matchedBy") or ()), explain_id=d.get("explainId"), fields=d.get("fields"),
                   highlights=d.get("highlights"), semantic=d.get("__semantic"),
                   passage=Passage.from_json(passage) if isinstance(passage, Mapping) else None,
                   neighbors=[Neighbor.from_json(n) for n in d["neighbors"]] if isinstance(d.get("neighbors"), list)
                   else None, raw=dict(d))


@dataclass(frozen=True, slots=True)
class Warming:
    """How many results are being embedded now: the answer's `warming`, and the SSE `warming`
    event (then `id`/`retry` are the event's SSE fields)."""

    queued: int
    message: str
    id: str | None = None
    retry: int | None = None
    event: ClassVar[Literal["warming"]] = "warming"

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None, id: str | None = None, retry: int | None = None) -> Warming:
        d = d or {}
        return cls(queued=int(d.get("queued") or 0), message=str(d.get("message") or ""), id=id, retry=retry)

    @property
    def results(self) -> list[Hit]:
        """No ranking in this event (empty, so any event's `.results` can be read)."""
        return []


@dataclass(frozen=True, slots=True)
class ReadAnswer:
    """One readOnce answer: what is ready now (JSON), or one ranking of the stream."""

    results: list[Hit]
    strategy: str
    warming: Warming
    diagnostics: JSON
    next_cursor: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ReadAnswer:
        return cls(results=[Hit.from_json(r) for r in d.get("results") or ()], strategy=str(d.get("strategy", "")),
                   warming=Warming.from_json(d.get("warming")), diagnostics=dict(d.get("diagnostics") or {}),
                   next_cursor=d.get("nextCursor"), raw=dict(d))

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.results]


@dataclass(frozen=True, slots=True)
class _Ranking:
    answer: ReadAnswer
    id: str | None = None
    retry: int | None = None

    @property
    def results(self) -> list[Hit]:
        return self.answer.results

    @property
    def warming(self) -> Warming:
        return self.answer.warming

    @property
    def diagnostics(self) -> JSON:
        return self.answer.diagnostics

    @property
    def strategy(self) -> str:
        return self.answer.strategy

    @property
    def next_cursor(self) -> str | None:
        return self.answer.next_cursor


@dataclass(frozen=True, slots=True)
class Lexical(_Ranking):
    """The first ranking: keyword hits and vectors already ready, before anything is embedded."""

    event: ClassVar[Literal["lexical"]] = "lexical"


@dataclass(frozen=True, slots=True)
class Semantic(_Ranking):
    """A re-ranking after embeddings arrived (zero or more per stream)."""

    event: ClassVar[Literal["semantic"]] = "semantic"


@dataclass(frozen=True, slots=True)
class Rerank(_Ranking):
    """A read that reranks: the page of the ranking event just before it (`Lexical` or
    `Semantic`, which show the fused page), re-ordered by the reranker
    (`answer.diagnostics["rerank"]` says how)."""

    event: ClassVar[Literal["rerank"]] = "rerank"


@dataclass(frozen=True, slots=True)
class Done(_Ranking):
    """The final ranking and diagnostics; the stream ends after it."""

    event: ClassVar[Literal["done"]] = "done"


@dataclass(frozen=True, slots=True)
class Error:
    """The stream failed after it started; it ends after this event. `exception()` gives the
    typed error, to raise it."""

    code: str
    message: str
    details: JSON = field(default_factory=dict)
    id: str | None = None
    retry: int | None = None
    request_id: str | None = None  # the request's X-Request-Id, to quote when reporting a problem
    event: ClassVar[Literal["error"]] = "error"

    @property
    def results(self) -> list[Hit]:
        """No ranking in this event (empty, so any event's `.results` can be read)."""
        return []

    def exception(self) -> VibeError:
        return error_from_body({"code": self.code, "message": self.message, "details": self.details,
                                "requestId": self.request_id}, None)


Event = Lexical | Warming | Semantic | Rerank | Done | Error
_RANKINGS: dict[str, type[Lexical | Semantic | Rerank | Done]] = {
    "lexical": Lexical, "semantic": Semantic, "rerank": Rerank, "done": Done}


def parse_event(name: str, data: Any, id: str | None = None, retry: int | None = None) -> Event | None:
    """A stream event from its SSE name and decoded data; None for names this version does not know
    (a newer server may add some; they are skipped, not fatal)."""
    if name in _RANKINGS:
        return _RANKINGS[name](ReadAnswer.from_json(data), id or None, retry)
    if name == "warming":
        return Warming.from_json(data, id or None, retry)
    if name == "error":
        d = data if isinstance(data, dict) else {}
        details = d.get("details")
        return Error(str(d.get("code") or "internal_error"), str(d.get("message") or ""),
                     details if isinstance(details, dict) else {}, id or None, retry,
                     d.get("requestId") if isinstance(d.get("requestId"), str) else None)
    return None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """Every batch's per-document results, in the order sent."""

    accepted: int
    rejected: int
    results: list[JSON]

    @property
    def errors(self) -> bool:
        return self.rejected > 0

    @property
    def failed(self) -> list[JSON]:
        return [r for r in self.results if r.get("error")]
