"""The query-vector cache: keys are fixed-size digests, memory is
bounded by bytes as well as entries, over-long texts are never cached, and a hit is scoped to
the tenant and the principal set, so one user's cached query cannot be confirmed by another
user's faster answer."""

from __future__ import annotations

import random

from services.planner.query_cache import ENTRY_OVERHEAD, QueryVectorCache, cache_key
from shared.config import Settings


def _vec(dim: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(-1, 1) for _ in range(dim)]


def test_vectors_come_back_exactly() -> None:
    c = QueryVectorCache()
    v = _vec(384, 1)
    c.put("t", "m", "rotor icing", v, principals=["user:a"])
    assert c.get("t", "m", "rotor icing", principals=["user:a"]) == v


def test_keys_are_fixed_size_digests_of_the_text() -> None:
    c = QueryVectorCache(max_text_chars=100_000)
    c.put("t", "m", "x" * 100_000, [0.5], principals=["user:a"])
    c.put("t", "m", "y", [0.5], principals=["user:a"])
    assert {len(k) for k in c._items} == {32}
    assert c.bytes == 2 * (8 + ENTRY_OVERHEAD)  # the text's length costs nothing


def test_over_long_texts_are_not_cached() -> None:
    c = QueryVectorCache(max_text_chars=4_096)
    big = "q" * (1 << 20)
    c.put("t", "m", big, _vec(8, 2))
    assert len(c) == 0 and c.get("t", "m", big) is None


def test_bounded_by_bytes_not_only_entries() -> None:
    dim = 1_000
    per = 8 * dim + ENTRY_OVERHEAD
    c = QueryVectorCache(capacity=10_000, max_bytes=10 * per)
    for i in range(50):
        c.put("t", "m", f"query {i}", _vec(dim, i))
        assert c.bytes <= 10 * per
    assert len(c) == 10
    assert c.get("t", "m", "query 49") is not None and c.get("t", "m", "query 0") is None  # LRU order
    c.put("t", "m", "query 49", _vec(dim, 49))  # replacing an entry does not count it twice
    assert c.bytes == 10 * per


def test_a_vector_larger_than_the_whole_bound_is_not_kept() -> None:
    c = QueryVectorCache(max_bytes=1_000)
    c.put("t", "m", "x", _vec(1_000, 3))
    assert len(c) == 0 and c.bytes == 0


def test_hits_are_scoped_by_tenant_and_principal_set() -> None:
    """Another principal (same tenant) asking the same text is a miss, so its
    answer time cannot confirm what someone else asked; the same principal set in any order
    shares its entries."""
    c = QueryVectorCache()
    c.put("t", "m", "merger with acme", [1.0], principals=["user:alice", "group:eng", "*"])
    assert c.get("t", "m", "merger with acme", principals=["user:bob", "group:sales", "*"]) is None
    assert c.get("t", "m", "merger with acme", principals=["user:bob", "user:alice", "group:eng", "*"]) is None
    assert c.get("u", "m", "merger with acme", principals=["user:alice", "group:eng", "*"]) is None
    assert c.get("t", "m", "merger with acme") is None  # tenant-only scope is another scope
    assert c.get("t", "m", "merger with acme", principals=["*", "group:eng", "user:alice"]) == [1.0]


def test_key_parts_cannot_collide_by_concatenation() -> None:
    assert cache_key("ab", ["c"], "m", "x") != cache_key("a", ["bc"], "m", "x")
    assert cache_key("t", ["a", "b"], "m", "x") != cache_key("t", ["a\x00b"], "m", "x")
    assert cache_key("t", None, "m", "x") != cache_key("t", [], "m", "x")
    assert cache_key("t", ["a", "b"], "m", "x") == cache_key("t", ["b", "a", "a"], "m", "x")


def test_defaults_follow_the_settings() -> None:
    s = Settings()
    c = QueryVectorCache()
    assert (c.capacity, c.max_bytes, c.max_text_chars) == (
        s.query_cache_max_entries, s.query_cache_max_bytes, s.max_query_chars)
    assert QueryVectorCache.from_settings(Settings(query_cache_max_bytes=123, max_query_chars=7)).max_bytes == 123
