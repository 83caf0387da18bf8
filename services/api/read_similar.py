"""The front door's checks for more-like-this over `semantic.nodes` and for `{vector}` queries.

A vector query is a diagnostic: it searches the caller's tenant with a vector the caller
supplies, so it is reserved to admin keys, is checked against the dimension of the tenant's
active space (a vector of another length compares with nothing), and has no lexical leg.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from services.container import Container
from services.planner.request import ReadRequest
from services.planner.similar import NODES
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import Principal

VECTOR_FIELD = "semantic.query.vector"
MAX_VECTOR_DIM = 4096  # the widest model a space may hold is far below (bounds the body and the search)
MAX_VECTOR_ABS = 1e6  # each number fits float32 with room for a dot product (no inf, no NaN scores)


def scope_of(collection: str, query_doc: object | None, query_vector: object | None) -> str:
    """The collection the planner searches: `semantic.nodes` is every collection the caller may
    read (as `any`), and only with a document or a vector to find more like."""
    if collection != NODES:
        return collection
    if query_doc is None and query_vector is None:
        raise invalid("collection 'semantic.nodes' finds documents like one: give semantic.query.doc "
                      "(or semantic.query.vector)", field="semantic.query")
    return "any"


def checked_vector(values: Sequence[float] | None, q: str, strategy: str, rerank: bool) -> tuple[float, ...] | None:
    """The vector's shape and what it goes with, before any key or space is looked at."""
    if values is None:
        return None
    if not 0 < len(values) <= MAX_VECTOR_DIM:
        raise invalid(f"{VECTOR_FIELD} takes 1 to {MAX_VECTOR_DIM} numbers", field=VECTOR_FIELD)
    if not all(math.isfinite(v) and abs(v) <= MAX_VECTOR_ABS for v in values):
        raise invalid(f"{VECTOR_FIELD} takes finite numbers of magnitude at most {MAX_VECTOR_ABS:g}",
                      field=VECTOR_FIELD)
    if not any(values):
        raise invalid(f"{VECTOR_FIELD} must not be all zeros (it has no direction)", field=VECTOR_FIELD)
    if q.strip():
        raise invalid(f"{VECTOR_FIELD} is the whole query: give it without q", field="q")
    if strategy not in ("auto", "semantic"):
        raise invalid(f"{VECTOR_FIELD} searches vectors only: strategy must be 'semantic' or 'auto' "
                      f"(a vector has no words for a {strategy} leg)", field="semantic.strategy")
    if rerank:
        raise invalid("rerank needs query text: a vector query has none", field="rerank")
    return tuple(float(v) for v in values)


def authorize_vector(req: ReadRequest, c: Container, p: Principal) -> None:
    """Admin scope first (its dimension is not disclosed to a key that may not use it), then
    the dimension of the tenant's active space. The search itself keeps the caller's tenant,
    ACL and certificates (SearchFilter), as every read does."""
    if req.query_vector is None:
        return
    if not p.may("admin"):
        raise VibeError(ErrorCode.FORBIDDEN, f"{VECTOR_FIELD} is a diagnostic: it needs a key with the 'admin' scope")
    space = c.planner.spaces.active(p.tenant)
    emb = c.planner.embedder_for(space, p.tenant)
    if emb is None:
        raise invalid(f"{VECTOR_FIELD}: this server has no embedder, so no vectors to compare with",
                      field=VECTOR_FIELD)
    if len(req.query_vector) != emb.dim:
        raise invalid(f"{VECTOR_FIELD} has {len(req.query_vector)} numbers; the active space {space!r} "
                      f"holds vectors of {emb.dim}", field=VECTOR_FIELD, expected=emb.dim)


def declare_vector_dim(doc: dict[str, Any], c: Container) -> dict[str, Any]:
    """The served OpenAPI document gives `semantic.query.vector` the length of the server's default
    space, so a client (or a schema fuzzer) knows what is served; a tenant that moved to another
    model's space reads that space's dimension in GET /semantic/spaces."""
    read = doc.get("paths", {}).get("/v1/read", {}).get("post", {})
    schema = read.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    semantic = schema.get("properties", {}).get("semantic", {})
    ref = semantic.get("$ref") or next((s.get("$ref") for s in semantic.get("allOf", []) if "$ref" in s), None)
    options = doc.get("components", {}).get("schemas", {}).get(str(ref).rsplit("/", 1)[-1], {}) if ref else semantic
    for choice in options.get("properties", {}).get("query", {}).get("anyOf", []):
        if isinstance(choice, dict) and "$ref" in choice:
            choice = doc["components"]["schemas"].get(choice["$ref"].rsplit("/", 1)[-1], {})
        vector = choice.get("properties", {}).get("vector") if isinstance(choice, dict) else None
        if isinstance(vector, dict) and vector.get("type") == "array":
            vector["minItems"] = vector["maxItems"] = c.embedder.dim
            vector["description"] = (f"{vector.get('description', '')} This server's default space has "
                                     f"{c.embedder.dim} dimensions.").strip()
    return doc
