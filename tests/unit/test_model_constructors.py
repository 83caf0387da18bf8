"""The hot-loop constructors build the same values as the NamedTuples' own constructors."""

from shared.model import DocKey, Hit, doc_key, hit


def test_doc_key_and_hit_are_the_named_tuples() -> None:
    k = doc_key("t", "c", "d1")
    assert type(k) is DocKey and k == DocKey("t", "c", "d1") and hash(k) == hash(DocKey("t", "c", "d1"))
    assert (k.tenant, k.collection, k.doc_id, k.ref) == ("t", "c", "d1", "c/d1")
    h = hit(k, 0.5)
    assert type(h) is Hit and h == Hit(DocKey("t", "c", "d1"), 0.5) and (h.key, h.score) == (k, 0.5)
