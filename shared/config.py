"""The one Settings object (DESIGN.md §1: nothing else reads the environment).

Every name in DESIGN.md §5 is here with the `VIBE_` prefix. `profile` sets the defaults of
`queue`, `lexical` and `vectors`; each can still be chosen on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ApiKey(BaseModel):
    """One entry of `VIBE_API_KEYS`."""

    key: str
    tenant: str
    principals: list[str] = Field(default_factory=list)
    scopes: list[Literal["read", "write", "admin"]] = Field(default_factory=lambda: ["read"])  # type: ignore[arg-type]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIBE_", extra="ignore")

    profile: Literal["embedded", "distributed"] = "embedded"
    queue: Literal["embedded", "celery"] | None = None
    lexical: Literal["embedded", "opensearch"] | None = None
    vectors: Literal["embedded", "qdrant"] | None = None

    data_dir: Path = Path("./data")
    api_keys: list[ApiKey] = Field(default_factory=list)

    embedder: Literal["local", "openai", "hash"] = "local"
    embed_model: str = "all-MiniLM-L6-v2"
    embed_dim: int = 384  # used by the hash embedder; real models report their own
    embed_batch_size: int = 32
    openai_base_url: str | None = None
    openai_api_key: str | None = None

    redis_url: str = "redis://127.0.0.1:6379/0"
    opensearch_url: str | None = None
    qdrant_url: str | None = None

    host: str = "127.0.0.1"
    port: int = 8080
    debug: bool = False

    # Read path (DESIGN.md §3, V§4.2, V§4.3 example numbers as defaults).
    space: str = "core"
    lexical_candidates: int = 500
    max_limit: int = 200
    max_k: int = 2000
    per_query_max_embeds: int = 50
    per_tenant_per_min: int = 200
    stream_wait_seconds: float = 15.0
    rrf_k: int = 60

    # Workers.
    workers: int = 2
    job_max_attempts: int = 4
    job_backoff_seconds: float = 0.5

    # Input limits.
    max_doc_bytes: int = 1_048_576
    max_bulk_docs: int = 5_000
    max_bulk_bytes: int = 64 * 1_048_576

    # Eligibility and redaction (V§5, V§9): JSON in the environment.
    index_policy: list[dict[str, Any]] = Field(default_factory=list)
    embed_fields: dict[str, list[str]] = Field(default_factory=dict)

    # --- distributed (issue #3): Celery/Redis, reconciler, breaker ---

    # --- MCP and agent tools (issue #4) ---
    mcp_key: str | None = None  # the key `vibe-semantic mcp` (stdio) acts as
    enable_inner_voice: bool = False

    @model_validator(mode="after")
    def _profile_defaults(self) -> Settings:
        distributed = self.profile == "distributed"
        if self.queue is None:
            self.queue = "celery" if distributed else "embedded"
        if self.lexical is None:
            self.lexical = "opensearch" if distributed else "embedded"
        if self.vectors is None:
            self.vectors = "qdrant" if distributed else "embedded"
        return self

    def keys_json(self) -> str:
        return json.dumps([k.model_dump() for k in self.api_keys])
