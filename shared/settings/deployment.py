"""Settings of the deployment: which engines serve, where their servers are, where the data lives
and how the process listens."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from shared.settings.keys import ApiKey


class DeploymentSettings(BaseModel):
    """Profile, engines, servers, data dir, bootstrap keys, listening address."""

    profile: Literal["embedded", "distributed"] = Field(default="embedded", description=(
        "Deployment profile: `embedded` (one process, no servers) or `distributed` (PostgreSQL, "
        "Redis/Celery, OpenSearch, Qdrant); sets the defaults of queue, lexical, vectors and store."))
    queue: Literal["embedded", "celery"] | None = Field(default=None, description=(
        "Where embedding jobs run: `embedded` (threads in the serving process) or `celery` (workers "
        "through Redis); unset = the profile's default."))
    lexical: Literal["embedded", "opensearch"] | None = Field(default=None, description=(
        "Keyword (BM25) index: `embedded` (tantivy in the data dir) or `opensearch`; unset = the "
        "profile's default."))
    vectors: Literal["embedded", "qdrant"] | None = Field(default=None, description=(
        "Vector index: `embedded` (qdrant-edge in the data dir) or `qdrant` (a Qdrant server); unset = "
        "the profile's default."))

    data_dir: Path = Field(default=Path("./data"), description=(
        "Directory for the embedded store, indexes, model cache, cold store and generated secrets."))
    api_keys: list[ApiKey] = Field(default_factory=list, description=(
        "Bootstrap API keys, a JSON list of `{\"key\", \"tenant\", \"principals\", \"scopes\"}`; empty = `make "
        "run` creates a local dev key."))

    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description=(
        "Redis URL for the Celery broker, job deduplication and budgets (distributed profile)."))
    opensearch_url: str | None = Field(default=None, description="OpenSearch URL when VIBE_LEXICAL=opensearch.")
    # Every tenant index is `<prefix><tenant>-<hash>` and the template `<prefix>template`: deployments
    # (or test runs) sharing one cluster keep apart by prefix. Lowercase, as index names must be.
    opensearch_prefix: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}-$")] = Field(
        default="vibe-lex-", description=(
        "Prefix of every OpenSearch index and template name, so deployments sharing a cluster stay apart."))
    # `wait_for` costs a write up to one refresh interval (1 s) and keeps segments few under bulk
    # load; `true` makes each write searchable at once, one small segment per write: for
    # deployments (and test runs) with few writes where read-your-write latency matters more.
    opensearch_refresh: Literal["wait_for", "true"] = Field(default="wait_for", description=(
        "How an OpenSearch write becomes searchable before it returns: `wait_for` the next scheduled "
        "refresh (up to 1 s; fewer segments under load) or `true`, a refresh per write."))
    qdrant_url: str | None = Field(default=None, description="Qdrant server URL when VIBE_VECTORS=qdrant.")

    host: str = Field(default="127.0.0.1", description="Address `serve` listens on.")
    port: int = Field(default=8080, description="TCP port `serve` listens on.")
    debug: bool = Field(default=False, description="Verbose (debug-level) logging.")
    access_log: bool = Field(default=True, description=(
        "One JSON line per HTTP request (logger `vibe.access`: method, path, route, status, duration, bytes, "
        "tenant, request id; never a query string, body or key); a stream's line when it ends."))

    # The system of record (documents, sidecar state, vectors by content hash, change log):
    # SQLite in the data dir (one host) or PostgreSQL (API and workers on any host; each API
    # process keeps its embedded indexes in its own data dir). None = the profile's default.
    store: Literal["sqlite", "postgres"] | None = Field(default=None, description=(
        "System of record: `sqlite` (in the data dir, one host) or `postgres`; unset = the profile's "
        "default."))
    # libpq URL or key=value DSN
    postgres_url: str = Field(default="postgresql://vibe:vibe@postgres:5432/vibe", description=(
        "PostgreSQL URL (libpq URL or key=value DSN) when VIBE_STORE=postgres."))
    # connections per process (API threads, or one Celery pool child)
    postgres_pool_size: int = Field(default=10, description="PostgreSQL connections per process.")
