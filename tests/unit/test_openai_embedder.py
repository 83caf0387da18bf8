from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from harness.openai_server import OpenAIProtocolServer
from shared.adapters.embedders.breaker import BreakerEmbedder
from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.adapters.embedders.openai_embedder import OpenAIEmbedder, truncate_utf8
from shared.ports import EmbedderError


@pytest.fixture
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


def test_vectors_in_input_order_and_batched(api: OpenAIProtocolServer) -> None:
    emb = OpenAIEmbedder(api.base_url, "k", "m", batch_size=2)
    assert emb.dim == 32 and emb.model_id == "openai:m"
    texts = ["alpha wing", "beta rotor", "gamma hull"]
    got = emb.embed(texts)
    want = HashEmbedder(32).embed(texts)
    assert np.allclose(got, want, atol=1e-6)
    assert api.requests == 1 + 2  # the start-up dimension probe, then two batches


def test_429_carries_retry_after(api: OpenAIProtocolServer) -> None:
    emb = OpenAIEmbedder(api.base_url, "k", "m")
    api.fail_next(1, status=429, retry_after=2.5)
    with pytest.raises(EmbedderError) as err:
        emb.embed(["x"])
    assert err.value.transient and err.value.retry_after == 2.5


def test_5xx_is_transient_and_4xx_is_not(api: OpenAIProtocolServer) -> None:
    emb = OpenAIEmbedder(api.base_url, "k", "m")
    api.fail_next(1, status=503)
    with pytest.raises(EmbedderError) as err:
        emb.embed(["x"])
    assert err.value.transient
    api.fail_next(1, status=400)
    with pytest.raises(EmbedderError) as err:
        emb.embed(["x"])
    assert not err.value.transient


def test_dimension_change_is_refused(api: OpenAIProtocolServer) -> None:
    emb = OpenAIEmbedder(api.base_url, "k", "m")
    api.set_dim(48)
    with pytest.raises(EmbedderError, match="dimension mismatch") as err:
        emb.embed(["x"])
    assert not err.value.transient


def test_timeout_is_transient(api: OpenAIProtocolServer) -> None:
    emb = OpenAIEmbedder(api.base_url, "k", "m", timeout=0.3)
    api.hang(1.0)
    with pytest.raises(EmbedderError, match="unreachable") as err:
        emb.embed(["x"])
    assert err.value.transient
    api.hang(0)


class StrictServer(OpenAIProtocolServer):
    """Refuses an input over `limit` UTF-8 bytes with a 400, as a real provider does with an
    input over its token limit, and records the byte length of every input it gets."""

    def __init__(self, limit: int):
        super().__init__(dim=32)
        self.limit = limit
        self.sizes: list[int] = []

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.sizes += [len(t.encode()) for t in texts]
        if any(len(t.encode()) > self.limit for t in texts):
            self.requests += 1
            return 400, {"error": {"message": "maximum context length exceeded", "type": "invalid_request_error"}}, {}
        return super()._answer(body)


def test_over_long_inputs_are_truncated_to_the_bound() -> None:
    """An input over the model's limit would make the provider answer 400
    for the whole batch; the embedder cuts it (at a character boundary) before sending."""
    with StrictServer(limit=1_000) as api:
        emb = OpenAIEmbedder(api.base_url, "k", "m", max_input_bytes=1_000)
        texts = ["short one", "é" * 5_000, "x" * (1 << 20)]
        vecs = emb.embed(texts)
        assert len(vecs) == 3 and max(api.sizes) <= 1_000
        assert vecs[0] == emb.embed_query("short one")
        assert vecs[2] == emb.embed_query("x" * 1_000)  # what was embedded: the first 1,000 bytes


def test_truncation_never_splits_a_character() -> None:
    assert truncate_utf8("abc", 8) == "abc"
    assert truncate_utf8("é" * 10, 5) == "éé"
    assert truncate_utf8("a" + "😀" * 3, 6) == "a😀"
    assert len(truncate_utf8("漢" * 10_000, 8_000).encode()) <= 8_000


def test_a_provider_4xx_does_not_open_the_circuit(api: OpenAIProtocolServer) -> None:
    """Through the real client and HTTP: 400s (one tenant's bad input) leave the breaker
    closed; 500s (an outage) open it."""
    b = BreakerEmbedder(OpenAIEmbedder(api.base_url, "k", "m"), failures=2, cooldown=60)
    api.fail_next(6, status=400)
    for _ in range(6):
        with pytest.raises(EmbedderError) as err:
            b.embed(["x"])
        assert not err.value.transient
    assert b.state == "closed"
    assert len(b.embed(["x"])[0]) == 32
    api.fail_next(2, status=500)
    for _ in range(2):
        with pytest.raises(EmbedderError):
            b.embed(["x"])
    assert b.state == "open"
