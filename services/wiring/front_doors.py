"""The front doors the CLI starts: the served app (HTTP API with MCP at /mcp), the Celery worker
and beat with their per-process runtime, and MCP over stdio."""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.container import Container
from services.core.keyring import KeyRing
from services.wiring.embedders import build_handler
from services.wiring.lifecycle import build_lifecycle
from services.wiring.root import build
from services.wiring.stores import build_budget, build_store
from shared.config import Settings

if TYPE_CHECKING:
    from celery import Celery
    from fastapi import FastAPI

    from services.worker.tasks import Runtime


def create_app(container: Container, keys: KeyRing) -> FastAPI:
    """The served app: the HTTP API, with MCP's streamable HTTP endpoint at /mcp."""
    from services.api.app import create_app as http_api
    from services.mcp.http import McpHttp

    return http_api(container, keys, mcp=lambda: McpHttp(container, keys))


def build_worker_runtime(settings: Settings, app: Celery | None = None, dim: int | None = None) -> Runtime:
    """A Celery worker process's parts, built after the fork (SQLite connections and HTTP
    clients must not cross one): the same handler and lifecycle as the embedded runner's."""
    from services.worker.tasks import PostponingEmbedder, Runtime
    from shared.adapters.celery_queue import CeleryQueue
    from shared.adapters.embedders import build_embedder

    store = build_store(settings)
    # The circuit must open before a provider outage runs any job out of attempts: once it is
    # open, batches are postponed (not charged), so an outage never turns documents `failed`.
    trip = min(settings.breaker_failures, settings.job_max_attempts)
    emb = build_embedder(settings.model_copy(update={"breaker_failures": trip}), dim)
    handler = build_handler(settings, store, PostponingEmbedder(emb), wrap=PostponingEmbedder)
    queue = CeleryQueue.from_settings(settings, app)
    lifecycle = build_lifecycle(settings, store, queue, build_budget(settings), handler.policy, cold=handler.cold)
    return Runtime(settings, store, handler, queue, lifecycle)


def run_worker(settings: Settings, concurrency: int | None) -> None:
    """`vibe-semantic worker`: a Celery worker whose processes build their runtime here."""
    from services.worker.celery_app import run_worker as celery_worker

    celery_worker(settings, concurrency, build_worker_runtime)


def run_scheduler(settings: Settings) -> None:
    """`vibe-semantic scheduler`: Celery beat."""
    from services.worker.celery_app import run_scheduler as celery_beat

    celery_beat(settings, build_worker_runtime)


def run_mcp_stdio(settings: Settings) -> None:
    """`vibe-semantic mcp`: the tools over stdio, on a container built here."""
    from services.mcp.server import run_stdio

    run_stdio(settings, build)
