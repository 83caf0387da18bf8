"""A small local HTTP server speaking the OpenAI embeddings protocol: the one stand-in we
allow, for an outside embedding API. Deterministic vectors (the hash embedder), counters, and
failure modes a test can switch on."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.adapters.embedders.hash_embedder import HashEmbedder


class OpenAIProtocolServer:
    def __init__(self, dim: int = 64):
        self.embedder = HashEmbedder(dim)
        self.requests = 0
        self.inputs = 0
        self.texts: list[str] = []  # every input embedded, in arrival order
        self._failures: list[tuple[int, float | None]] = []
        self._hang = 0.0
        # `usage.total_tokens` of an answer: one token per 4 UTF-8 bytes of each input (a byte-level
        # BPE's floor is one per byte; English averages about four), or what a test sets per input
        self.tokens_of: Callable[[str], int] = lambda t: max(1, -(-len(t.encode("utf-8", "surrogatepass")) // 4))
        self.billed = 0  # tokens reported in all answers
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> OpenAIProtocolServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def fail_next(self, n: int, status: int = 500, retry_after: float | None = None) -> None:
        with self._lock:
            self._failures += [(status, retry_after)] * n

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
        self._hang = 0.0

    def hang(self, seconds: float) -> None:
        self._hang = seconds

    def set_dim(self, dim: int) -> None:
        self.embedder = HashEmbedder(dim)

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.requests += 1
            failure = self._failures.pop(0) if self._failures else None
        if self._hang:
            time.sleep(self._hang)
        if failure is not None:
            status, retry_after = failure
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            return status, {"error": {"message": "injected failure", "type": "server_error"}}, headers
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with self._lock:
            self.inputs += len(texts)
            self.texts += texts
        data = [{"object": "embedding", "index": i, "embedding": v}
                for i, v in reversed(list(enumerate(self.embedder.embed(texts))))]  # any order is legal
        tokens = sum(self.tokens_of(t) for t in texts)
        with self._lock:
            self.billed += tokens
        return 200, {"object": "list", "data": data, "model": body.get("model"),
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                status, payload, headers = outer._answer(body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
