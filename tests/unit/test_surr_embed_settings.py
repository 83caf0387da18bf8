"""SURR_EMBED_PROVIDER / SURR_EMBED_MODEL / SURR_EMBED_DIM configure the embedder as inner_voice's
clients write them; the VIBE_* names win when both are set; a dimension the model contradicts
stops the service at start-up."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.wiring import check_declared_dim
from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.config import Settings

NAMES = ("VIBE_EMBEDDER", "VIBE_EMBED_MODEL", "VIBE_EMBED_DIM", "SURR_EMBED_PROVIDER", "SURR_EMBED_MODEL",
         "SURR_EMBED_DIM")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)


def test_surr_names_configure_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_EMBED_PROVIDER", "OpenAI")
    monkeypatch.setenv("SURR_EMBED_MODEL", "my-embed")
    monkeypatch.setenv("SURR_EMBED_DIM", "48")
    s = Settings()
    assert (s.embedder, s.embed_model, s.embed_dim, s.declared_embed_dim()) == ("openai", "my-embed", 48, 48)


def test_vibe_names_win_when_both_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_EMBED_PROVIDER", "openai")
    monkeypatch.setenv("SURR_EMBED_MODEL", "surr-model")
    monkeypatch.setenv("SURR_EMBED_DIM", "48")
    monkeypatch.setenv("VIBE_EMBEDDER", "hash")
    monkeypatch.setenv("VIBE_EMBED_MODEL", "vibe-model")
    monkeypatch.setenv("VIBE_EMBED_DIM", "64")
    s = Settings()
    assert (s.embedder, s.embed_model, s.embed_dim) == ("hash", "vibe-model", 64)


def test_unset_surr_names_change_nothing() -> None:
    s = Settings()
    assert (s.embedder, s.embed_model, s.declared_embed_dim()) == ("local", "all-MiniLM-L6-v2", None)
    assert s.embed_dim == Settings.model_fields["embed_dim"].default


def test_an_unknown_provider_is_a_startup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_EMBED_PROVIDER", "cohere")
    with pytest.raises(ValidationError, match="SURR_EMBED_PROVIDER 'cohere' is not one of"):
        Settings()


@pytest.mark.parametrize("model, dim", [("text-embedding-3-small", 768), ("all-MiniLM-L6-v2", 1536)])
def test_a_dimension_a_known_model_contradicts_is_a_startup_error(monkeypatch: pytest.MonkeyPatch, model: str,
                                                                   dim: int) -> None:
    monkeypatch.setenv("SURR_EMBED_MODEL", model)
    monkeypatch.setenv("SURR_EMBED_DIM", str(dim))
    with pytest.raises(ValidationError, match=f"SURR_EMBED_DIM={dim} disagrees with the model"):
        Settings()


def test_a_matching_known_dimension_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_EMBED_PROVIDER", "openai")
    monkeypatch.setenv("SURR_EMBED_MODEL", "text-embedding-3-small")
    monkeypatch.setenv("SURR_EMBED_DIM", "1536")
    assert Settings().declared_embed_dim() == 1536


def test_the_loaded_model_is_checked_against_the_declared_dimension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURR_EMBED_PROVIDER", "hash")
    monkeypatch.setenv("SURR_EMBED_DIM", "32")
    monkeypatch.setenv("VIBE_EMBED_DIM", "64")  # VIBE wins for the hash embedder's size...
    s = Settings()
    check_declared_dim(s, HashEmbedder(32))
    with pytest.raises(RuntimeError, match="SURR_EMBED_DIM=32 but the model .* makes vectors of 64"):
        check_declared_dim(s, HashEmbedder(s.embed_dim))  # ...and the process refuses to start with it
