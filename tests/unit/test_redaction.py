"""Redaction at the provider boundary and the field allowlist."""

from __future__ import annotations

import pytest

from shared.text.redaction import luhn_ok, redact, select_fields


@pytest.mark.parametrize("text, expected", [
    ("write to jane.doe@example.com today", "write to [EMAIL] today"),
    ("cc: a+tag@mail.example.co.uk.", "cc: [EMAIL]."),
])
def test_emails(text: str, expected: str) -> None:
    assert redact(text) == (expected, {"email": 1})


@pytest.mark.parametrize("number", [
    "+1 415 555 2671",
    "+44 (0)20 7946 0958",
    "+4915112345678",
    "+33 1 23 45 67 89",
    "(415) 555-2671",
    "415-555-2671",
    "415.555.2671",
    "415 555 2671",
    "020 7946 0958",
])
def test_phone_numbers(number: str) -> None:
    assert redact(f"reach me at {number} after six") == ("reach me at [PHONE] after six", {"phone": 1})


@pytest.mark.parametrize("text, expected", [
    ("phone: 5552671", "phone: [PHONE]"),
    ("call 555-2671 now", "call [PHONE] now"),
    ("Tel. 4155552671", "Tel. [PHONE]"),
])
def test_short_phone_shapes_need_a_phone_word(text: str, expected: str) -> None:
    assert redact(text) == (expected, {"phone": 1})


@pytest.mark.parametrize("card", [
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "5555555555554444",
    "3782 822463 10005",  # Amex, 15 digits
    "4222222222222",  # 13-digit Visa
])
def test_payment_cards(card: str) -> None:
    assert redact(f"card {card} exp 12/29") == ("card [CARD] exp 12/29", {"card": 1})


def test_card_must_pass_luhn() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111112")
    out, counts = redact("card 4111 1111 1111 1112 fails Luhn")
    assert "[CARD]" not in out and "card" not in counts


@pytest.mark.parametrize("secret", [
    "sk-abcdefghijklmnopqrstuvwx1234",
    "sk-proj-abcDEF1234567890abcdEFGH",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_aBcD1234567890EfGhIjKlMnOpQrStUvWxYz12",
    "Zx8kP2qL9mN4vB7cX1zA5sD3fG6hJ0kLq",  # generic high-entropy token, 33 chars
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee1234",  # 40 hex chars
])
def test_secrets(secret: str) -> None:
    assert redact(f"key {secret} here") == ("key [SECRET] here", {"secret": 1})


def test_bearer_token_keeps_the_word_and_masks_the_token() -> None:
    text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc123"
    assert redact(text) == ("Authorization: Bearer [SECRET]", {"secret": 1})


def test_counts_add_up_per_kind() -> None:
    text = "a@b.io, c@d.io, +1 415 555 2671, 4111 1111 1111 1111, AKIAIOSFODNN7EXAMPLE"
    out, counts = redact(text)
    assert counts == {"email": 2, "phone": 1, "card": 1, "secret": 1}
    assert out == "[EMAIL], [EMAIL], [PHONE], [CARD], [SECRET]"


@pytest.mark.parametrize("prose", [
    "The launch moved to March 10, 1998; revenue grew 3.5 million over the quarter.",
    "Meet on 2024-01-15 at 12:30 in room 101; server 192.168.1.1 runs 10.0.19041.1.",
    "ISBN 978-3-16-148410-0; population 8,000,000,000; pi is 3.14159265358979.",
    "Good years: 1998 2001 2005 2010 2015 2020.",
    "Timestamp 1700000000000 and order number 1234567890123.",
    "See Smith (2019) 123-145; between 250-1000 users; pH 7.4; +20 points.",
    "The bearer of bad news; Bearer responsibilities; a task-management-framework.",
    "a_very_long_snake_case_identifier_name_v2 and 123e4567-e89b-12d3-a456-426614174000",
    "https://example.com/blog/very-long-path-segment-name-2024-edition",
    "Email me at the usual address; the @handle and user@localhost are not addresses.",
])
def test_no_false_positives_on_ordinary_text(prose: str) -> None:
    assert redact(prose) == (prose, {})


def test_select_fields_applies_the_allowlist_in_its_order() -> None:
    fields = {"title": "T", "body": "B", "ssn": "123-45-6789"}
    assert select_fields(fields, ["body", "title", "missing"]) == {"body": "B", "title": "T"}
    assert list(select_fields(fields, ["body", "title"])) == ["body", "title"]
    assert select_fields(fields, []) == {}


def test_select_fields_without_allowlist_returns_a_copy() -> None:
    fields = {"title": "T"}
    out = select_fields(fields, None)
    assert out == fields and out is not fields
