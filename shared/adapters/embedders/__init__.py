"""Embedder adapters; one is chosen at start-up from Settings, never swapped at call time."""

from __future__ import annotations

from shared.config import Settings
from shared.ports import Embedder


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "hash":
        from shared.adapters.embedders.hash_embedder import HashEmbedder

        return HashEmbedder(settings.embed_dim)
    if settings.embedder == "local":
        from shared.adapters.embedders.local_embedder import LocalEmbedder

        return LocalEmbedder(settings.embed_model, settings.embed_batch_size)
    from shared.adapters.embedders.openai_embedder import OpenAIEmbedder

    if not settings.openai_base_url:
        raise RuntimeError("VIBE_EMBEDDER=openai needs VIBE_OPENAI_BASE_URL")
    return OpenAIEmbedder(settings.openai_base_url, settings.openai_api_key, settings.embed_model,
                          settings.embed_batch_size)
