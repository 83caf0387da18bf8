"""One bootstrap API key, as `VIBE_API_KEYS` lists it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ApiKey(BaseModel):
    """One entry of `VIBE_API_KEYS`."""

    key: str
    tenant: str
    principals: list[str] = Field(default_factory=list)
    scopes: list[Literal["read", "write", "admin"]] = Field(default_factory=lambda: ["read"])  # type: ignore[arg-type]
    certs: list[str] = Field(default_factory=list)  # certificates the key holds ("issuer:name")
