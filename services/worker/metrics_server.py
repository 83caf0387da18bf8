"""Prometheus metrics for a Celery worker and its prefork children.

Each child counts its own jobs; prometheus_client's multiprocess mode has every process write
its values to files in one directory, and the parent's HTTP endpoint sums them. The mode is
chosen when prometheus_client is *imported*, so `prepare()` must run before anything imports
it (the CLI calls it first thing in `vibe-semantic worker`). The directory is private to the
worker process and created fresh, so a restarted worker never adds up a dead one's files.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from shared.config import Settings

ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own switch, read at its import


def prepare(settings: Settings) -> Path | None:
    if settings.metrics_port is None:
        return None
    if "prometheus_client" in sys.modules:
        raise RuntimeError("worker metrics must be prepared before prometheus_client is imported")
    path = Path(tempfile.mkdtemp(prefix="vibe-worker-metrics-"))
    os.environ[ENV] = str(path)
    return path


def serve(port: int, path: Path) -> None:
    """Start the /metrics endpoint in the parent, before the pool forks (threads do not
    survive a fork, so the children never run a second server)."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(path))
    start_http_server(port, registry=registry)


def child_exited(pid: int) -> None:
    """Drop a dead child's live gauges (its counters stay: they are history)."""
    from prometheus_client import multiprocess

    if os.environ.get(ENV):
        multiprocess.mark_process_dead(pid)
