"""Every JSON answer the integration tests receive is checked against the served app's own
`/openapi.json` (a schema test over the whole integration suite). A mismatch raises
`ResponseMismatch` from the HTTP call, so the test that made it fails and says why.

What is checked: the operation (method + path template) must be declared; the status must be
declared (exactly, or as `4XX`/`5XX`/`default`); a JSON body must validate against the
declared `application/json` schema. SSE event data is checked per event by
`check_event` (harness/server.py `Served.stream`). `/mcp` (MCP has its own protocol) and
`/openapi.json` itself are not checked. Routes the document does not declare (404 for an
unknown path) are not checked beyond being JSON error bodies.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import httpx
import jsonschema

SKIP = ("/mcp", "/openapi.json", "/docs", "/redoc", "/ui")


class ResponseMismatch(AssertionError):
    """An answer that is not what /openapi.json declares."""


class OpenApiResponses:
    def __init__(self, base_url: str):
        self.base_url = base_url
        self._doc: dict[str, Any] | None = None
        self._paths: list[tuple[re.Pattern[str], str]] = []
        self._validators: dict[tuple[str, ...], jsonschema.Draft202012Validator] = {}
        self._lock = threading.Lock()

    def doc(self) -> dict[str, Any]:
        with self._lock:
            if self._doc is None:
                doc = httpx.get(self.base_url + "/openapi.json", timeout=30).json()
                for template in doc["paths"]:
                    rx = re.escape(template)
                    rx = re.sub(r"\\\{[^}]+\\\}", "[^/]+", rx)
                    self._paths.append((re.compile("^" + rx + "$"), template))
                # literal paths first: `/semantic/spaces/{space}` must not shadow a fixed one
                self._paths.sort(key=lambda p: p[1].count("{"))
                self._doc = doc
            return self._doc

    def _validator(self, key: tuple[str, ...], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
        v = self._validators.get(key)
        if v is None:
            v = self._validators[key] = jsonschema.Draft202012Validator(
                {**schema, "components": self.doc()["components"]})
        return v

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]] | None:
        doc = self.doc()
        for rx, template in self._paths:
            if rx.match(path):
                op = doc["paths"][template].get(method.lower())
                if op is not None:
                    return template, op
        return None

    def check(self, response: httpx.Response) -> None:
        request = response.request
        path = request.url.path
        if path.startswith(SKIP):
            return
        media = response.headers.get("content-type", "").split(";")[0].strip()
        if media != "application/json":
            return
        response.read()
        found = self.operation(request.method, path)
        status = str(response.status_code)
        try:
            body = response.json()
        except ValueError as e:
            raise ResponseMismatch(f"{request.method} {path} {status}: not JSON: {e}") from None
        if found is None:
            if response.status_code in (404, 405):  # an undeclared path or method: the error body
                self._validate(("ErrorBody",), {"$ref": "#/components/schemas/ErrorBody"}, body,
                               f"{request.method} {path} {status}")
            return
        template, op = found
        responses = op["responses"]
        spec = responses.get(status) or responses.get(status[0] + "XX") or responses.get("default")
        where = f"{request.method} {template} {status}"
        if spec is None:
            raise ResponseMismatch(f"{where}: status not declared (declared: {sorted(responses)})")
        schema = spec.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            raise ResponseMismatch(f"{where}: a JSON body where none is declared")
        self._validate((request.method, template, status), schema, body, where)

    def _validate(self, key: tuple[str, ...], schema: dict[str, Any], body: Any, where: str) -> None:
        errors = sorted(self._validator(key, schema).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            # an answer of several declared shapes (anyOf): what each shape found wrong
            why = "; ".join(sorted({c.message[:200] for c in e.context or ()}))
            raise ResponseMismatch(f"{where}: answer does not match /openapi.json at "
                                   f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message[:500]}"
                                   + (f" ({why})" if why else ""))

    def check_event(self, event: str, data: Any) -> None:
        """One SSE event's data against its declared component (LexicalEvent, ...)."""
        doc = self.doc()
        stream = doc["paths"]["/v1/read"]["post"]["responses"]["200"]["content"]["text/event-stream"]
        for alt in stream["itemSchema"]["oneOf"]:
            if alt["properties"]["event"].get("const") == event:
                schema = alt["properties"]["data"]["contentSchema"]
                self._validate(("event", event), schema, data, f"SSE event {event}")
                return
        raise ResponseMismatch(f"SSE event {event!r} is not declared")
