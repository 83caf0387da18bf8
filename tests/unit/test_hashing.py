"""Content normalization and hashing (as inner_voice clients hash), text extraction."""

from __future__ import annotations

import random
import unicodedata

import blake3
import pytest

from shared.text import hashing
from shared.text.hashing import cap_text, content_hash, doc_text, normalize, token_count
from tests.support.equivalence import assert_same_everywhere


@pytest.mark.parametrize("raw, expected", [
    ("Ｈｅｌｌｏ　Ｗｏｒｌｄ", "hello world"),  # NFKC folds fullwidth letters and the ideographic space
    ("ﬁne ①", "fine 1"),  # NFKC compatibility ligature and circled digit
    ("MiXeD CaSe", "mixed case"),
    ("tab\tnew\nline\r\nend", "tab new line end"),
    ("  padded \u00a0 out  ", "padded out"),  # NBSP folds to a space under NFKC
    ("nul\x00bell\x07", "nulbell"),  # Cc controls are removed, not turned into spaces
    ("zero\u200bwidth\ufeff", "zerowidth"),  # Cf format characters are removed
    ("a \u200b b", "a b"),  # removal happens before collapsing: no double space left behind
    ("lone \ud800 surrogate", "lone surrogate"),
    ("", ""),
])
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_equivalent_texts_hash_identically() -> None:
    variants = ["Hello World", "  hello   world\n", "ＨＥＬＬＯ\tＷＯＲＬＤ", "hello\u200b world\x00"]
    assert len({content_hash(v) for v in variants}) == 1


@pytest.mark.parametrize("a, b", [
    ("hello world", "hello world!"),
    ("hello world", "helloworld"),  # whitespace collapses but never disappears between words
    ("café", "cafe"),  # accents are content, not formatting
])
def test_different_texts_hash_differently(a: str, b: str) -> None:
    assert content_hash(a) != content_hash(b)


def test_content_hash_is_blake3_of_the_normalized_utf8_text() -> None:
    expected = blake3.blake3("ünïcode text".encode()).hexdigest()
    assert content_hash("  ÜNÏCODE\tTEXT ") == "blake3:" + expected
    assert len(expected) == 64


def test_doc_text_default_order_title_then_sorted_keys() -> None:
    fields = {"zeta": "Z", "body": "B", "title": "T", "abstract": "A"}
    assert doc_text(fields, None) == "T\nA\nB\nZ"


def test_doc_text_default_skips_private_nested_and_non_string_values() -> None:
    fields = {"title": "T", "_secret": "S", "meta": {"inner": "I"}, "n": 3, "flag": True,
              "tags": ["x", 4, "y"], "empty": "  ", "none": None}
    assert doc_text(fields, None) == "T\nx\ny"


def test_doc_text_without_title_starts_with_the_first_sorted_key() -> None:
    assert doc_text({"b": "second", "a": "first"}, None) == "first\nsecond"


def test_doc_text_does_not_depend_on_key_insertion_order() -> None:
    one = {"title": "T", "body": "B", "notes": "N"}
    two = {"notes": "N", "body": "B", "title": "T"}
    assert doc_text(one, None) == doc_text(two, None)


def test_doc_text_allowlist_keeps_its_own_order_and_only_listed_fields() -> None:
    fields = {"title": "T", "body": "B", "notes": "N", "tags": ["x", "y"]}
    assert doc_text(fields, ["body", "tags", "title"]) == "B\nx\ny\nT"
    assert doc_text(fields, ["missing", "notes"]) == "N"
    assert doc_text(fields, []) == ""


@pytest.mark.parametrize("text, count", [
    ("one two, three!", 3),
    ("", 0),
    ("   \n\t ", 0),
    ("snake_case counts once", 3),
    ("这是中文", 4),  # one token per ideograph: unspaced scripts are not "one word"
    ("price 3.5 million", 4),
])
def test_token_count(text: str, count: int) -> None:
    assert token_count(text) == count


def test_cap_text_cuts_on_the_last_sentence_boundary_in_the_window() -> None:
    text = "A" * 650 + ". " + "B" * 100 + "! " + "C" * 200
    capped = cap_text(text, 800)
    assert capped == "A" * 650 + ". " + "B" * 100 + "!"
    assert len(capped) <= 800


def test_cap_text_hard_cuts_when_the_only_boundary_is_too_early() -> None:
    text = "Short. " + "x" * 1000
    assert cap_text(text, 800) == text[:800]


def test_cap_text_leaves_short_text_alone() -> None:
    assert cap_text("Fits. Fine.", 800) == "Fits. Fine."


def _normalize_per_character(text: str) -> str:
    """The definition `normalize` must keep: filter every character, then collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if hashing._keep(ch))
    return hashing._WS.sub(" ", text).strip()


def test_normalize_word_fast_path_equals_the_per_character_definition() -> None:
    # every BMP character: inside a word, alone, beside whitespace; and random mixes
    assert_same_everywhere(hashing.normalize, _normalize_per_character, lambda ch: [f"a{ch}b {ch}\t{ch}x"],
                           "ab Z\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u2029\u200b\u200d\ufeff\x00\x07\ud800\ue000"
                           "\u3000 éﬁ①\u0378", seed=7, longest=12)


def test_normalize_ascii_fast_path_equals_the_per_character_definition() -> None:
    # ASCII text without a control to drop is joined in C; with one it takes the word path.
    rng = random.Random(11)
    pool = [chr(c) for c in range(128)] + ["a", "b", " ", "Z"] * 8
    for _ in range(20_000):
        t = "".join(rng.choice(pool) for _ in range(rng.randrange(16)))
        assert hashing.normalize(t) == _normalize_per_character(t), repr(t)


def test_token_count_at_most_is_the_count_capped() -> None:
    for text in ["", "one", "one two", "one two three", "a b c d e f", "漢字かな x", "..., !!"]:
        for cap in range(5):
            assert token_count(text, at_most=cap) == min(token_count(text), cap), (text, cap)


def test_visible_content_hash_is_sha256_of_the_same_normalized_text() -> None:
    import hashlib

    text = "  Ｈello\u200b   WORLD\n"
    assert hashing.visible_content_hash(text) == "sha256:" + hashlib.sha256(b"hello world").hexdigest()
    assert hashing.visible_content_hash("hello world") == hashing.visible_content_hash(text)
    assert hashing.visible_content_hash("hello world!") != hashing.visible_content_hash(text)


@pytest.mark.parametrize("scheme", ["sha256", "blake3"])
def test_a_client_hash_of_either_scheme_names_the_same_content(scheme: str) -> None:
    text = "Flutter report: gust loads."
    given = hashing.visible_content_hash(text) if scheme == "sha256" else content_hash(text)
    assert hashing.same_content(given, "flutter   REPORT: gust loads.")
    assert hashing.same_content(given.upper().replace(scheme.upper(), scheme), text)  # hex in capitals too
    assert not hashing.same_content(given, "Flutter report: gust load.")
    assert hashing.parse_content_hash(given)[0] == scheme


@pytest.mark.parametrize("bad", ["", "sha256:", "md5:" + "0" * 32, "sha256:" + "0" * 63, "blake3:" + "g" * 64,
                                 "0" * 64, "sha256:" + "0" * 64 + "\n"])
def test_a_malformed_client_hash_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        hashing.parse_content_hash(bad)
