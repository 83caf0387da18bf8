"""The models a space may name are bounded and checked by their text (shared/model_specs.py), and
a local model is never loaded (or exported to ONNX) in the thread that asked for it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from services.wiring import SpaceEmbedders, build_store
from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.config import Settings
from shared.model import SpaceInfo
from shared.model_specs import MAX_DIM, ModelSpec, parse_model
from shared.ports import Embedder


def spec(model: str, dim: int | None = None, allowed: tuple[str, ...] = ("all-MiniLM-L6-v2",)) -> ModelSpec:
    return parse_model(model, dim, "hash", 64, allowed)


def test_hash_dimensions_are_bounded_like_dim() -> None:
    assert spec("hash:v1@8") == ModelSpec("hash", "v1", 8)
    assert spec(f"hash:v1@{MAX_DIM}").dim == MAX_DIM
    assert spec("hash:", dim=16).dim == 16 and spec("hash:v1").dim == 64
    for bad in ("hash:v1@50000000", f"hash:v1@{MAX_DIM + 1}", "hash:v1@0", "hash:v1@-3", "hash:v2@8",
                "hash:v1@1e9", "hash:../x@8"):
        with pytest.raises(ValueError):
            spec(bad)
    with pytest.raises(ValueError, match="contradicts"):
        spec("hash:v1@8", dim=16)
    with pytest.raises(ValueError, match="dim must be"):
        spec("hash:", dim=MAX_DIM + 1)


def test_a_local_model_must_be_listed_and_the_refusal_says_nothing_of_the_disk(tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    assert spec("local:all-MiniLM-L6-v2") == ModelSpec("local", "all-MiniLM-L6-v2", None)
    assert spec(f"local:{tmp_path}/exists", allowed=(f"{tmp_path}/exists",)).name == f"{tmp_path}/exists"
    # a space's row keeps `local:<folder name>` (the model id): it names the listed path again
    assert spec("local:exists", allowed=(f"{tmp_path}/exists",)).name == f"{tmp_path}/exists"
    messages = []
    for name in (f"{tmp_path}/exists", f"{tmp_path}/missing", "/etc", "../../root"):
        with pytest.raises(ValueError) as e:
            spec(f"local:{name}")
        messages.append(str(e.value).replace(name[:80], "<name>"))
    assert len(set(messages)) == 1, messages  # the same answer whether the folder exists or not


def test_provider_names_and_kinds_are_bounded() -> None:
    assert spec("openai:text-embedding-3-small").kind == "openai"
    for bad in ("openai:", "openai:a b", "openai:" + "x" * 129, "torch:x", "x" * 201, "hash:v1@8\n"):
        with pytest.raises(ValueError):
            spec(bad)


class SlowModel:
    """Stands in for a local model that takes long to load (an ONNX export)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []

    def __call__(self, s: ModelSpec) -> Embedder:
        self.threads.append(threading.current_thread().name)
        assert self.release.wait(30)
        return HashEmbedder(12)


def test_a_request_never_loads_a_local_model_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(data_dir=tmp_path, embedder="hash", embed_dim=8, local_models=["other-model"])
    store = build_store(settings)
    try:
        embedders = SpaceEmbedders(settings, store, HashEmbedder(8))
        assert embedders.prepare("hash:v1@8") is embedders.default  # the configured model, not a second copy
        slow = SlowModel()
        monkeypatch.setattr(embedders, "_build", slow)
        assert embedders.prepare("local:other-model") is None  # answered at once: loading elsewhere
        assert embedders.prepare("local:other-model") is None  # one load, however often asked
        slow.release.set()
        got = None
        for _ in range(300):
            if (got := embedders.prepare("local:other-model")) is not None:
                break
            threading.Event().wait(0.05)
        assert got is not None and got.dim == 12
        assert slow.threads == ["model-build"]  # built once, on the background thread
        with pytest.raises(ValueError):
            embedders.prepare("local:not-listed")
    finally:
        store.close()


def test_a_read_never_loads_its_tenants_local_model_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another replica's first read of a space whose local model it has not loaded yet answers
    without it (the planner degrades to lexical) while a background thread loads it."""
    settings = Settings(data_dir=tmp_path, embedder="hash", embed_dim=8, local_models=["/models/e5"])
    store = build_store(settings)
    try:
        store.put_tenant_space(SpaceInfo("ta", "core@v2", "local:e5", 12, "active", 1.0, 1.0))
        embedders = SpaceEmbedders(settings, store, HashEmbedder(8))
        slow = SlowModel()
        monkeypatch.setattr(embedders, "_build", slow)
        assert embedders.if_ready("core@v2", "ta") is None
        assert embedders.if_ready("core@v2", "tb") is None  # tb has no such space
        assert embedders.if_ready("core", "ta") is embedders.default
        slow.release.set()
        got = None
        for _ in range(300):
            if (got := embedders.if_ready("core@v2", "ta")) is not None:
                break
            threading.Event().wait(0.05)
        assert got is not None and slow.threads == ["model-build"]
        assert embedders("core@v2", "ta") is got  # a worker gets the same, loaded once
    finally:
        store.close()
