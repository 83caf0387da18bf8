"""Text to vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Text → vectors. Chosen at start-up; never swapped at call time."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in one batch; raises EmbedderError on provider failure."""

    def embed_query(self, text: str) -> list[float]: ...


class EmbedderError(Exception):
    """The provider failed. `retry_after` is set when the provider asked us to wait."""

    def __init__(self, message: str, retry_after: float | None = None, transient: bool = True):
        super().__init__(message)
        self.retry_after = retry_after
        self.transient = transient
