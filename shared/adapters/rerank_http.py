"""A reranker behind any Cohere- or TEI-compatible `/rerank` endpoint, as SurfSense-compatible retrieval reranks.

Protocols (both answer one score per passage, by index):
- `cohere`: POST {"model", "query", "documents": [...], "top_n"} → {"results": [{"index",
  "relevance_score"}, ...]} (Cohere, Jina, Voyage, vLLM and llama.cpp servers speak it);
- `tei`: POST {"query", "texts": [...], "raw_scores": false} → [{"index", "score"}, ...]
  (Hugging Face text-embeddings-inference).
The reply format is recognised by its shape, so a server answering the other one still works.

Failures (connection, timeout, non-2xx, a malformed reply, a missing or repeated index) raise
RerankError; the caller keeps its fused order. Passage text is sent to the endpoint the
operator configured and never logged.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from shared.agent_ports import RerankError

MAX_ERROR_CHARS = 200


class HttpReranker:
    def __init__(self, url: str, model: str | None = None, protocol: str = "cohere", api_key: str | None = None,
                 timeout: float = 10.0, client: httpx.Client | None = None):
        if protocol not in ("cohere", "tei"):
            raise ValueError("rerank protocol must be 'cohere' or 'tei'")
        self.url = url
        self.model = model
        self.protocol = protocol
        self.model_id = f"rerank:{model or url}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=timeout, headers=headers)

    def _request(self, query: str, passages: list[str]) -> dict[str, Any]:
        if self.protocol == "tei":
            return {"query": query, "texts": passages, "raw_scores": False, "truncate": True}
        body: dict[str, Any] = {"query": query, "documents": passages, "top_n": len(passages)}
        if self.model:
            body["model"] = self.model
        return body

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        try:
            r = self._client.post(self.url, json=self._request(query, passages))
        except httpx.HTTPError as e:
            raise RerankError(f"reranker unreachable: {type(e).__name__}") from e
        if r.status_code // 100 != 2:
            raise RerankError(f"reranker answered HTTP {r.status_code}")
        try:
            return scores(r.json(), len(passages))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            raise RerankError(f"reranker reply not understood: {str(e)[:MAX_ERROR_CHARS]}") from e

    def close(self) -> None:
        self._client.close()


def scores(reply: Any, n: int) -> list[float]:
    """One score per passage from a Cohere (`results` / `relevance_score`) or TEI (a list of
    `score`) reply; every index in 0..n-1 exactly once, each score a finite number."""
    rows = reply.get("results") if isinstance(reply, dict) else reply
    if not isinstance(rows, list):
        raise ValueError("expected a list of results")
    out: list[float | None] = [None] * n
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("a result is not an object")
        idx, score = row.get("index"), row.get("relevance_score", row.get("score"))
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n or out[idx] is not None:
            raise ValueError("a result has a missing, out-of-range or repeated index")
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise ValueError("a result has no finite score")
        out[idx] = float(score)
    if any(s is None for s in out):
        raise ValueError("the reply scored fewer passages than were sent")
    return [float(s) for s in out if s is not None]
