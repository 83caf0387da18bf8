"""Fixtures shared by the SDK tests (Python and TypeScript) against the real served app.

`server` (tests/conftest.py) serves one app per module with the keys of harness/server.py.
"""

from __future__ import annotations

import pytest

from harness.server import KEYS, Served

ADMIN, ALICE, BOB, OTHER_ADMIN = (str(k["key"]) for k in KEYS)  # ta admin, ta writer, ta reader, tb admin


@pytest.fixture(scope="module")
def base_url(server: Served) -> str:
    """The served app's base URL (http://127.0.0.1:<port>)."""
    return server.base
