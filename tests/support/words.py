"""A deterministic bag-of-words embedder (a stand-in for the model in unit tests): each word
adds one to the dimension its crc32 picks, then the vector is normalised. Enough for a semantic
leg to rank real hits by shared words."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence


class WordEmbedder:
    model_id = "words-32"
    dim = 32

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [words_vector(t, self.dim) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return words_vector(text, self.dim)


def words_vector(text: str, dim: int = 32) -> list[float]:
    v = [0.0] * dim
    for w in text.lower().split():
        v[zlib.crc32(w.encode()) % dim] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]
