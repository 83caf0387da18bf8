"""Prometheus metrics for a Celery worker and its prefork children.

Each child counts its own jobs; prometheus_client's multiprocess mode has every process write
its values to files in one directory, and the parent's HTTP endpoint sums them
(`MultiProcessCollector`; how each Gauge combines is its `multiprocess_mode` in
shared/metrics.py). The mode is chosen when prometheus_client is *imported*, so `prepare()`
must run before anything imports it (the CLI calls it first thing in `vibe-semantic worker`).
The directory is private to this worker and created fresh, so a restarted worker never adds up
a dead one's files; it is removed when the worker exits.

The API process never calls `prepare()`: it stays in prometheus_client's ordinary
single-process mode.
"""

from __future__ import annotations

import atexit
import hmac
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

from shared.config import Settings

# prometheus_client's own switch, read once when it is imported.
ENV = "PROMETHEUS_MULTIPROC_DIR"

_dir: Path | None = None  # set by prepare(); inherited by the pool children through fork


def prepare(settings: Settings) -> Path | None:
    """Switch prometheus_client to multiprocess mode for this worker, if metrics are on.

    Settings is the only reader of the environment; this is the one write to it, because
    PROMETHEUS_MULTIPROC_DIR is how prometheus_client itself learns the mode: it reads the
    variable once at import and then keeps every metric value in per-process files there. It
    must be in os.environ before the first import of prometheus_client (shared.metrics creates
    the metrics at import), and the forked pool children inherit both the variable and the
    already-chosen mode."""
    global _dir
    if settings.metrics_port is None:
        return None
    if "prometheus_client" in sys.modules:
        raise RuntimeError("worker metrics must be prepared before prometheus_client is imported")
    _dir = Path(tempfile.mkdtemp(prefix="vibe-worker-metrics-"))
    os.environ[ENV] = str(_dir)
    atexit.register(_remove, _dir, os.getpid())
    return _dir


def _remove(path: Path, owner: int) -> None:
    # atexit handlers are inherited by forked children; only the worker that made it removes it.
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


def enabled() -> bool:
    return _dir is not None


def serve(port: int, token: str | None = None, addr: str = "0.0.0.0") -> WSGIServer:
    """Start the /metrics endpoint in the parent, before the pool forks (threads do not
    survive a fork, so the children never run a second server). With `token`
    (VIBE_METRICS_TOKEN) only `Authorization: Bearer <token>` is answered, as the API's
    /metrics does: the worker's port carries the same figures."""
    from prometheus_client import CollectorRegistry, make_wsgi_app

    from services.worker.metrics_collector import WorkerCollector

    assert _dir is not None, "prepare() first"
    registry = CollectorRegistry()
    registry.register(WorkerCollector(_dir))
    httpd = make_server(addr, port, guarded(make_wsgi_app(registry), token), _ThreadingServer, _QuietHandler)
    threading.Thread(target=httpd.serve_forever, name="vibe-worker-metrics", daemon=True).start()
    return httpd


_UNAUTHORIZED = json.dumps({"error": {
    "code": "unauthorized", "message": "metrics need the metrics token (Authorization: Bearer ...)"}}).encode()


def guarded(app: WSGIApplication, token: str | None) -> WSGIApplication:
    """`app` behind the metrics token (None or empty: open, as before)."""
    if not token:
        return app
    want = token.encode()

    def check(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        scheme, _, given = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), want):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "application/json"),
                                            ("Content-Length", str(len(_UNAUTHORIZED))),
                                            ("WWW-Authenticate", "Bearer")])
        return [_UNAUTHORIZED]

    return check


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Scrapes are not worth a log line each."""


def process_gone(pid: int) -> None:
    """Drop a process's live gauges (`live*` multiprocess modes); its counters and histograms
    stay: they are history, and the worker's totals must not go down when a child is replaced."""
    from prometheus_client import multiprocess

    if _dir is not None:
        multiprocess.mark_process_dead(pid, path=str(_dir))
