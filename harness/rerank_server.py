"""A small local HTTP server speaking the Cohere and TEI `/rerank` protocols: the stand-in for
an outside reranker (a cross-encoder service). Scores are deterministic and easy to predict:
the share of the query's words a passage contains, plus a bonus for passages containing a
`boost` word a test picks (so a test can make the reranker disagree with the fused order).
Records what it was sent; failures can be switched on."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"\w+")


def overlap(query: str, passage: str) -> float:
    q = set(_WORD.findall(query.lower()))
    p = set(_WORD.findall(passage.lower()))
    return len(q & p) / len(q) if q else 0.0


class RerankServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.boost: str | None = None
        self.fail_status: int | None = None
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/rerank"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> RerankServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def score(self, query: str, passage: str) -> float:
        bonus = 1.0 if self.boost and self.boost.lower() in passage.lower() else 0.0
        return round(overlap(query, passage) + bonus, 6)

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(body)
        if self.fail_status is not None:
            return self.fail_status, {"error": "injected failure"}
        query = body.get("query")
        if "texts" in body:  # TEI
            texts = body["texts"]
            if not isinstance(query, str) or not isinstance(texts, list):
                return 422, {"error": "query and texts are required"}
            rows = [{"index": i, "score": self.score(query, t)} for i, t in enumerate(texts)]
            return 200, sorted(rows, key=lambda r: -r["score"])
        docs = body.get("documents")
        if not isinstance(query, str) or not isinstance(docs, list):
            return 400, {"message": "query and documents are required"}
        texts = [d["text"] if isinstance(d, dict) else d for d in docs]
        rows = [{"index": i, "relevance_score": self.score(query, t)} for i, t in enumerate(texts)]
        rows.sort(key=lambda r: -r["relevance_score"])
        top_n = body.get("top_n")
        return 200, {"id": "local", "results": rows[:top_n] if isinstance(top_n, int) else rows}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    status, reply = server.answer(json.loads(raw))
                except (ValueError, KeyError, TypeError):
                    status, reply = 400, {"message": "bad request"}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
