"""Content hashing, redaction and the eligibility policy."""

from __future__ import annotations

import pytest

from shared.policy.eligibility import EligibilityPolicy
from shared.text.hashing import content_hash, doc_text, normalize, token_count
from shared.text.redaction import redact, select_fields

PROSE = "The launch moved to March 10, 1998; revenue grew 3.5 million over the quarter."


def test_normalize_folds_width_case_controls_and_whitespace() -> None:
    assert normalize("  Ｈｅｌｌｏ\tWORLD\x00\x07 \n again ") == "hello world again"
    assert content_hash("Hello   World") == content_hash("hello world\n")
    assert content_hash("hello world") != content_hash("hello world!")
    assert content_hash("x").startswith("blake3:") and len(content_hash("x")) == 7 + 64


def test_doc_text_order_and_allowlist() -> None:
    fields = {"body": "B", "title": "T", "abstract": "A", "_private": "P", "n": 3, "tags": ["x", "y"]}
    assert doc_text(fields, None) == "T\nA\nB\nx\ny"
    assert doc_text(fields, ["body", "title"]) == "B\nT"
    assert select_fields(fields, ["title"]) == {"title": "T"}
    assert token_count("one two, three!") == 3


@pytest.mark.parametrize("text, kind, mask", [
    ("write to jane.doe@example.com today", "email", "[EMAIL]"),
    ("call +1 415 555 2671 now", "phone", "[PHONE]"),
    ("card 4111 1111 1111 1111 exp", "card", "[CARD]"),
    ("key sk-abcdefghijklmnopqrstuvwx1234", "secret", "[SECRET]"),
    ("aws AKIAABCDEFGHIJKLMNOP here", "secret", "[SECRET]"),
])
def test_redaction_masks_each_kind(text: str, kind: str, mask: str) -> None:
    out, counts = redact(text)
    assert mask in out and counts.get(kind, 0) >= 1, (out, counts)


def test_redaction_leaves_ordinary_prose_alone() -> None:
    assert redact(PROSE) == (PROSE, {})
    out, _ = redact("card 4111 1111 1111 1112 fails Luhn")
    assert "[CARD]" not in out


def test_policy_priority() -> None:
    text = "a reasonably long text about wings and rotors in flight " * 3
    policy = EligibilityPolicy([{"if": {"collection": "^vip$"}, "then": {"action": "embed"}},
                                {"if": {"sensitivity": "private"}, "then": {"action": "defer"}}])
    # policy beats writer deny
    assert policy.decide("vip", {}, "deny", text).reason == "policy:rule0"
    # writer deny beats heuristics and fallback
    assert policy.decide("notes", {}, "deny", text).reason == "writer_deny"
    assert policy.decide("notes", {"sensitivity": "private"}, None, text).action == "defer"
    # heuristics beat fallback
    assert policy.decide("notes", {}, None, "hi").reason == "too_short"
    assert policy.decide("notes", {}, None, "12 34 56 78 90 11 22 33").reason == "structured"
    assert policy.decide("notes", {}, None, text) .action == "embed"


def test_token_count_rule() -> None:
    policy = EligibilityPolicy([{"if": {"collection": "posts", "tokenCount": {"gt": 40}},
                                 "then": {"action": "embed", "fields": ["title"]}}])
    long = "word " * 50
    d = policy.decide("posts", {}, "deny", long)
    assert d.action == "embed" and d.fields == ("title",)
    assert policy.decide("posts", {}, "deny", "word " * 10).reason == "writer_deny"


@pytest.mark.parametrize("rule", [
    {"if": {}, "then": {"action": "explode"}},
    {"if": {"collection": "("}, "then": {"action": "embed"}},
    {"if": {"tokenCount": {"about": 3}}, "then": {"action": "embed"}},
    {"if": {"color": "red"}, "then": {"action": "embed"}},
])
def test_bad_rules_refuse_to_load(rule: dict) -> None:
    with pytest.raises(ValueError):
        EligibilityPolicy([rule])
