"""Embedder adapters; one is chosen at start-up from Settings, never swapped at call time.

Every embedder is wrapped in the circuit breaker (both profiles), so a failing or hanging
provider costs reads nothing once the circuit opens."""

from __future__ import annotations

from shared.adapters.embedders.breaker import BreakerEmbedder
from shared.config import Settings
from shared.ports import Embedder


def build_embedder(settings: Settings, dim: int | None = None) -> Embedder:
    """`dim`, when known (a worker process learns it once in its parent), spares a remote
    provider the start-up probe call: a pool child must not fail to start because the
    provider is failing right now."""
    return BreakerEmbedder(_build_raw(settings, dim), settings.breaker_failures, settings.breaker_cooldown_seconds)


def _build_raw(settings: Settings, dim: int | None) -> Embedder:
    if settings.embedder == "hash":
        from shared.adapters.embedders.hash_embedder import HashEmbedder

        return HashEmbedder(settings.embed_dim)
    if settings.embedder == "local":
        from shared.adapters.embedders.onnx_embedder import build_local

        return build_local(settings)
    from shared.adapters.embedders.openai_embedder import OpenAIEmbedder

    if not settings.openai_base_url:
        raise RuntimeError("VIBE_EMBEDDER=openai needs VIBE_OPENAI_BASE_URL")
    return OpenAIEmbedder(settings.openai_base_url, settings.openai_api_key, settings.embed_model,
                          settings.embed_batch_size, timeout=settings.embed_timeout_seconds, dim=dim,
                          max_input_bytes=settings.embed_max_input_bytes)
