"""Times as the API writes them."""

from __future__ import annotations

import time


def iso(ts: float | None) -> str | None:
    """A store time as the API writes it (UTC, seconds); 0 or None: unknown."""
    if not ts:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
