"""The read surface: POST /v1/read (the declared request and the model its handler parses,
the answer, the SSE events) and the hand-written components."""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictFloat, StrictInt, model_validator
from pydantic.json_schema import SkipJsonSchema

from services.api.schemas.common import (
    _NOT_BLANK,
    ANY_COLLECTION_NAME,
    MAX_K,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    _as,
)
from services.api.schemas.explain import EdgeHop
from shared.filters import MAX_FIELD_CHARS, MAX_FIELDS, MAX_IN_VALUES, MAX_STRING_CHARS

MAX_CURSOR_CHARS = 512

# -- POST /v1/read -------------------------------------------------------------------------------


class QueryDocIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="QueryDoc")
    collection: str = Field(pattern=ANY_COLLECTION_NAME)
    id: str = Field(alias="_id")
    fields: list[Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS,
                                      pattern="^[^\x00-\x1f]*$")]] | None = None


class QueryTextIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="QueryByText")
    text: str = Field(max_length=MAX_QUERY_CHARS)
    doc: None = None


class QueryByDocIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="QueryByDoc")
    text: None = None
    doc: QueryDocIn


# services/api/read_similar.py checks the same bounds (and the tenant's dimension, which no
# static schema can say)
QUERY_VECTOR: dict[str, Any] = {
    "type": "array", "minItems": 1, "maxItems": 4096,
    "items": {"type": "number", "minimum": -1e6, "maximum": 1e6},
    "not": {"items": {"const": 0}},
    "description": ("a query vector (diagnostics; a key with the `admin` scope, else 403 `forbidden`): as many "
                    "finite numbers as the tenant's active space has dimensions (else 400 `invalid_params` naming "
                    "`semantic.query.vector` with the expected `details.expected`), not all zero. Searched as is: "
                    "never embedded, cached or sent to a provider; strategy `semantic` (or `auto`), no `q`, no "
                    "`rerank`; the caller's tenant, ACL and certificates still apply."),
}


class QueryByVectorIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="QueryByVector")
    text: None = None
    doc: None = None
    vector: list[float] = Field(json_schema_extra=_as(QUERY_VECTOR))


# `semantic.domainHint`: a short name (spaces are named in at most 64 characters), no control characters
MAX_DOMAIN_HINT_CHARS = 128
DOMAIN_HINT_PATTERN = r"^[^\x00-\x1f\x7f]+$"


class SemanticIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="SemanticOptions")
    strategy: Literal["auto", "keyword", "semantic", "hybrid"] = "auto"
    domainHint: str | None = Field(default=None, min_length=1, max_length=MAX_DOMAIN_HINT_CHARS,
                                   pattern=DOMAIN_HINT_PATTERN, description=(
        "A hint at the domain searched, which the server maps to a space: it is used when it names the space "
        "the tenant reads (its active one), and otherwise accepted and reported unused, with why, in "
        "`diagnostics.domainHint` (`{hint, used, space?, reason?}`; reasons `space_building`, `no_such_space`)."))
    k: int | None = Field(default=None, ge=1, le=MAX_K, description="candidates per leg")
    query: QueryTextIn | QueryByDocIn | QueryByVectorIn | None = Field(
        default=None, description="exactly one of `text`, `doc` (a document to find more like; never itself a "
                                  "result) or `vector` (admin diagnostics)")


class IncludeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="Include")
    semantic: bool = Field(default=False, description="each result's `__semantic` state")
    highlights: bool = Field(default=False, description="each result's `highlights`: HTML-escaped snippets, "
                                                        "matched terms in `<b>`")
    fields: bool | Annotated[list[Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS)]],
                             Field(max_length=100)] = Field(default=False, description=(
            "each result's `fields`: `true` for every stored field of the document, or a list of field "
            "names (missing ones are left out). Never `_acl` or `_vibe`."))


_SCALAR: list[dict[str, Any]] = [{"type": "string", "maxLength": MAX_STRING_CHARS}, {"type": "number"},
                                 {"type": "boolean"}]
_RANGE_OPS = {op: {"type": "number"} for op in ("gt", "gte", "lt", "lte")}
FILTER: dict[str, Any] = {
    "anyOf": [{"type": "null"}, {
        "type": "object", "maxProperties": MAX_FIELDS,
        "propertyNames": {"minLength": 1, "maxLength": MAX_FIELD_CHARS, "pattern": "^[^_\x00-\x1f][^\x00-\x1f]*$"},
        "additionalProperties": {"anyOf": [
            *_SCALAR,
            {"type": "object", "title": "Equals", "required": ["eq"], "additionalProperties": False,
             "properties": {"eq": {"anyOf": _SCALAR}}},
            {"type": "object", "title": "In", "required": ["in"], "additionalProperties": False,
             "properties": {"in": {"type": "array", "minItems": 1, "maxItems": MAX_IN_VALUES,
                                   "items": {"anyOf": _SCALAR}}}},
            {"type": "object", "title": "Range", "minProperties": 1, "additionalProperties": False,
             "properties": _RANGE_OPS},
        ]}}],
    "description": (
        "metadata conditions on top-level document fields, all of which must hold: `{\"field\": value}` "
        "(equals), `{\"field\": {\"in\": [...]}}` (any of up to 100 values), `{\"field\": {\"gte\": 1, "
        "\"lt\": 5}}` (a numeric range). A field holding a list matches when any element does; strings, "
        "numbers and booleans only equal their own kind. Applied inside every engine's query together "
        "with the ACL, before the top-k. At most 16 fields; names not starting with '_'."),
}
CURSOR: dict[str, Any] = {
    "type": "string", "pattern": "^[A-Za-z0-9_-]{32}$",
    "description": ("`nextCursor` of the previous page of the same query (same collection, q, semantic, filter, "
                    "global) and the same key; `limit` and `include` may change. A cursor of another query or key, or "
                    "an altered one, answers 404 `not_found` (a string that is no cursor at all: 400). Pages "
                    "end at result VIBE_MAX_K."),
}


_READ_NOT_EMPTY: dict[str, Any] = {"anyOf": [
    {"required": ["q"], "properties": {"q": {"type": "string", "pattern": _NOT_BLANK}}},
    {"required": ["semantic"], "properties": {"semantic": {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "object", "anyOf": [
            {"required": ["doc"], "properties": {"doc": {"type": "object"}}},
            {"required": ["vector"], "properties": {"vector": {"type": "array"}}},
            {"required": ["text"], "properties": {"text": {"type": "string", "pattern": _NOT_BLANK}}}]}}}}},
    {"required": ["_id"], "properties": {"_id": {"type": "string", "minLength": 1}}},
], "not": {"anyOf": [
    {"required": ["global", "collection"], "properties": {
        "global": {"const": True}, "collection": {"not": {"enum": ["any", "semantic.nodes"]}}}},
    # `semantic.nodes` finds documents like one: it needs semantic.query.doc or .vector
    {"required": ["collection"], "properties": {"collection": {"const": "semantic.nodes"}}, "not": {
        "required": ["semantic"], "properties": {"semantic": {"type": "object", "required": ["query"], "properties": {
            "query": {"type": "object", "anyOf": [{"required": ["doc"]}, {"required": ["vector"]}]}}}}}},
    # a vector is the whole query: no q, no lexical strategy, no rerank (services/api/read_similar.py)
    {"required": ["semantic"], "properties": {"semantic": {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "object", "required": ["vector"]}}}}, "anyOf": [
        {"required": ["q"], "properties": {"q": {"type": "string", "pattern": _NOT_BLANK}}},
        {"required": ["rerank"], "properties": {"rerank": {"anyOf": [{"const": True}, {"type": "object"}]}}},
        {"properties": {"semantic": {"required": ["strategy"], "properties": {
            "strategy": {"enum": ["keyword", "hybrid"]}}}}},
    ]},
    # rerank re-scores the page against query text: a read without any (a doc or vector query) is refused
    {"required": ["rerank"], "properties": {"rerank": {"anyOf": [{"const": True}, {"type": "object"}]}}, "not": {
        "anyOf": [{"required": ["q"], "properties": {"q": {"type": "string", "pattern": _NOT_BLANK}}},
                  {"required": ["semantic"], "properties": {"semantic": {"type": "object", "required": ["query"],
                   "properties": {"query": {"type": "object", "required": ["text"], "properties": {
                       "text": {"type": "string", "pattern": _NOT_BLANK}}}}}}}]}},
    # a read by `_id` names one document of one named collection, with nothing to rank or page
    {"required": ["_id"], "properties": {"_id": {"type": "string"}}, "anyOf": [
        {"not": {"required": ["collection"]}},
        {"required": ["collection"], "properties": {"collection": {"const": "any"}}},
        {"required": ["global"], "properties": {"global": {"const": True}}},
        {"required": ["q"], "properties": {"q": {"type": "string", "pattern": _NOT_BLANK}}},
        {"required": ["semantic"], "properties": {"semantic": {
            "type": "object", "required": ["query"], "properties": {"query": {"type": "object"}}}}},
        {"required": ["filter"], "properties": {"filter": {"type": "object"}}},
        {"required": ["cursor"], "properties": {"cursor": {"type": "string"}}},
        {"required": ["rerank"], "properties": {"rerank": {"anyOf": [{"const": True}, {"type": "object"}]}}},
        {"required": ["graph"], "properties": {"graph": {"type": "object"}}},
    ]},
]},
    "description": "`q`, or `semantic.query`, must hold something other than whitespace (or give `_id`, with a "
                   "named collection and no q, semantic.query, filter, cursor, rerank or graph); `global: true` goes "
                   "with collection `any` (or `semantic.nodes`); collection `semantic.nodes` needs "
                   "`semantic.query.doc` or `.vector`; a `semantic.query.vector` goes without q, rerank or a "
                   "keyword/hybrid strategy"}


class RerankIn(BaseModel):
    """`rerank: {"provider": name}`: the page re-ordered by that configured reranker."""

    model_config = ConfigDict(extra="forbid", title="RerankChoice")
    provider: str = Field(min_length=1, max_length=64, pattern="^[A-Za-z0-9_-]+$", description=(
        "`default` (VIBE_RERANK_URL) or a name of VIBE_RERANK_PROVIDERS; one this server does not configure "
        "answers 400 naming `rerank.provider`"))


class GraphIn(BaseModel):
    """`graph: {"depth": 1|2}`: each result's neighbours by edges (`semantic.edges`)."""

    model_config = ConfigDict(extra="forbid", title="GraphOption")
    depth: StrictInt = Field(ge=1, le=2, description=(
        "1: the documents joined to each result by one edge; 2: and those joined to them (in both directions)"))


class ReadIn(BaseModel):
    """POST /v1/read (readOnce)."""

    model_config = ConfigDict(extra="forbid", title="ReadRequest", json_schema_extra=_READ_NOT_EMPTY)
    collection: str = Field(default="any", pattern=ANY_COLLECTION_NAME, description=(
        "a collection name, `any` (every collection the key may read), or `semantic.nodes` (more-like-this over every "
        "collection the key may read, with `semantic.query.doc` or `.vector`)"))
    q: str = Field(default="", max_length=MAX_QUERY_CHARS)
    id: str | None = Field(default=None, alias="_id", min_length=1, max_length=256,
                           json_schema_extra={"pattern": "^[^\x00-\x1f]*$"}, description=(
        "Read one document of `collection` by id (no `q`, `semantic.query`, `filter`, `cursor` or `rerank`; "
        "not with collection `any`): the answer is the document as GET /v1/collections/{collection}/docs/{id} "
        "gives it (`_id`, its fields, `_vibe` if set, `__semantic` with include.semantic). A document the "
        "caller may not read (ACL or certificates) answers 404 exactly like a missing one."))
    semantic: SemanticIn = Field(default_factory=SemanticIn)
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT, description="results per page")
    global_: bool = Field(default=False, alias="global", description=(
        "Cross-database search: every collection of the key's tenant (as collection `any`, which "
        "it requires, or `semantic.nodes`; never another tenant's)"))
    include: IncludeIn = Field(default_factory=IncludeIn)
    filter: dict[str, Any] | None = Field(default=None, json_schema_extra=_as(FILTER))
    cursor: str | None = Field(default=None, json_schema_extra=_as({"anyOf": [CURSOR, {"type": "null"}]}))
    rerank: bool | RerankIn | None = Field(default=None, description=(
        "Re-order each page with a configured reranker: `true` for `default` (VIBE_RERANK_URL, a Cohere- or "
        "TEI-compatible `/rerank` endpoint), `{\"provider\": name}` for one of VIBE_RERANK_PROVIDERS, `false` "
        "for none (also when the collection's settings say `rerank: true`; omitted: the collection's setting, "
        "off for collection `any`). At most VIBE_READ_RERANK_CANDIDATES of the page's documents, with the text "
        "the semantic leg embeds, in one call. Documents carrying certificates are never sent and keep their "
        "place; a reranker that fails or times out, or a tenant past its reranker budget, leaves the fused order "
        "(`diagnostics.rerank.status`). A stream sends each ranking event fused, then a `rerank` event. Needs "
        "query text (`q` or `semantic.query.text`); refused with 400 when the reranker is not configured."))
    graph: GraphIn | None = Field(default=None, description=(
        "Hydrate the page's neighbours: under each result, `neighbors` lists the documents joined to it by edges "
        "of `semantic.edges` (both directions) to `depth`, heaviest edge first, at most "
        "VIBE_GRAPH_MAX_NEIGHBORS_PER_NODE per document expanded and VIBE_GRAPH_MAX_NEIGHBORS_TOTAL per page. "
        "An edge shows only where the caller may read it and both documents it joins."))


# The request as the handler parses it: the declared models above, minus the bounds the handler
# checks itself against the deployment's settings (VIBE_MAX_QUERY_CHARS, VIBE_MAX_LIMIT,
# VIBE_MAX_K) and the names it checks with shared/names.py, so each refusal names its field in a
# stable `invalid_params` message. Only the fields that differ are restated; the class names
# appear in those messages ("a valid dictionary or instance of SemanticOptions").


class QueryDoc(QueryDocIn):
    collection: str
    fields: list[str] | None = None


class SemanticQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    doc: QueryDoc | None = None
    vector: list[StrictFloat] | None = None  # bounds: services/api/read_similar.py, with the field named

    @model_validator(mode="after")
    def _one(self) -> SemanticQuery:
        if sum(v is not None for v in (self.text, self.doc, self.vector)) != 1:
            raise ValueError("semantic.query takes exactly one of 'text', 'doc' or 'vector'")
        return self


class SemanticOptions(SemanticIn):
    # refused by the handler with its own message when given
    domainHint: str | None = None  # type: ignore[assignment]
    k: int | None = Field(default=None, ge=1)
    query: SemanticQuery | None = None  # type: ignore[assignment]


class Include(IncludeIn):
    """`include` as parsed: the declared model under the name its refusals give."""


class ReadBody(ReadIn):
    collection: str = "any"
    q: str = ""
    semantic: SemanticOptions = Field(default_factory=SemanticOptions)
    limit: int = Field(default=20, ge=1)
    include: Include = Field(default_factory=Include)
    cursor: str | None = Field(default=None, min_length=1, max_length=MAX_CURSOR_CHARS)


class SemanticState(BaseModel):
    """`__semantic` and GET /semantic/status."""

    status: str = Field(description="none, queued, ready, stale, failed, skipped, deferred, cold, ...")
    lastEmbeddedAt: str | None
    space: str
    reason: str | SkipJsonSchema[None] = None


class ReadDocument(BaseModel):
    """POST /v1/read with `_id`: the document, as GET /v1/collections/{collection}/docs/{id} gives it."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(alias="_id")
    vibe: dict[str, Any] | SkipJsonSchema[None] = Field(default=None, alias="_vibe", description="when set")
    semantic: SemanticState | SkipJsonSchema[None] = Field(default=None, alias="__semantic",
                                                          description="with include.semantic")


class DocLifecycle(BaseModel):
    eager: bool = Field(description="its collection embeds on write; its vectors are never evicted")
    lastUsedAt: str | None = Field(description="its last touch or appearance on a page")
    touches: float = Field(description="touches decayed to now (half-life VIBE_USAGE_HALF_LIFE_SECONDS); "
                                       "VIBE_DOC_PROMOTE_TOUCHES pins it")
    pinnedUntil: str | None = Field(description="the end of its current pin (a pinned vector is not evicted)")
    evictableAt: str | None = Field(description="a ready vector in a lazy collection: from then the scheduler's "
                                                "next tick moves it to the cold store unless it is used before "
                                                "(VIBE_EVICT_IDLE_SECONDS after its last use or embedding)")


class PendingJob(BaseModel):
    """The embedding job pending for a document, by its idempotent key."""

    docId: str
    space: str
    contentHash: str = Field(description="`sha256:<hex>` of the document's normalized text")


class DocStatus(SemanticState):
    """GET /semantic/status: `__semantic` and what the lifecycle scheduler knows of the document."""

    lifecycle: DocLifecycle
    contentHash: str = Field(description="`sha256:<hex>` of the document's normalized text (what its "
                                         "embedding is kept for; the same text always has the same hash)")
    job: PendingJob | SkipJsonSchema[None] = Field(default=None, description="while the document is `queued`")
    contentMatches: bool | SkipJsonSchema[None] = Field(default=None, description=(
        "with `?contentHash=`: whether that hash (`sha256:` or `blake3:`) names the document's content"))


SCORE_TEXT = (
    "in (0, 1], higher is better, comparable within one answer and across the pages of one query. "
    "keyword: BM25 divided by the best BM25 of the caller's results (1 = the best match); semantic: "
    "cosine similarity mapped to (1 + cos) / 2 (1 = same direction as the query); hybrid (z-score fusion, "
    "the default): exp(fused - best fused), 1 for the best result and a factor e less per standard "
    "deviation behind it; hybrid with VIBE_FUSION=rrf: the RRF sum over the best possible (rank 1 in both "
    "legs). GET /v1/explain/{explainId} gives the ranking's own figures.")


class Passage(BaseModel):
    """Where a long document's best-matching passage sits (a page can show or scroll to it)."""

    field: str = Field(description="the field holding it (`name[i]` for one string of a list field)")
    start: int = Field(ge=0, description="character offset of the passage in that field's string")
    end: int = Field(ge=0, description="character offset just past it")
    headings: list[str] = Field(description="the Markdown heading path above it, outermost first")


class NeighborVia(BaseModel):
    id: str
    collection: str


class Neighbor(BaseModel):
    """A document joined to a result by edges (`graph`)."""

    id: str
    collection: str
    predicate: str = Field(description="the predicate of the last edge of the path")
    weight: float = Field(description="the weight of the last edge of the path (0 to 1; 1 when unset)")
    direction: Literal["out", "in"] = Field(description="`out`: the last edge goes from `via` to this document")
    depth: int = Field(ge=1, le=2)
    via: NeighborVia = Field(description="the document this one was reached from (the result at depth 1)")
    path: list[str] = Field(description="`collection/id` of each document on the way, the result first")
    edges: list[EdgeHop] = Field(description="the edges of the path, in order, each as stored")
    explainId: str = Field(description="GET /v1/explain/{explainId}: `{type: \"edge\", path}`")
    fields: dict[str, Any] | SkipJsonSchema[None] = Field(default=None, description="with include.fields")


class Hit(BaseModel):
    id: str
    collection: str
    score: float = Field(gt=0, le=1, description=SCORE_TEXT)
    matchedBy: list[Literal["keyword", "semantic"]]
    explainId: str = Field(description="GET /v1/explain/{explainId}")
    highlights: list[str] | SkipJsonSchema[None] = Field(default=None, description="with include.highlights")
    fields: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, description="with include.fields: the document's stored fields (never `_acl`, `_vibe`)")
    semantic: SemanticState | SkipJsonSchema[None] = Field(default=None, alias="__semantic",
                                                          description="with include.semantic")
    passage: Passage | SkipJsonSchema[None] = Field(
        default=None, description="a long document matched by the semantic leg: its best passage "
        "(a document longer than VIBE_PASSAGE_CHARS is embedded as passages and scored by its best one)")
    neighbors: list[Neighbor] | SkipJsonSchema[None] = Field(default=None, description="with `graph`")


class Warming(BaseModel):
    """How many results are being embedded now (also the data of an SSE `warming` event)."""

    queued: int
    message: str


class LegBudget(BaseModel):
    lexical: int
    semantic: int


class LegTruncated(BaseModel):
    lexical: bool
    semantic: bool


class CollectionLeg(BaseModel):
    """One leg of a global read: what it searched, what reached the merged candidates, what its budget cut."""

    collection: str | SkipJsonSchema[None] = None
    lexicalCandidates: int = Field(description="its keyword candidates in the merged list")
    semanticHits: int = Field(description="its vector hits in the merged list")
    searched: LegBudget = Field(description="candidates the leg's engine queries returned")
    cutByBudget: LegBudget = Field(description="candidates it returned that the merged list's bound left out")
    truncated: LegTruncated = Field(description="the leg returned all it asked for: the collection may match more")


class RemainderLeg(CollectionLeg):
    afterCollections: int = Field(description="collections with a leg of their own; the rest were searched here")
    collections: int | None = Field(description=(
        "the collections it searched, by name; null: too many to name (over 256), it searched the whole tenant "
        "and left out the hits of collections with a leg of their own"))


class GlobalLegs(BaseModel):
    legs: int
    perCollection: int = Field(description="candidates each leg is guaranteed in the merged list")
    fetchPerCollection: int = Field(description="candidates each leg asks its engine for")
    candidates: int = Field(description="the merged list's length (the read's candidates)")
    remainder: RemainderLeg | None = Field(description=(
        "past VIBE_GLOBAL_MAX_COLLECTIONS: one leg over the tenant's other collections; null: every collection "
        "had its own"))


class DomainHintReport(BaseModel):
    hint: str
    used: bool
    space: str | SkipJsonSchema[None] = Field(default=None, description="the space it mapped to (used)")
    reason: Literal["space_building", "no_such_space"] | SkipJsonSchema[None] = None


class Diagnostics(BaseModel):
    model_config = ConfigDict(extra="allow")
    collections: list[CollectionLeg] | SkipJsonSchema[None] = Field(default=None, description=(
        "a global read (collection `any`): each collection's leg, by name"))
    global_: GlobalLegs | SkipJsonSchema[None] = Field(default=None, alias="global", description=(
        "a global read: the legs' budgets and the remainder leg"))
    domainHint: DomainHintReport | SkipJsonSchema[None] = Field(default=None, description=(
        "with `semantic.domainHint`: whether it mapped to a space"))
    strategy: str
    strategyReason: str | None = None
    space: str | None = None
    model: str | None = None
    lexical: dict[str, Any] | None = None
    semantic: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = Field(default=None, description=(
        "when the read reranks: `status` (reranked, failed, timeout, budget: the tenant's reranker budget is "
        "spent and nothing was sent), `provider` (the reranker's model id), `sent`, `notSent` (documents "
        "carrying certificates, never sent), and `error` when it failed"))
    followUp: Literal["unknown", "agree", "disagree"] | None = Field(
        default=None, description="VIBE_TOUCH_FOLLOW_UP=auto: the collection's follow-up state this read's touches "
                                  "were planned with (GET /semantic/touch); null: no touch, or not `auto`")
    elapsedMs: float | None = None


class ReadAnswer(BaseModel):
    """The JSON answer; also the data of the SSE events `lexical`, `semantic`, `rerank` and `done`."""

    results: list[Hit]
    strategy: str
    warming: Warming
    diagnostics: Diagnostics
    nextCursor: str | None = Field(description="`cursor` for the next page; null: this is the last page")


# The data schema of each SSE event of /v1/read, as named components (a generator
# gives each event its own type). Added to the document by `openapi_components`.
EVENT_COMPONENTS: dict[str, dict[str, Any]] = {
    "LexicalEvent": {"title": "LexicalEvent", "allOf": [{"$ref": "#/components/schemas/ReadAnswer"}],
                     "description": "data of `event: lexical`: the first ranking, from the keyword leg (and the "
                                    "semantic leg when the query vector was at hand)"},
    "SemanticEvent": {"title": "SemanticEvent", "allOf": [{"$ref": "#/components/schemas/ReadAnswer"}],
                      "description": "data of `event: semantic`: a re-ranking as the query vector or touched "
                                     "documents' embeddings arrive"},
    "RerankEvent": {"title": "RerankEvent", "allOf": [{"$ref": "#/components/schemas/ReadAnswer"}],
                    "description": "data of `event: rerank` (a read that reranks): the page of the ranking event "
                                   "just before it, re-ordered by the reranker, with `diagnostics.rerank`"},
    "WarmingEvent": {"title": "WarmingEvent", "allOf": [{"$ref": "#/components/schemas/Warming"}],
                     "description": "data of `event: warming`: how many results are being embedded now"},
    "DoneEvent": {"title": "DoneEvent", "allOf": [{"$ref": "#/components/schemas/ReadAnswer"}],
                  "description": "data of `event: done`: the final ranking and diagnostics; the stream ends"},
    "ErrorEvent": {"title": "ErrorEvent", "allOf": [{"$ref": "#/components/schemas/ErrorDetail"}],
                   "description": "data of `event: error`: the stream's last event on failure"},
}
EVENT_DATA = {"lexical": "LexicalEvent", "semantic": "SemanticEvent", "rerank": "RerankEvent",
              "warming": "WarmingEvent",
              "done": "DoneEvent", "error": "ErrorEvent"}


def _event(name: str, ref: str) -> dict[str, Any]:
    return {"type": "object", "title": ref, "required": ["event", "data"], "properties": {
        "id": {"type": "string", "description": "1, 2, ... in the order sent"},
        "event": {"const": name}, "data": {"type": "string", "contentMediaType": "application/json",
                                           "contentSchema": {"$ref": f"#/components/schemas/{ref}"}}}}


READ_SSE: dict[str, Any] = {
    "schema": {"type": "string", "description": (
        "Server-sent events. The stream opens with a `retry:` hint (VIBE_STREAM_RETRY_MS); every event has an "
        "`id:` (1, 2, ...); while the next event is being computed, a `: keep-alive` comment is sent every "
        "VIBE_STREAM_HEARTBEAT_SECONDS. Events, in order: `lexical` (the first ranking), `semantic` (each "
        "re-ranking as embeddings arrive), `rerank` (a read that reranks: right after `lexical` and after each "
        "`semantic`, that page re-ordered by the reranker; those ranking events show the fused page), `warming` "
        "(progress), then `done` (the final ranking and diagnostics, reranked when the read reranks) or `error` "
        "(on failure); the body ends after either. Data: LexicalEvent, SemanticEvent, RerankEvent, WarmingEvent, "
        "DoneEvent, ErrorEvent.")},
    "itemSchema": {"oneOf": [_event(name, ref) for name, ref in EVENT_DATA.items()]},
}


# Response schemas written as JSON Schema by hand (services/api/routes_docs.py), named so a
# generator gives each its own type: `component(name, schema)` registers one and returns its $ref.
_HAND_WRITTEN: dict[str, dict[str, Any]] = {}


def component(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    _HAND_WRITTEN[name] = {"title": name, **schema}
    return {"$ref": f"#/components/schemas/{name}"}


def openapi_components(doc: dict[str, Any]) -> dict[str, Any]:
    """Add the SSE event components and the hand-written ones to a generated document (FastAPI
    registers only models a route names; the events are referenced from the
    `text/event-stream` alternative)."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(copy.deepcopy(EVENT_COMPONENTS))
    schemas.update(copy.deepcopy(_HAND_WRITTEN))
    return doc


class ReadOnceAnswer(RootModel[ReadAnswer | ReadDocument]):
    """POST /v1/read as JSON: a ranking (ReadAnswer), or with `_id` one document (ReadDocument)."""
