"""Any OpenAI-compatible `/v1/embeddings` endpoint through the `openai` client.

Retries are the job layer's business (`max_retries=0` here), so a 429 reaches it with the
provider's Retry-After. The dimension is learned once at start-up; a response of another
dimension is refused, never compared (seed 000 "dim safety")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai

from shared.ports import EmbedderError


def _retry_after(e: openai.APIStatusError) -> float | None:
    raw = e.response.headers.get("retry-after") if e.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


class OpenAIEmbedder:
    def __init__(self, base_url: str, api_key: str | None, model: str, batch_size: int = 64,
                 timeout: float = 30.0, dim: int | None = None):
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=0,
                                     timeout=timeout)
        self._model = model
        self.batch_size = batch_size
        self._dim = dim or len(self._call(["dimension probe"])[0])

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def _call(self, texts: list[str]) -> list[list[float]]:
        try:
            resp = self._client.embeddings.create(model=self._model, input=texts)
        except openai.RateLimitError as e:
            raise EmbedderError("provider rate limit (429)", retry_after=_retry_after(e)) from e
        except openai.APIStatusError as e:
            transient = e.status_code >= 500 or e.status_code == 408
            raise EmbedderError(f"provider answered {e.status_code}", _retry_after(e), transient) from e
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            raise EmbedderError(f"provider unreachable: {type(e).__name__}") from e
        data = sorted(resp.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise EmbedderError(f"provider returned {len(data)} vectors for {len(texts)} inputs")
        return [_unit(d.embedding) for d in data]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            vecs = self._call([t or " " for t in texts[i : i + self.batch_size]])
            if any(len(v) != self._dim for v in vecs):
                raise EmbedderError(f"dimension mismatch: expected {self._dim}", transient=False)
            out += vecs
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def _unit(vec: Sequence[float]) -> list[float]:
    v = np.asarray(vec, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return (v / n).tolist() if n else v.tolist()
