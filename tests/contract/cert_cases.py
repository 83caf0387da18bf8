"""The certificate cases every engine's contract suite runs: which documents a caller sees,
given the certificates each document requires and those the caller holds. A document passes
only if every certificate it requires is held (none required: always)."""

from __future__ import annotations

# document id -> the certificates it requires
DOC_CERTS: dict[str, list[str]] = {
    "open": [],
    "a": ["iss:a"],
    "b": ["iss:b"],
    "ab": ["iss:a", "iss:b"],
    "c": ["other:c"],
}

# the certificates a caller holds -> the documents it must see (worked out by hand, not computed)
HELD_SEES: list[tuple[frozenset[str], set[str]]] = [
    (frozenset(), {"open"}),
    (frozenset({"iss:a"}), {"open", "a"}),
    (frozenset({"iss:b"}), {"open", "b"}),
    (frozenset({"iss:a", "iss:b"}), {"open", "a", "b", "ab"}),
    (frozenset({"iss:z"}), {"open"}),
    (frozenset({"iss:a", "iss:b", "other:c"}), {"open", "a", "b", "ab", "c"}),
    (frozenset({"other:c", "iss:z"}), {"open", "c"}),
]
