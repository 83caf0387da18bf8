"""Serve the real app with uvicorn on a free port, in a subprocess, as a user would run it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from harness.openapi_responses import OpenApiResponses

REPO = Path(__file__).resolve().parents[1]

KEYS = [
    {"key": "k-admin-a", "tenant": "ta", "principals": ["user:admin"], "scopes": ["read", "write", "admin"]},
    {"key": "k-alice", "tenant": "ta", "principals": ["user:alice", "group:eng"], "scopes": ["read", "write"]},
    {"key": "k-bob", "tenant": "ta", "principals": ["user:bob", "group:sales"], "scopes": ["read"]},
    {"key": "k-admin-b", "tenant": "tb", "principals": ["user:carol"], "scopes": ["read", "write", "admin"]},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def end_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace: float = 10) -> None:
    """Ask a server process to exit with `sig`; kill it if it has not within `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Served:
    """A running `vibe-semantic serve` and an HTTP client for it.

    Every JSON answer the client receives, and every SSE event `stream` reads, is checked
    against the server's own /openapi.json (harness/openapi_responses.py): a mismatch
    fails the call. `validate=False` only for a test that reads answers of a server on purpose
    outside its contract (none today). `touch`: TouchPolicy fields the server's reads use instead
    of the policy's defaults (not settings: harness/tuned.py sets them in code)."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, keys: list[dict[str, Any]] | None = None,
                 validate: bool = True, repo: Path = REPO, port: int | None = None,
                 touch: dict[str, Any] | None = None):
        self.port = port or free_port()  # a fixed port: a restarted replica keeps its address
        self.base = f"http://127.0.0.1:{self.port}"
        self.contract = OpenApiResponses(self.base)
        self.validate = validate
        self.data_dir = data_dir
        full = dict(os.environ)
        full.update({
            "VIBE_PROFILE": "embedded", "VIBE_DATA_DIR": str(data_dir), "VIBE_EMBEDDER": "hash",
            "VIBE_API_KEYS": json.dumps(KEYS if keys is None else keys), "VIBE_HOST": "127.0.0.1",
            "VIBE_PORT": str(self.port), "HF_HUB_OFFLINE": "1",
        })
        full.update(env or {})
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self._log = self.log_path.open("w")
        cli = ["-m", "harness.tuned", json.dumps(touch)] if touch else ["-m", "services.cli"]
        self.proc = subprocess.Popen([sys.executable, *cli, "serve"], cwd=repo, env=full,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.client = httpx.Client(base_url=self.base, timeout=60)
        self._wait_healthy()
        if validate:
            self.client.event_hooks["response"].append(self.contract.check)

    def _wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if self.client.get("/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("server not healthy: " + self.log()[-2000:])

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.client.close()
        self._log.close()

    # -- calls -------------------------------------------------------------------------

    def call(self, method: str, path: str, key: str | None, body: Any = None, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        headers.update(kw.pop("headers", {}))
        if body is not None:
            kw["json"] = body
        return self.client.request(method, path, headers=headers, **kw)

    def put(self, key: str, collection: str, doc_id: str, doc: dict[str, Any]) -> httpx.Response:
        return self.call("PUT", f"/v1/collections/{collection}/docs/{doc_id}", key, doc)

    def bulk(self, key: str, collection: str, docs: list[dict[str, Any]]) -> httpx.Response:
        return self.call("POST", f"/v1/collections/{collection}/docs:bulk", key, {"docs": docs})

    def read(self, key: str, **body: Any) -> httpx.Response:
        return self.call("POST", "/v1/read", key, body, headers={"Accept": "application/json"})

    def stream(self, key: str, timeout: float = 60, **body: Any) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        with connect_sse(self.client, "POST", "/v1/read", json=body, headers=headers, timeout=timeout) as es:
            assert es.response.status_code == 200, es.response.read()
            for sse in es.iter_sse():
                data = json.loads(sse.data)
                if self.validate:
                    self.contract.check_event(sse.event, data)
                events.append((sse.event, data))
                if sse.event in ("done", "error"):
                    break
        return events

    def status(self, key: str, collection: str, doc_id: str) -> str | None:
        r = self.call("GET", f"/v1/collections/{collection}/docs/{doc_id}?include=semantic", key)
        return r.json().get("__semantic", {}).get("status") if r.status_code == 200 else None

    def wait_status(self, key: str, collection: str, doc_id: str, want: str, timeout: float = 60) -> str | None:
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            got = self.status(key, collection, doc_id)
            if got == want:
                return got
            time.sleep(0.1)
        return got


def ids(results: list[dict[str, Any]] | None) -> list[str]:
    return [str(r["id"]) for r in results or []]


@contextlib.contextmanager
def served(data_dir: Path, **kw: Any) -> Iterator[Served]:
    s = Served(data_dir, **kw)
    try:
        yield s
    finally:
        s.stop()
