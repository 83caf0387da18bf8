"""Keys and end-user tokens (docs/keys-and-tokens.md).

`POST/GET /v1/keys`, `DELETE /v1/keys/{key_id}` (scope `admin`) manage the tenant's API-made
keys; `POST /v1/tokens` (any key) mints a signed, expiring token for one end user. A token
can neither mint tokens nor manage keys: it would outlive itself through them."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import require
from services.api.bodies import json_body
from services.api.schemas import _NOT_BLANK, AUTHENTICATED, FILTER, _as, body, errors, ok
from services.api.timefmt import iso
from services.container import Container
from services.core.keyring import KeyRing
from shared.config import Settings
from shared.errors import ErrorCode, VibeError, invalid
from shared.filters import FilterError, parse_filter
from shared.keys import KeyRecord, KeyStore, TooManyKeys, new_key
from shared.model import Principal

router = APIRouter()

MAX_NAME_CHARS = 128
MAX_PRINCIPALS = 100  # principals (and certificates) one key or token may hold
# A principal longer than VIBE_ACL_MAX_PRINCIPAL_BYTES matches no document ACL (those are bounded), so
# it is only bounded here, in characters, as the declaration can say it.
MAX_PRINCIPAL_CHARS = 512
MAX_BODY_BYTES = 65_536
SCOPES = ("read", "write", "admin")
MAX_TTL: int = Settings.model_fields["token_max_ttl_seconds"].default  # declared with its default


# -- declarations (what the handlers accept and answer; they validate nothing) -----------------



def _text_schema(max_chars: int, description: str) -> dict[str, Any]:
    """A string the handlers' `_text` accepts: not blank, no control characters."""
    return {"type": "string", "minLength": 1, "maxLength": max_chars, "description": description,
            "allOf": [{"pattern": _NOT_BLANK}, {"pattern": "^[^\x00-\x1f\x7f]*$"}]}


def _list_schema(description: str, nullable: bool) -> dict[str, Any]:
    listed = {"type": "array", "maxItems": MAX_PRINCIPALS, "description": description,
              "items": _text_schema(MAX_PRINCIPAL_CHARS, "one entry")}
    return {"anyOf": [listed, {"type": "null"}], "description": description} if nullable else listed


def _scopes_schema(description: str, nullable: bool) -> dict[str, Any]:
    listed = {"type": "array", "minItems": 1, "items": {"enum": list(SCOPES)}, "description": description}
    return {"anyOf": [listed, {"type": "null"}], "description": description} if nullable else listed


class KeyIn(BaseModel):
    model_config = ConfigDict(title="KeyRequest", extra="forbid")
    name: str = Field(json_schema_extra=_as(_text_schema(MAX_NAME_CHARS, "a label for people")))
    principals: list[str] = Field(json_schema_extra=_as(_list_schema(
        "principals (document ACL entries) the key reads as", nullable=False)))
    certs: list[str] | None = Field(default=None, json_schema_extra=_as(_list_schema(
        "certificates held (`issuer:name`)", nullable=True)))
    scopes: list[str] = Field(json_schema_extra=_as(_scopes_schema("within the creating key's own scopes",
                                                                   nullable=False)))


class KeyView(BaseModel):
    id: str
    name: str
    principals: list[str]
    certs: list[str]
    scopes: list[str]
    createdAt: str | None = Field(description="null for a bootstrap key")
    bootstrap: bool = Field(description="a key of VIBE_API_KEYS: listed, never deletable through the API")


class KeyCreated(BaseModel):
    id: str
    key: str = Field(description="the secret: shown this once, stored only hashed")
    name: str
    principals: list[str]
    certs: list[str]
    scopes: list[str]
    createdAt: str


class Keys(BaseModel):
    keys: list[KeyView]


class TokenIn(BaseModel):
    model_config = ConfigDict(title="TokenRequest", extra="forbid")
    principals: list[str] | None = Field(default=None, json_schema_extra=_as(_list_schema(
        "default: the key's own; an admin key may name any principals of its tenant, another key only its own",
        nullable=True)))
    certs: list[str] | None = Field(default=None, json_schema_extra=_as(_list_schema(
        "default: the key's own; the same rule as principals", nullable=True)))
    scopes: list[str] | None = Field(default=None, json_schema_extra=_as(_scopes_schema(
        "default [\"read\"]; within the key's own scopes", nullable=True)))
    ttlSeconds: int | None = Field(default=None, ge=1, le=MAX_TTL, description=(
        "default VIBE_TOKEN_TTL_SECONDS (3600), at most VIBE_TOKEN_MAX_TTL_SECONDS (86400)"))
    filter: dict[str, Any] | None = Field(default=None, json_schema_extra=_as({
        **FILTER, "description": "ANDed to every read made with the token (the grammar of /v1/read `filter`)"}))


class TokenCreated(BaseModel):
    token: str = Field(description="use as `Authorization: Bearer <token>` wherever a key is")
    expiresAt: str


# -- parsing ----------------------------------------------------------------------------------


def _text(value: Any, name: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise invalid(f"{name} must be a non-empty string of at most {max_chars} characters", field=name)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise invalid(f"{name} must not contain control characters", field=name)
    return value


def _strings(raw: Any, name: str) -> list[str]:
    if not isinstance(raw, list) or len(raw) > MAX_PRINCIPALS:
        raise invalid(f"{name} must be a list of at most {MAX_PRINCIPALS} strings", field=name)
    return list(dict.fromkeys(_text(v, name, MAX_PRINCIPAL_CHARS) for v in raw))


def _scopes(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not raw or any(s not in SCOPES for s in raw):
        raise invalid("scopes must be a non-empty list of read, write, admin", field="scopes")
    return [s for s in SCOPES if s in raw]


async def _object(request: Request, allowed: set[str]) -> dict[str, Any]:
    raw = await json_body(request, MAX_BODY_BYTES)
    if not isinstance(raw, dict):
        raise invalid("body must be a JSON object")
    unknown = sorted(k for k in raw if k not in allowed)
    if unknown:
        raise invalid(f"unknown field {unknown[0]!r}", field=unknown[0])
    return raw


def _keys_only(p: Principal) -> None:
    if p.via_token:
        raise VibeError(ErrorCode.FORBIDDEN, "an end-user token cannot manage keys or mint tokens; use a key")


def _within(wanted: list[str], held: frozenset[str] | tuple[str, ...], what: str) -> None:
    extra = sorted(set(wanted) - set(held))
    if extra:
        raise VibeError(ErrorCode.FORBIDDEN, f"this key may not grant {what} it does not hold: {extra[0]!r}")


def _ring(request: Request) -> tuple[KeyRing, KeyStore]:
    ring: KeyRing = request.app.state.keys
    assert ring.made is not None  # create_app binds the ring to the store
    return ring, ring.made.store


def _record_view(r: KeyRecord) -> dict[str, Any]:
    return {"id": r.id, "name": r.name, "principals": list(r.principals), "certs": list(r.certs),
            "scopes": list(r.scopes), "createdAt": iso(r.created_at), "bootstrap": False}


# -- routes -----------------------------------------------------------------------------------


@router.post("/v1/keys", status_code=201, dependencies=AUTHENTICATED, openapi_extra=body(KeyIn),
             responses={**ok(KeyCreated, "the key; its secret `key` is never shown again", 201),
                        **errors(400, 409, 413)})
async def post_key(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    """A new key of the caller's tenant, with scopes within the caller's own. 409 `conflict`
    when the tenant holds VIBE_MAX_KEYS_PER_TENANT keys already."""
    _keys_only(p)
    c: Container = request.app.state.container
    raw = await _object(request, {"name", "principals", "certs", "scopes"})
    for name in ("name", "principals", "scopes"):
        if name not in raw:
            raise invalid(f"{name} is required", field=name)
    name = _text(raw["name"], "name", MAX_NAME_CHARS)
    principals = _strings(raw["principals"], "principals")
    certs = _strings(raw["certs"], "certs") if raw.get("certs") is not None else []
    scopes = _scopes(raw["scopes"])
    _within(scopes, p.scopes, "scopes")
    record, secret = new_key(p.tenant, name, principals, certs, scopes, time.time())
    ring, store = _ring(request)
    try:
        await run_in_threadpool(store.create_key, record, c.settings.max_keys_per_tenant)
    except TooManyKeys:
        raise VibeError(ErrorCode.CONFLICT, f"this tenant holds {c.settings.max_keys_per_tenant} keys, the most "
                                            "VIBE_MAX_KEYS_PER_TENANT allows; revoke one first") from None
    assert ring.made is not None
    ring.made.invalidate()
    view = _record_view(record)
    del view["bootstrap"]
    return JSONResponse({**view, "key": secret}, status_code=201)


@router.get("/v1/keys", dependencies=AUTHENTICATED,
            responses={**ok(Keys, "the tenant's keys, bootstrap ones first; never a secret"), **errors()})
async def get_keys(request: Request, p: Principal = Depends(require("admin"))) -> JSONResponse:
    _keys_only(p)
    ring, store = _ring(request)
    boot = [{"id": kid, "name": "VIBE_API_KEYS", "principals": list(k.principals), "certs": list(k.certs),
             "scopes": list(k.scopes), "createdAt": None, "bootstrap": True}
            for kid, k in ring.bootstrap if k.tenant == p.tenant]
    made = await run_in_threadpool(store.keys_of, p.tenant)
    return JSONResponse({"keys": [*boot, *(_record_view(r) for r in made)]})


@router.delete("/v1/keys/{key_id}", status_code=204, dependencies=AUTHENTICATED, responses={
    204: {"description": "revoked: every API process answers 401 to the key and to every token it minted "
                         "within VIBE_KEY_REFRESH_SECONDS"},
    **errors(403, 404)})
async def delete_key(key_id: str, request: Request, p: Principal = Depends(require("admin"))) -> Response:
    """403 `forbidden` (details.reason `bootstrap_key`) for a key of VIBE_API_KEYS; 404 for an
    id the tenant has no key of (another tenant's keys look absent)."""
    _keys_only(p)
    ring, store = _ring(request)
    if ring.is_bootstrap(key_id):
        raise VibeError(ErrorCode.FORBIDDEN, "a key of VIBE_API_KEYS cannot be deleted through the API; remove it "
                                             "from the setting and restart", {"reason": "bootstrap_key"})
    if len(key_id) > 64 or not await run_in_threadpool(store.revoke_key, p.tenant, key_id):
        raise VibeError(ErrorCode.NOT_FOUND, "no such key")
    assert ring.made is not None
    ring.made.invalidate()
    return Response(status_code=204)


@router.post("/v1/tokens", status_code=201, dependencies=AUTHENTICATED, openapi_extra=body(TokenIn),
             responses={**ok(TokenCreated, "a signed token for one end user", 201), **errors(400, 413)})
async def post_token(request: Request, p: Principal = Depends(require(None))) -> JSONResponse:
    """Admin keys may name any principals and certificates of their tenant; other keys only
    their own (403 `forbidden` otherwise). Scopes are within the key's own either way."""
    _keys_only(p)
    c: Container = request.app.state.container
    s = c.settings
    raw = await _object(request, {"principals", "certs", "scopes", "ttlSeconds", "filter"})
    principals = _strings(raw["principals"], "principals") if raw.get("principals") is not None \
        else list(p.principals)
    certs = _strings(raw["certs"], "certs") if raw.get("certs") is not None else sorted(p.certs)
    scopes = _scopes(raw["scopes"]) if raw.get("scopes") is not None else ["read"]
    ttl = raw.get("ttlSeconds")
    ttl = s.token_ttl_seconds if ttl is None else ttl
    if isinstance(ttl, float) and ttl.is_integer():  # JSON's 600.0 is the integer 600
        ttl = int(ttl)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= s.token_max_ttl_seconds:
        raise invalid(f"ttlSeconds must be a whole number from 1 to {s.token_max_ttl_seconds}", field="ttlSeconds")
    try:
        parse_filter(raw.get("filter"))
    except FilterError as e:
        raise invalid(str(e), field="filter") from None
    if not p.may("admin"):
        _within(principals, p.principals, "principals")
        _within(certs, p.certs, "certificates")
    _within(scopes, p.scopes, "scopes")
    ring: KeyRing = request.app.state.keys
    assert ring.signer is not None
    token, exp = ring.signer.mint(p, principals, certs, scopes, raw.get("filter") or None, ttl, time.time())
    return JSONResponse({"token": token, "expiresAt": iso(exp)}, status_code=201)
