"""Settings of access: CORS, metrics auth, per-tenant request rates, API keys and end-user tokens."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode


class AccessSettings(BaseModel):
    """Who may call, and how much."""

    # Browser origins allowed to call the API (CORS): a JSON list or a comma-separated list;
    # empty (the default) sends no CORS headers at all.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list, description=(
        "Browser origins allowed to call the API (CORS): a JSON list or comma-separated origins; empty = "
        "no CORS headers."))

    # GET /metrics asks for `Authorization: Bearer <token>` when set (off by default).
    metrics_token: str | None = Field(default=None, description=(
        "When set, `/metrics` and the worker's metrics port ask for `Authorization: Bearer <token>`."))
    # Per-tenant request rate (token bucket in the API process; 0 = no limit) and its burst.
    per_tenant_requests_per_second: Annotated[float, Field(ge=0)] = Field(default=200.0, description=(
        "Request tokens per second per tenant (0 = no limit); excess requests answer 429."))
    per_tenant_request_burst: Annotated[int, Field(ge=1)] = Field(default=400, description=(
        "Burst size of the per-tenant request bucket."))
    # What a request costs in that bucket (services/api/ratelimit.py `RequestCost`): one token
    # per this many body bytes (at least 1; at the default rate a tenant's bulks get about
    # 3 MB/s, more in a burst: a bench's one-stream upload of 500-byte documents is not refused),
    # plus (limit + k) / this for POST /v1/read, plus a fixed cost for admin actions that start
    # a backfill. Never more than the burst at once; charged into debt (ratelimit.py).
    rate_cost_body_bytes: Annotated[int, Field(ge=1)] = Field(default=16_384, description=(
        "A request costs one rate-limit token per this many body bytes (at least one)."))
    rate_cost_read_candidates: Annotated[int, Field(ge=1)] = Field(default=100, description=(
        "A read also costs (limit + k) / this many tokens."))
    rate_cost_backfill: Annotated[float, Field(ge=0)] = Field(default=50.0, description=(
        "Tokens an admin action that starts a backfill costs (promote, reindex, spaces)."))
    # Requests of one tenant running at once in this process (until the answer's head is sent),
    # so one tenant cannot hold every thread of the event loop's pool (40); the others wait in
    # the event loop, off the pool. 0 = no cap.
    per_tenant_max_inflight: Annotated[int, Field(ge=0)] = Field(default=8, description=(
        "Requests of one tenant running at once in a process; others wait (0 = no cap)."))

    # Keys and end-user tokens (POST /v1/keys, POST /v1/tokens; docs/keys-and-tokens.md).
    # HS256 secret that signs end-user tokens. None: embedded, a random one kept in
    # DATA_DIR/token-secret (mode 0600); distributed, `serve` refuses to start (replicas must share it).
    token_secret: str | None = Field(default=None, repr=False, min_length=32, description=(
        "HS256 secret (32+ characters) that signs end-user tokens; unset = kept in DATA_DIR/token-secret "
        "(embedded), required when distributed."))
    # a token's life when `ttlSeconds` is not given
    token_ttl_seconds: Annotated[int, Field(ge=1)] = Field(default=3600, description=(
        "Life of an end-user token when `ttlSeconds` is not given."))
    # the longest `ttlSeconds` accepted
    token_max_ttl_seconds: Annotated[int, Field(ge=1, le=86_400)] = Field(default=86_400, description=(
        "Longest `ttlSeconds` a token may ask for."))
    # API-made keys (bootstrap keys not counted)
    max_keys_per_tenant: Annotated[int, Field(ge=1)] = Field(default=1000, description=(
        "API-made keys per tenant (bootstrap keys not counted)."))
    # How often an API process asks the store whether keys changed (a revocation reaches it within this)
    key_refresh_seconds: Annotated[float, Field(gt=0, le=1)] = Field(default=0.5, description=(
        "How often an API process checks for key changes (a revocation reaches it within this)."))

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, raw: Any) -> Any:
        """VIBE_CORS_ORIGINS: `["https://a.example", ...]` or `https://a.example,https://b.example`."""
        if not isinstance(raw, str):
            return raw
        text = raw.strip()
        if text.startswith("["):
            value = json.loads(text)
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ValueError("VIBE_CORS_ORIGINS must be a JSON list of origins or a comma-separated list")
            return [v.strip() for v in value if v.strip()]
        return [p.strip() for p in text.split(",") if p.strip()]
