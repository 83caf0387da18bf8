"""Which reranker a read uses, decided at the front door: the request's own `rerank` (`true`:
`default`, `{"provider": name}`, `false`: none), else its collection's setting (`rerank: true` in
`/v1/collections/{collection}/settings`, with `default`). A read of `any` has no collection of its
own, so only its own `rerank` applies. A named reranker this server does not configure is refused
(never silently ignored); a collection default is honoured only where it can be (a reranker
configured, query text given), since the read did not ask for it itself."""

from __future__ import annotations

from typing import Any

from services.api.schemas.read import ReadBody, RerankIn
from services.container import Container
from shared.errors import invalid
from shared.model import Principal

DEFAULT = "default"


def choose_reranker(body: ReadBody, c: Container, p: Principal | None, query_text: str | None) -> str | None:
    """The provider name the read reranks with, or None (`p` None: no collection default)."""
    has_text = bool(body.q.strip() or (query_text or "").strip())
    asked: bool | RerankIn | None = body.rerank
    if asked is None:
        if (p is None or body.collection == "any" or not has_text or c.planner.reranker is None
                or not c.collection_directory().rerank(p.tenant, body.collection)):
            return None
        return DEFAULT
    if asked is False:
        return None
    if not has_text:
        raise invalid("rerank needs query text: give q or semantic.query.text", field="rerank")
    name = DEFAULT if asked is True else asked.provider
    if c.planner.reranker_named(name) is None:
        if name == DEFAULT:
            raise invalid("rerank needs a reranker: set VIBE_RERANK_URL (none is configured)", field="rerank")
        known = sorted(c.planner.rerankers) + ([DEFAULT] if c.planner.reranker is not None else [])
        raise invalid(f"rerank.provider {name!r} is not configured (configured: {', '.join(known) or 'none'}; "
                      "see VIBE_RERANK_PROVIDERS)", field="rerank.provider")
    return name


def declare_providers(doc: dict[str, Any], c: Container) -> dict[str, Any]:
    """The served OpenAPI document names the providers this deployment configures, so a client
    (or a schema fuzzer) knows which `rerank.provider` values are served."""
    names = ([DEFAULT] if c.planner.reranker is not None else []) + sorted(c.planner.rerankers)
    if names:
        for choice in rerank_choices(doc):
            choice["properties"]["provider"]["enum"] = names
    return doc


def rerank_choices(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The `{"provider"}` alternatives of `rerank` in /v1/read's request body (declared inline)."""
    read = doc.get("paths", {}).get("/v1/read", {}).get("post", {})
    schema = read.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    rerank = schema.get("properties", {}).get("rerank", {})
    return [s for s in rerank.get("anyOf", []) if isinstance(s, dict) and s.get("title") == "RerankChoice"]
