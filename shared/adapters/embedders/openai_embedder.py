"""Any OpenAI-compatible `/v1/embeddings` endpoint through the `openai` client.

Retries are the job layer's business (`max_retries=0` here), so a 429 reaches it with the
provider's Retry-After. The dimension is learned once at start-up; a response of another
dimension is refused, never compared (dim safety).

Inputs longer than `max_input_bytes` (VIBE_EMBED_MAX_INPUT_BYTES) UTF-8 bytes are cut at a
character boundary before they are sent: the provider refuses an over-long input with a 4xx,
which would fail the whole batch (other tenants' documents in it) for good. A byte-level BPE
token covers at least one byte, so the default 8,000 bytes stay under OpenAI's 8,191-token limit.
A 4xx other than 429 (and 408) is not transient: the same input would be refused again."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai

from shared.costs import report_billed
from shared.ports import EmbedderError


def _retry_after(e: openai.APIStatusError) -> float | None:
    raw = e.response.headers.get("retry-after") if e.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes, never inside a character."""
    if len(text) * 4 <= max_bytes:  # cannot be over: skip the encode
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


class OpenAIEmbedder:
    def __init__(self, base_url: str, api_key: str | None, model: str, batch_size: int = 64,
                 timeout: float = 30.0, dim: int | None = None, max_input_bytes: int = 8_000):
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=0,
                                     timeout=timeout)
        self._model = model
        self.batch_size = batch_size
        self.max_input_bytes = max_input_bytes
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
        usage = getattr(resp, "usage", None)
        if usage is not None and isinstance(getattr(usage, "total_tokens", None), int):
            report_billed(usage.total_tokens)  # what the cap and usage count (shared/costs.py)
        data = sorted(resp.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise EmbedderError(f"provider returned {len(data)} vectors for {len(texts)} inputs")
        return [_unit(d.embedding) for d in data]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            vecs = self._call([truncate_utf8(t, self.max_input_bytes) or " " for t in texts[i : i + self.batch_size]])
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
