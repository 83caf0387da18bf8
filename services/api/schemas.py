"""OpenAPI declarations shared by the routes (`/openapi.json` declares every
request, response and error body and the bearer scheme).

They describe what the handlers already accept and answer; they validate nothing. Handlers
parse their own bodies (`json_body` + checks with stable `invalid_params` messages), so a
request body is declared with `openapi_extra` (`body(...)`), never as a FastAPI body
parameter, and a response model is declared with `responses=` (`ok(...)`), never as
`response_model` (which would filter what a handler returns). Changing a declaration changes
no behaviour; tests/unit/test_openapi.py and tests/security/test_schema_fuzz.py check that
the declarations and the answers agree.

Bounds that come from settings (`VIBE_MAX_QUERY_CHARS`, `VIBE_MAX_LIMIT`, `VIBE_MAX_K`) are
declared with their defaults.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from fastapi import Depends
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from shared.config import Settings
from shared.filters import MAX_FIELD_CHARS, MAX_FIELDS, MAX_IN_VALUES, MAX_STRING_CHARS

_DEFAULTS = Settings.model_fields
MAX_QUERY_CHARS: int = _DEFAULTS["max_query_chars"].default
MAX_LIMIT: int = _DEFAULTS["max_limit"].default
MAX_K: int = _DEFAULTS["max_k"].default
TEN_YEARS = 10 * 365 * 86400  # POST /semantic/evict idleSeconds

# -- authentication ------------------------------------------------------------------------
# `require(scope)` (services/api/auth.py) authenticates; this dependency only declares the
# scheme. With auto_error=False it never refuses anything (it returns None when the header is
# absent or not a bearer), so adding it to a route changes no answer.
BEARER = HTTPBearer(auto_error=False, scheme_name="bearer", description=(
    "An API key or an end-user token (POST /v1/tokens): `Authorization: Bearer <key>`. The key decides "
    "the tenant, the principals (for document ACLs) and the scopes (`read`, `write`, `admin`). No, an "
    "unknown, a revoked or an expired key or token: 401 `unauthorized`; without the route's scope: 403 "
    "`forbidden`."))
AUTHENTICATED: list[DependsParam] = [Depends(BEARER)]
SECURITY_NAME = "bearer"

# -- the error body --------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    """The `error` object (also the data of an SSE `error` event)."""

    code: str = Field(description="a stable code: invalid_params, unauthorized, forbidden, not_found, conflict, "
                                  "dimension_mismatch, payload_too_large, rate_limited, embedder_unavailable, "
                                  "index_unavailable, internal_error, method_not_allowed, not_ready")
    message: str = Field(description="human text, safe to show; never a stack trace")
    details: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, description="machine-readable context, e.g. `field` for invalid_params")
    requestId: str | SkipJsonSchema[None] = Field(
        default=None, description="the answer's X-Request-Id (quote it when reporting a problem)")


class ErrorBody(BaseModel):
    """Every error answer: `{"error": {"code", "message", "details"?}}`."""

    model_config = ConfigDict(extra="forbid")
    error: ErrorDetail


_ERROR_TEXT = {
    400: "invalid_params: the request is malformed or out of bounds",
    401: "unauthorized: no bearer key, or an unknown, revoked or expired key or token",
    403: "forbidden: the key lacks the route's scope",
    404: "not_found",
    409: "conflict or dimension_mismatch: the request contradicts the current state",
    413: "payload_too_large",
    429: "rate_limited: over the tenant's request rate (see `Retry-After`)",
    500: "internal_error",
    503: "embedder_unavailable: the embedding provider did not answer; index_unavailable: the keyword index "
         "server (OpenSearch) did not answer",
}
_RETRY_AFTER = {"Retry-After": {"description": "whole seconds until a request will be admitted",
                                "schema": {"type": "integer", "minimum": 0}}}


def errors(*statuses: int, authenticated: bool = True, json_route: bool = True) -> dict[int | str, dict[str, Any]]:
    """Error responses with the error body. An authenticated route also answers 401, 403 and
    429; every route may answer 500. `4XX` declares the body of any other client error
    (and keeps FastAPI from declaring a 422, which this API never answers). `json_route=False`
    (a route whose success is not JSON): the JSON media type is spelled out, as FastAPI would
    give a model the route's own media type."""
    wanted = set(statuses) | {500} | ({401, 403, 429} if authenticated else set())
    body: dict[str, Any] = {"model": ErrorBody} if json_route else {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    out: dict[int | str, dict[str, Any]] = {}
    for s in sorted(wanted):
        out[s] = {**body, "description": _ERROR_TEXT[s]}
        if s == 429:
            out[s]["headers"] = _RETRY_AFTER
    out["4XX"] = {**body, "description": "any other client error, with the same error body"}
    return out


def ok(model: type[BaseModel], description: str, status: int = 200) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": model, "description": description}}


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its `$defs` substituted in place (a request body declared
    through `openapi_extra` is not registered in the document's components)."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "default" in node and node["default"] is None and node.get("type") not in (None, "null"):
                node = {k: v for k, v in node.items() if k != "default"}  # a SkipJsonSchema[None] default
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = resolve(copy.deepcopy(defs[ref.removeprefix("#/$defs/")]))
                return {**target, **{k: resolve(v) for k, v in node.items() if k != "$ref"}}
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)  # type: ignore[no-any-return]


def body(model: type[BaseModel], required: bool = True, description: str | None = None) -> dict[str, Any]:
    """`openapi_extra` declaring a JSON request body; `required=False`: an empty body (no
    Content-Length) counts as `{}`."""
    rb: dict[str, Any] = {"required": required, "content": {"application/json": {"schema": inline_schema(model)}}}
    if description:
        rb["description"] = description
    return {"requestBody": rb}


def query(name: str, schema: dict[str, Any], required: bool, description: str) -> dict[str, Any]:
    """A query parameter declared by hand (the handler reads it as optional and refuses it
    itself, with its own message)."""
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


# -- shared value schemas ----------------------------------------------------------------------

# services/api/writes.py check_collection: the name matches in full, is not `any` and does not
# start with the reserved `mcp-task-` (any case).
# shared/names.py's rule alone (reads, admin queries); COLLECTION_NAME adds what writes refuse.
ANY_COLLECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
COLLECTION_NAME: dict[str, Any] = {
    "type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$",
    "not": {"anyOf": [{"const": "any"}, {"pattern": "^[Mm][Cc][Pp]-[Tt][Aa][Ss][Kk]-"}]},
    "description": "a collection name: a letter or digit, then up to 127 letters, digits, '_', '.' or '-' "
                   "(not `any`, not starting with `mcp-task-`)",
}
SPACE_NAME: dict[str, Any] = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"}
# What Python's str.strip() removes (the handlers' "empty" test); a string holding any other
# character is not empty.
_NOT_BLANK = "[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def _as(schema: dict[str, Any]) -> Any:
    """json_schema_extra that replaces the generated property schema with `schema`."""

    def replace(generated: dict[str, Any]) -> None:
        generated.clear()
        generated.update(copy.deepcopy(schema))

    return replace


def _name_field(description: str, nullable: bool = False) -> Any:
    name = {**COLLECTION_NAME, "description": description}
    if nullable:
        return Field(default=None, json_schema_extra=_as({"anyOf": [name, {"type": "null"}]}))
    return Field(json_schema_extra=_as(name))


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


class SemanticIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="SemanticOptions")
    strategy: Literal["auto", "keyword", "semantic", "hybrid"] = "auto"
    domainHint: None = Field(default=None, description=(
        "The server MAY map a domain to a space. This server maps none: any value other than "
        "null answers 400 `invalid_params` (never silently ignored)."))
    k: int | None = Field(default=None, ge=1, le=MAX_K, description="candidates per leg")
    query: QueryTextIn | QueryByDocIn | None = Field(
        default=None, description="exactly one of `text` or `doc` (a document to find more like)")


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
            {"required": ["text"], "properties": {"text": {"type": "string", "pattern": _NOT_BLANK}}}]}}}}},
], "not": {"required": ["global", "collection"], "properties": {
    "global": {"const": True}, "collection": {"not": {"const": "any"}}}},
    "description": "`q`, or `semantic.query`, must hold something other than whitespace; `global: true` "
                   "goes with collection `any`"}


class ReadIn(BaseModel):
    """POST /v1/read (readOnce)."""

    model_config = ConfigDict(extra="forbid", title="ReadRequest", json_schema_extra=_READ_NOT_EMPTY)
    collection: str = Field(default="any", pattern=ANY_COLLECTION_NAME, description="a collection name, or `any`")
    q: str = Field(default="", max_length=MAX_QUERY_CHARS)
    semantic: SemanticIn = Field(default_factory=SemanticIn)
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT, description="results per page")
    global_: bool = Field(default=False, alias="global", description=(
        "Cross-database search: every collection of the key's tenant (as collection `any`, which "
        "it requires; never another tenant's)"))
    include: IncludeIn = Field(default_factory=IncludeIn)
    filter: dict[str, Any] | None = Field(default=None, json_schema_extra=_as(FILTER))
    cursor: str | None = Field(default=None, json_schema_extra=_as({"anyOf": [CURSOR, {"type": "null"}]}))


class SemanticState(BaseModel):
    """`__semantic` and GET /semantic/status."""

    status: str = Field(description="none, queued, ready, stale, failed, skipped, deferred, cold, ...")
    lastEmbeddedAt: str | None
    space: str
    reason: str | SkipJsonSchema[None] = None


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


class Warming(BaseModel):
    """How many results are being embedded now (also the data of an SSE `warming` event)."""

    queued: int
    message: str


class Diagnostics(BaseModel):
    model_config = ConfigDict(extra="allow")
    strategy: str
    strategyReason: str | None = None
    space: str | None = None
    model: str | None = None
    lexical: dict[str, Any] | None = None
    semantic: dict[str, Any] | None = None
    followUp: Literal["unknown", "agree", "disagree"] | None = Field(
        default=None, description="VIBE_TOUCH_FOLLOW_UP=auto: the collection's follow-up state this read's touches "
                                  "were planned with (GET /semantic/touch); null: no touch, or not `auto`")
    elapsedMs: float | None = None


class ReadAnswer(BaseModel):
    """The JSON answer; also the data of the SSE events `lexical`, `semantic` and `done`."""

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
    "WarmingEvent": {"title": "WarmingEvent", "allOf": [{"$ref": "#/components/schemas/Warming"}],
                     "description": "data of `event: warming`: how many results are being embedded now"},
    "DoneEvent": {"title": "DoneEvent", "allOf": [{"$ref": "#/components/schemas/ReadAnswer"}],
                  "description": "data of `event: done`: the final ranking and diagnostics; the stream ends"},
    "ErrorEvent": {"title": "ErrorEvent", "allOf": [{"$ref": "#/components/schemas/ErrorDetail"}],
                   "description": "data of `event: error`: the stream's last event on failure"},
}
EVENT_DATA = {"lexical": "LexicalEvent", "semantic": "SemanticEvent", "warming": "WarmingEvent",
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
        "re-ranking as embeddings arrive), `warming` (progress), then `done` (the final ranking and "
        "diagnostics) or `error` (on failure); the body ends after either. Data: LexicalEvent, SemanticEvent, "
        "WarmingEvent, DoneEvent, ErrorEvent.")},
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


# -- POST /v1/collections/{c}/docs:mget ----------------------------------------------------------


class MgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="MgetRequest")
    ids: list[Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]] = Field(
        min_length=1, max_length=100, description="document ids, at most 100 (VIBE_MAX_MGET_IDS)")


class MgetDoc(BaseModel):
    """A found document: `_id`, its stored fields, `_vibe` if set and `_found: true`; a missing
    one, or one the key may not read (the two are indistinguishable): `{_id, found: false,
    _found: false}`. `_found` is the flag to test (a document may have a field named `found`)."""

    model_config = ConfigDict(extra="allow", title="MgetDoc")
    id: str = Field(alias="_id")
    found_: bool = Field(alias="_found")


class MgetAnswer(BaseModel):
    docs: list[MgetDoc] = Field(description="one per id asked, in that order")


class MatchReason(BaseModel):
    """A leg that found the document: its rank and score there; for the keyword leg, per field,
    the highlight fragments of the query's terms (as a read with include.highlights shows them)."""

    type: Literal["match"]
    leg: Literal["keyword", "semantic"]
    rank: int = Field(ge=1, description="the document's rank in that leg, from 1")
    score: float = Field(description=(
        "the leg's own score: keyword, BM25 relative to the best of the caller's results; semantic, "
        "the cosine similarity"))
    field: str | SkipJsonSchema[None] = Field(default=None, description=(
        "the document field the highlights come from (`_all` for a fragment across fields)"))
    highlights: list[str] | SkipJsonSchema[None] = Field(default=None, description=(
        "fragments with the matched terms in <b>, HTML-escaped"))


class EdgeReason(BaseModel):
    """Reached through the graph overlay (declared; no ranking makes it yet)."""

    type: Literal["edge"]
    path: list[str] = Field(description="`collection/id` of each document on the way, the source first")


class CertReason(BaseModel):
    """A certificate the document requires, which the caller holds."""

    type: Literal["cert"]
    issuer: str = Field(description="the part of the certificate before the first `:`")
    name: str = Field(description="the part after it")
    rule: Literal["required"] = Field(description="`required`: a reader must hold it")


class NotEmbeddedReason(BaseModel):
    """Why the document has no vector in the ranking's space (from its semantic state now)."""

    type: Literal["not_embedded"]
    status: str = Field(description="its semantic status: none, queued, stale, denied, deferred, failed")
    reason: str | None = Field(description=(
        "why, as the sidecar says: a policy rule, the writer's intent, `budget`, `cert`, ..."))
    space: str


ExplainReason = Annotated[MatchReason | EdgeReason | CertReason | NotEmbeddedReason, Field(discriminator="type")]


class LegContribution(BaseModel):
    """What one leg put into the ranking's score; the contributions sum to `score`."""

    leg: Literal["keyword", "semantic"]
    rank: int | None = Field(description="rank in the leg, from 1; null: the leg did not return it")
    raw: float | None = Field(description=(
        "the leg's own score (keyword: BM25 relative to the best of the caller's results, never raw "
        "BM25; semantic: cosine similarity); null: the leg did not return it"))
    normalised: float = Field(description=(
        "z-score fusion: the leg's z-score (its floor when the leg did not return it); RRF: 1/(k + rank); "
        "one leg alone: the raw score"))
    weight: float
    contribution: float = Field(description="weight x normalised: this leg's share of `score`")
    standIn: bool | SkipJsonSchema[None] = Field(default=None, description=(
        "true: the document has no vector yet and its semantic share is estimated from its keyword one"))


class Explanation(BaseModel):
    """Why a result is where it is: the fusion used, each leg's contribution, and the reasons."""

    id: str
    collection: str
    strategy: Literal["keyword", "semantic", "hybrid"]
    score: float = Field(description="the ranking's own score (the contributions' sum)")
    fusion: Literal["zscore", "rrf", "none"] = Field(description="the hybrid fusion used; none for one leg")
    shownScore: float = Field(description="`score` as the answer showed it, in (0, 1]")
    weights: dict[str, float] = Field(description="each leg's weight in the fusion")
    contributions: list[LegContribution]
    reasons: list[ExplainReason]
    expiresAt: float = Field(description="Unix time after which the explainId answers 404")


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
    examples: list[str]
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


# -- GET /semantic/touch (the touch policy's "auto" follow-up switch) ----------------------------

FOLLOW_UP_COLLECTION: dict[str, Any] = {
    "type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$",
    "description": "a collection name (reads across collections are counted under `any`)"}


class FollowUpCollection(BaseModel):
    collection: str = Field(description="the collection as reads name it (`any`: reads across collections)")
    state: Literal["unknown", "agree", "disagree"] = Field(
        description="`unknown` before `after` first reads; then `agree` while `mean` is below `below`, "
                    "else `disagree`")
    reads: int = Field(description="streamed first reads observed, by every replica")
    mean: float = Field(description="their running disagreement with the lexical top (the last ~100 weigh)")
    updatedAt: str | None = Field(description="when a process last wrote what it observed")


class FollowUpView(BaseModel):
    followUp: bool | Literal["auto"] = Field(description="VIBE_TOUCH_FOLLOW_UP: the states apply when `auto`")
    after: int = Field(description="first reads a collection needs before it is `agree` or `disagree`")
    below: float = Field(description="the running mean below which a collection is `agree`")
    flushEvery: int = Field(description="VIBE_TOUCH_AUTO_FLUSH_EVERY: a process writes what it observed every "
                                        "this many first reads of a collection, and at once on a change of state")
    refreshSeconds: float = Field(description="VIBE_TOUCH_AUTO_REFRESH_SECONDS: how often a process reads a "
                                              "collection's stored state again")
    collections: list[FollowUpCollection] = Field(description="the tenant's collections by name, one page")
    next: str | None = Field(description="pass as `after` for the next page; null on the last")
