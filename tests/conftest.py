from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import Served, served


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One served instance (hash embedder) per test module."""
    with served(Path(tmp_path_factory.mktemp("srv")) / "data") as s:
        yield s
