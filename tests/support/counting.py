"""The real hash embedder, counting what it is asked to embed: tests that prove a path makes no
provider call (rehydration, retired spaces) or how many inputs it sent."""

from __future__ import annotations

from collections.abc import Sequence

from shared.adapters.embedders.hash_embedder import HashEmbedder


class CountingEmbedder(HashEmbedder):
    def __init__(self, dim: int = 64):
        super().__init__(dim)
        self.calls: list[int] = []  # texts per call

    @property
    def inputs(self) -> int:
        return sum(self.calls)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return super().embed(texts)
