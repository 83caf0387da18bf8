from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.adapters.embedders.openai_embedder import OpenAIEmbedder
from shared.ports import EmbedderError
from tests.support.openai_server import OpenAIProtocolServer


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
