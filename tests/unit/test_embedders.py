from __future__ import annotations

import numpy as np
import pytest

from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.adapters.embedders.onnx_embedder import torch_installed


def test_hash_embedder_is_deterministic_unit_and_similar_for_shared_words() -> None:
    e = HashEmbedder(128)
    a, b, c = e.embed(["rotor blade icing", "icing on the rotor blade", "quarterly tax filing"])
    assert a == HashEmbedder(128).embed_query("rotor blade icing")
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert np.dot(a, b) > 0.5 > abs(np.dot(a, c))
    assert e.embed_query("   ") == [0.0] * 128


@pytest.mark.skipif(not torch_installed(), reason="the `export` extra (torch, sentence-transformers) is not "
                                                   "installed: make setup-export")
@pytest.mark.model
def test_local_model_paraphrase_and_batch_consistency() -> None:
    from shared.adapters.embedders.local_embedder import LocalEmbedder

    e = LocalEmbedder()
    assert e.dim == 384 and e.model_id == "local:all-MiniLM-L6-v2"
    a, b, c = e.embed(["How do I fix a flat bicycle tire?", "Repairing a punctured bike tyre",
                       "Quarterly revenue grew by eight percent"])
    assert np.dot(a, b) > np.dot(a, c) + 0.3
    assert np.dot(a, e.embed_query("How do I fix a flat bicycle tire?")) > 0.999


def test_the_torch_runtime_without_torch_says_which_extra_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from shared.adapters.embedders.local_embedder import LocalEmbedder

    monkeypatch.setitem(sys.modules, "torch", None)  # what a light install has: the import fails
    with pytest.raises(RuntimeError, match=r"`export` extra"):
        LocalEmbedder()
