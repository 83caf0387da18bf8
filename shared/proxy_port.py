"""Port: a free, local semantic stand-in for documents that have no vector yet (issue 11).

The touch policy (services/planner/touch.py) uses it to choose which cold candidates to embed
first: those most likely to enter the fused first page. It never calls a provider."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class SemanticProxy(Protocol):
    @property
    def dim(self) -> int: ...

    def vectors(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> NDArray[np.float32]:
        """One unit-length row per text (a zero row for a text with no known token). `keys`
        (e.g. content hashes) let the adapter cache rows; the same key must mean the same text."""
        ...
