"""The OpenAPI document declares every request, response and error body and the bearer scheme
(so clients can be generated from it), and what it declares is what the API does: the error
body is the one handler's, success statuses are the handlers' (201, 202), no 422 (the API
answers 400), the SSE alternative of /v1/read, and 405 answers carry `Allow`.
tests/security/test_schema_fuzz.py checks the same declarations against the served app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from services.api import schemas
from services.api.app import _leaf_routes
from services.api.bodies import parse_model
from services.api.schemas import ReadBody
from services.core.keyring import KeyRing
from services.wiring import build, create_app
from shared.config import ApiKey, Settings
from shared.errors import ErrorCode, VibeError, invalid

SCHEME = schemas.SECURITY_NAME
OPEN = {("GET", "/healthz"), ("GET", "/readyz")}  # answer anyone
OPTIONAL_AUTH = {("GET", "/metrics"), ("GET", "/metrics/tenants")}  # a bearer only with VIBE_METRICS_TOKEN
# The success statuses each handler answers (JSONResponse(status_code=...)); the rest answer 200.
SUCCESS = {("PUT", "/v1/collections/{collection}/docs/{doc_id}"): {"200", "201"},
           ("POST", "/semantic/reindex"): {"202"}, ("POST", "/semantic/spaces"): {"202"},
           ("POST", "/v1/keys"): {"201"}, ("POST", "/v1/tokens"): {"201"}, ("DELETE", "/v1/keys/{key_id}"): {"204"},
           ("DELETE", "/v1/collections/{collection}"): {"200", "202"}}
NO_CONTENT = {("DELETE", "/v1/keys/{key_id}")}  # 204: no body to declare
# Bodies read with `json_body` that may be empty (no Content-Length: `{}`).
OPTIONAL_BODY = {("POST", "/semantic/reindex"), ("POST", "/semantic/spaces/{space}/activate"),
                 ("PUT", "/v1/collections/{collection}/settings")}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    c = build(Settings(data_dir=Path(tmp_path_factory.mktemp("openapi")), embedder="hash", embed_dim=32))
    keys = KeyRing([ApiKey(key="k", tenant="t", principals=["user:a"], scopes=["read", "write", "admin"])])
    yield create_app(c, keys)
    c.store.close()


@pytest.fixture(scope="module")
def doc(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def _routes(app: FastAPI) -> list[APIRoute]:
    """The app's API routes, also inside included routers (not pages kept out of the schema: /ui)."""
    return [r for r in _leaf_routes(app.router.routes) if isinstance(r, APIRoute) and r.include_in_schema]


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


def _authenticates(route: APIRoute) -> bool:
    """The route depends on `require(scope)` (services/api/auth.py)."""
    def walk(dep: Any) -> Iterator[Any]:
        for d in dep.dependencies:
            yield d.call
            yield from walk(d)
    return any(getattr(call, "__qualname__", "").startswith("require.") for call in walk(route.dependant))


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """Validate against a schema of the document, its `#/components/...` references resolved."""
    return jsonschema.Draft202012Validator({**schema, "components": doc["components"]})


def test_every_operation_is_listed_once_per_route(app: FastAPI, doc: dict[str, Any]) -> None:
    routes = {(m, r.path_format) for r in _routes(app) if r.include_in_schema for m in r.methods}  # {id:path} is {id}
    assert {(m, p) for m, p, _ in _operations(doc)} == routes
    assert len(routes) >= 25  # documents 4, read 2, admin 8, lifecycle 11+


def test_the_bearer_scheme_is_declared_on_every_authenticated_route(app: FastAPI, doc: dict[str, Any]) -> None:
    assert doc["components"]["securitySchemes"][SCHEME] == {
        "type": "http", "scheme": "bearer", "description": schemas.BEARER.model.description}
    ops = {(m, p): op for m, p, op in _operations(doc)}
    for route in _routes(app):
        for method in route.methods:
            key, op = (method, route.path_format), ops[(method, route.path_format)]
            if _authenticates(route):
                assert op.get("security") == [{SCHEME: []}], key
            elif key in OPTIONAL_AUTH:
                assert op.get("security") == [{}, {SCHEME: []}], key
            else:
                assert key in OPEN and "security" not in op, key
    assert sum(_authenticates(r) for r in _routes(app)) == len(ops) - len(OPEN | OPTIONAL_AUTH)


def test_every_operation_declares_its_success_body(doc: dict[str, Any]) -> None:
    for method, path, op in _operations(doc):
        ok = {s for s in op["responses"] if s.startswith("2")}
        assert ok == SUCCESS.get((method, path), {"200"}), (method, path, ok)
        if (method, path) in NO_CONTENT:
            assert "content" not in op["responses"]["204"], (method, path)
            continue
        for status in ok:
            content = op["responses"][status]["content"]
            for media, spec in content.items():
                schema = _resolve(doc, spec["schema"])
                assert schema.get("type") or schema.get("properties") or schema.get("anyOf"), (method, path, media)
            assert set(content) == ({"text/plain"} if path in ("/metrics", "/metrics/tenants") else
                                    {"application/json", "text/event-stream"} if path == "/v1/read" else
                                    {"application/json", "application/x-ndjson"} if path == "/semantic/ledger" else
                                    {"application/json"}), (method, path)


def test_every_error_status_declares_the_error_body_and_none_is_422(app: FastAPI, doc: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    authenticated = {(m, r.path_format) for r in _routes(app) if _authenticates(r) for m in r.methods}
    for method, path, op in _operations(doc):
        errors = {s for s in op["responses"] if not s.startswith("2")}
        assert "422" not in errors and {"4XX", "500"} <= errors, (method, path, errors)
        if (method, path) in authenticated:
            assert {"401", "403", "429"} <= errors, (method, path)
        if method in ("POST", "PUT"):
            assert "400" in errors and "413" in errors, (method, path)
        for status in errors:
            assert op["responses"][status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"}, (method, path, status)


def test_every_body_reading_operation_declares_its_request_body(doc: dict[str, Any]) -> None:
    for method, path, op in _operations(doc):
        if method not in ("POST", "PUT"):
            assert "requestBody" not in op, (method, path)
            continue
        body = op["requestBody"]
        assert body["required"] is ((method, path) not in OPTIONAL_BODY), (method, path)
        schema = body["content"]["application/json"]["schema"]
        assert schema["type"] == "object" and schema.get("properties"), (method, path)
        assert "$defs" not in str(schema) and "$ref" not in str(schema), (method, path)  # inlined


def test_the_error_body_is_what_the_handler_answers(doc: dict[str, Any]) -> None:
    check = _validator(doc, {"$ref": "#/components/schemas/ErrorBody"})
    check.validate(invalid("q must not be empty", field="q").body())
    check.validate(VibeError(ErrorCode.NOT_FOUND, "document not found").body())
    check.validate({"error": {"code": "method_not_allowed", "message": "method not allowed"}})
    assert not check.is_valid({"detail": [{"loc": ["body"], "msg": "Field required"}]})  # FastAPI's 422 body
    assert not check.is_valid({"error": {"code": "x"}})


def _read_schema(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["paths"]["/v1/read"]["post"]["requestBody"]["content"]["application/json"]["schema"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("body", "accepted"), [
    ({"q": "wing"}, True),
    ({"q": "wing", "collection": "c1", "limit": 200, "semantic": {"strategy": "hybrid", "k": 2000}}, True),
    ({"semantic": {"query": {"text": "a paraphrase"}}}, True),
    ({"semantic": {"query": {"doc": {"collection": "c", "_id": "1", "fields": ["title"]}}}}, True),
    ({"q": "x", "global": True, "include": {"semantic": True, "highlights": True}}, True),
    ({}, False),
    ({"q": " \t\x1f"}, False),  # whitespace to str.strip(), the handler's test
    ({"semantic": {"query": None}}, False),
    ({"semantic": {"query": {"text": "  "}}}, False),
    ({"semantic": {"query": {"text": "a", "doc": {"collection": "c", "_id": "1"}}}}, False),
    ({"q": "x", "limit": 201}, False),
    ({"q": "x", "limit": 0}, False),
    ({"q": "x", "semantic": {"k": 2001}}, False),
    ({"q": "x" * 4097}, False),
    ({"q": "x", "collection": ""}, False),
    ({"q": "x", "semantic": {"strategy": "vector"}}, False),
    ({"q": "x", "unknown": 1}, False),
    # filters, include.fields, cursors, and no accepted-but-ignored option
    ({"q": "x", "filter": {"year": {"gte": 1990, "lt": 2000}, "tag": {"in": ["a", 1, True]}, "lang": "en"}}, True),
    ({"q": "x", "filter": {"year": {"eq": 3}}, "include": {"fields": ["title", "year"]}}, True),
    ({"q": "x", "filter": None, "include": {"fields": True}}, True),
    ({"q": "x", "filter": {"_acl": "user:a"}}, False),
    ({"q": "x", "filter": {"year": {}}}, False),
    ({"q": "x", "filter": {"year": {"in": []}}}, False),
    ({"q": "x", "filter": {"year": {"in": list(range(101))}}}, False),
    ({"q": "x", "filter": {"year": {"gte": "1990"}}}, False),
    ({"q": "x", "filter": {"year": {"eq": 1, "in": [2]}}}, False),
    ({"q": "x", "filter": {"year": {"near": 1}}}, False),
    ({"q": "x", "filter": {"year": None}}, False),
    ({"q": "x", "filter": {"y": [1, 2]}}, False),
    ({"q": "x", "filter": {f"f{i}": 1 for i in range(17)}}, False),
    ({"q": "x", "filter": {"x" * 65: 1}}, False),
    ({"q": "x", "filter": ["year"]}, False),
    ({"q": "x", "include": {"fields": [""]}}, False),
    ({"q": "x", "include": {"fields": ["f"] * 101}}, False),
    ({"q": "x", "include": {"fields": "title"}}, False),
    ({"q": "x", "semantic": {"domainHint": "code"}}, True),
    ({"q": "x", "semantic": {"domainHint": ""}}, False),
    ({"q": "x", "semantic": {"domainHint": "x" * 129}}, False),
    ({"q": "x", "semantic": {"domainHint": "a\tb"}}, False),
    ({"q": "x", "global": True, "collection": "posts"}, False),
    ({"q": "x", "global": True, "collection": "any"}, True),
    ({"q": "x", "global": False, "collection": "posts"}, True),
    ({"q": "x", "cursor": ""}, False),
    # rerank needs query text to score the page against (a doc query has none)
    ({"semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}, "rerank": True}, False),
    ({"semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}, "rerank": {"provider": "p"}}, False),
    ({"semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}, "rerank": False}, True),
    ({"q": " ", "semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}, "rerank": True}, False),
    # more-like-this over every readable collection, and vector queries (services/api/read_similar.py)
    ({"collection": "semantic.nodes", "semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}}, True),
    ({"collection": "semantic.nodes", "q": "x"}, False),
    ({"collection": "semantic.nodes", "global": True, "semantic": {"query": {"doc": {"collection": "c", "_id": "1"}}}},
     True),
    ({"collection": "semantic.nodes", "q": "x", "semantic": {"query": None}}, False),
    ({"collection": "semantic.nodes", "semantic": {"query": {"text": "a paraphrase"}}}, False),
    # (the served document gives a vector the default space's length: the app's embed_dim, 32)
    ({"collection": "semantic.nodes", "semantic": {"query": {"vector": [0.5, -1] * 16}}}, True),
    ({"semantic": {"query": {"vector": [0.5, -1] * 16}}}, True),
    ({"semantic": {"strategy": "semantic", "query": {"vector": [1] * 32}}}, True),
    ({"rerank": {"provider": "default"}, "semantic": {"query": {"vector": [1] * 32}}}, False),
    ({"semantic": {"query": {"vector": []}}}, False),
    ({"semantic": {"query": {"vector": [0, 0.0]}}}, False),
    ({"semantic": {"query": {"vector": [1] * 4097}}}, False),
    ({"semantic": {"query": {"vector": [2e6]}}}, False),
    ({"semantic": {"query": {"vector": ["1"]}}}, False),
    ({"q": "x", "semantic": {"query": {"vector": [1]}}}, False),
    ({"semantic": {"strategy": "keyword", "query": {"vector": [1]}}}, False),
    ({"semantic": {"strategy": "hybrid", "query": {"vector": [1]}}}, False),
    ({"rerank": True, "semantic": {"query": {"vector": [1]}}}, False),
    ({"semantic": {"query": {"vector": [1], "text": "x"}}}, False),
])
def test_the_read_body_declaration_matches_the_handler(doc: dict[str, Any], body: dict[str, Any],
                                                       accepted: bool) -> None:
    """The declared ReadRequest and the handler's ReadBody + to_request bounds agree."""
    from services.api.routes_read import to_request

    assert jsonschema.Draft202012Validator(_read_schema(doc)).is_valid(body) is accepted

    class _C:
        settings = Settings()

    try:
        to_request(parse_model(ReadBody, body), _C())  # type: ignore[arg-type]
        handled = True
    except VibeError as e:
        assert e.code is ErrorCode.INVALID_PARAMS
        handled = False
    assert handled is accepted


def test_read_declares_the_event_stream_and_each_event(doc: dict[str, Any]) -> None:
    """Each SSE event's data has its own component (a generator gives each a type), and each
    component is the shape the handler sends (ReadAnswer, Warming, ErrorDetail)."""
    stream = doc["paths"]["/v1/read"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    events = {v["properties"]["event"]["const"]: v["properties"]["data"]["contentSchema"]["$ref"].rsplit("/", 1)[1]
              for v in stream["itemSchema"]["oneOf"]}
    assert events == {"lexical": "LexicalEvent", "semantic": "SemanticEvent", "rerank": "RerankEvent",
                      "done": "DoneEvent", "warming": "WarmingEvent", "error": "ErrorEvent"}
    shapes = {"LexicalEvent": "ReadAnswer", "SemanticEvent": "ReadAnswer", "RerankEvent": "ReadAnswer",
              "DoneEvent": "ReadAnswer", "WarmingEvent": "Warming", "ErrorEvent": "ErrorDetail"}
    for name, shape in shapes.items():
        assert doc["components"]["schemas"][name]["allOf"] == [{"$ref": f"#/components/schemas/{shape}"}]
        assert shape in doc["components"]["schemas"]
    answer = doc["components"]["schemas"]["ReadAnswer"]
    assert "nextCursor" in answer["required"]
    hit = doc["components"]["schemas"]["Hit"]["properties"]
    assert hit["score"]["exclusiveMinimum"] == 0 and hit["score"]["maximum"] == 1
    assert "fields" in hit and "(0, 1]" in hit["score"]["description"]


def test_a_405_names_every_method_of_the_path_in_allow(app: FastAPI) -> None:
    client = TestClient(app, raise_server_exceptions=False)  # no lifespan: nothing is served
    r = client.request("TRACE", "/semantic/promote")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    assert r.headers["allow"] == "DELETE, POST"
    r = client.request("PATCH", "/v1/collections/c/docs/d")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, PUT"
    assert client.request("TRACE", "/healthz").headers["allow"] == "GET"


def test_every_json_answer_is_a_named_component(doc: dict[str, Any]) -> None:
    """A generator (the TypeScript SDK's types) gives each named component its own type: every
    success answer of the documents and read routes is a `$ref` to one."""
    names = set(doc["components"]["schemas"])
    assert {"Written", "Deleted", "BulkAnswer", "BulkItem", "StoredDocument", "MgetAnswer", "ReadAnswer"} <= names
    for method, path, op in _operations(doc):
        if not path.startswith("/v1/"):
            continue
        for status, spec in op["responses"].items():
            if status.startswith("2") and (method, path) not in NO_CONTENT:
                ref = spec["content"]["application/json"]["schema"].get("$ref", "")
                assert ref.rsplit("/", 1)[-1] in names, (method, path, status)
