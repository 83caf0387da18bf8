"""Read a process's /metrics as a test does: `name{labels}` → value."""

from __future__ import annotations

import httpx


def series(text: str) -> dict[str, float]:
    """`name{labels}` → value, from the Prometheus text format."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def scrape(port: int) -> dict[str, float]:
    """The series a process on 127.0.0.1:`port` serves at /metrics."""
    return series(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
