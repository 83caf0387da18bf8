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
from typing import Any

from fastapi import Depends
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from shared.config import Settings

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

# services/api/writes.py check_collection: the name matches in full, is not `any` or `semantic.nodes`
# (RESERVED_COLLECTIONS) and does not
# start with the reserved `mcp-task-` (any case).
# shared/names.py's rule alone (reads, admin queries); COLLECTION_NAME adds what writes refuse.
ANY_COLLECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
COLLECTION_NAME: dict[str, Any] = {
    "type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$",
    "not": {"anyOf": [{"const": "any"}, {"const": "semantic.nodes"}, {"pattern": "^[Mm][Cc][Pp]-[Tt][Aa][Ss][Kk]-"}]},
    "description": "a collection name: a letter or digit, then up to 127 letters, digits, '_', '.' or '-' "
                   "(not `any` or `semantic.nodes`, not starting with `mcp-task-`)",
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
