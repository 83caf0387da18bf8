"""Request bodies: raw bytes → JSON with size limits, and a model parsed with stable messages."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError

from shared.errors import ErrorCode, VibeError, invalid


async def json_body(request: Request, max_bytes: int) -> Any:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise VibeError(ErrorCode.PAYLOAD_TOO_LARGE, f"request body over {max_bytes} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise VibeError(ErrorCode.PAYLOAD_TOO_LARGE, f"request body over {max_bytes} bytes")
    if not raw:
        raise invalid("request body is empty; a JSON object is expected")
    try:
        return orjson.loads(bytes(raw))
    except orjson.JSONDecodeError as e:
        raise invalid(f"malformed JSON: {e}") from None


async def optional_object(request: Request, schema: type[BaseModel], max_bytes: int = 65_536) -> dict[str, Any]:
    """An admin call's JSON object body; no body at all counts as `{}`. A key its request
    `schema` (the model its OpenAPI body declares) does not name answers 400 and changes
    nothing, as in a read: an option mistyped on a call that spends (`{"forse": true}` on a
    reindex) must not quietly do the unforced thing."""
    allowed = {f.alias or name for name, f in schema.model_fields.items()}
    if not int(request.headers.get("content-length") or 0):
        return {}
    body = await json_body(request, max_bytes)
    if not isinstance(body, dict):
        raise invalid("body must be a JSON object")
    unknown = sorted(k for k in body if k not in allowed)
    if unknown:
        raise invalid(f"unknown field {unknown[0][:64]!r}; this call takes {', '.join(sorted(allowed))}",
                      field=unknown[0][:64])
    return body


def parse_model(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise invalid(f"{where}: {first.get('msg')}" if where else str(first.get("msg")),
                      errors=[{"loc": list(err.get("loc", ())), "msg": err.get("msg")} for err in e.errors()]) from None
