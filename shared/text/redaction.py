"""Redaction before any text reaches an embedding provider.

Detectors run from the most specific to the least specific so a broad pattern never eats
part of a narrower one: prefixed secrets, emails, generic long tokens, card numbers,
phone numbers. Each detector errs towards leaving ordinary prose and numbers alone
("March 10, 1998", "3.5 million", "2024-01-15", "192.168.1.1").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

Counts = dict[str, int]

# Secrets with a recognisable vendor prefix: OpenAI/Anthropic/Stripe keys, AWS access key
# ids, GitHub tokens, Slack tokens, Google API keys.
_PREFIXED_SECRET = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r")(?![A-Za-z0-9_-])"
)
# "Bearer <token>": the word stays (it is prose-like and harmless), the token goes. The
# token must hold a digit so "bearer responsibilities" is left alone.
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{12,}=*")
_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# 13-19 digits, optionally grouped by single spaces or dashes, not glued to other digits
# (nor to a "+": "+4915112345678" is an international phone number).
_CARD = re.compile(r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d])")
# Shapes that are phone numbers without any context word.
_PHONE = re.compile(
    r"(?<![\w+.-])(?:"
    r"\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}"  # +1 415 555 2671, +44 (0)20 7946 0958
    r"|\((?:[2-9]\d{2}|0\d{1,4})\)[ .-]?\d{3,4}[ .-]?\d{3,4}"  # (415) 555-2671, (020) 7946 0958
    r"|[2-9]\d{2}([.-])[2-9]\d{2}\1\d{4}"  # 415-555-2671, 415.555.2671
    r"|[2-9]\d{2} [2-9]\d{2} \d{4}"  # 415 555 2671
    r"|0\d{1,4}[ -]\d{3,4}[ -]\d{3,4}"  # 020 7946 0958 (trunk-prefixed national)
    r")(?![\w-]|\.\d)"
)
# Weaker shapes (555-2671, 4155552671) count only right after a phone word.
_PHONE_AFTER_WORD = re.compile(
    r"(?i)(\b(?:tel|phone|ph|mobile|mob|cell|fax|call|sms|whatsapp)\b\.?:?\s{0,2}(?:#|no\.?|number:?)?\s{0,2})"
    r"(\+?\d(?:[ .-]?\d){6,14})(?![\w-]|\.\d)"
)


def _bump(counts: Counts, kind: str, n: int = 1) -> None:
    if n:
        counts[kind] = counts.get(kind, 0) + n


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number satisfies (and ~90% of random digit
    runs fail), so ordinary long numbers are rarely taken for cards."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card_prefix_ok(digits: str) -> bool:
    # Issuer prefixes in use: 3 (Amex/Diners/JCB), 4 (Visa), 5 (Mastercard/Maestro),
    # 6 (Discover/UnionPay), 2221-2720 (Mastercard 2-series). Rules out timestamps (1...),
    # ISBNs (978...) and runs of years like "2001 2005 2010 2015".
    return digits[0] in "3456" or 2221 <= int(digits[:4]) <= 2720


def _is_card(raw: str) -> bool:
    if len({c for c in raw if not c.isdigit()}) > 1:
        return False  # a real card uses one separator style, not "1234-5678 9012..."
    digits = re.sub(r"\D", "", raw)
    return 13 <= len(digits) <= 19 and _card_prefix_ok(digits) and luhn_ok(digits)


def _class_changes(part: str) -> int:
    """How often a run switches between letters and digits ("ab12c" -> 2)."""
    return sum(a.isdigit() != b.isdigit() for a, b in pairwise(part))


def _is_secret_token(token: str) -> bool:
    """A long run that looks random rather than like words joined by `_`/`-`: some part of
    it mixes letters and digits over 16+ characters, or its parts switch between letters
    and digits at least 3 times. Identifiers like `a_very_long_snake_case_name_v2` (one
    switch) stay; canonical UUIDs are ids, not credentials."""
    if _UUID.fullmatch(token):
        return False
    parts = re.split(r"[_-]", token)
    mixed_long = any(len(p) >= 16 and _class_changes(p) for p in parts)
    return mixed_long or sum(_class_changes(p) for p in parts) >= 3


def _phone_digits_ok(raw: str) -> bool:
    # E.164 numbers have at most 15 digits; fewer than 7 is a small number, not a phone.
    return 7 <= sum(c.isdigit() for c in raw) <= 15


def _sub(pattern: re.Pattern[str], mask: str, keep: Callable[[re.Match[str]], bool],
         text: str, counts: Counts, kind: str) -> str:
    """Replace matches accepted by `keep` with `mask`, counting them under `kind`."""

    def repl(m: re.Match[str]) -> str:
        if not keep(m):
            return m.group()
        _bump(counts, kind)
        return mask

    return pattern.sub(repl, text)


def _mask_secrets(text: str, counts: Counts) -> str:
    text = _sub(_PREFIXED_SECRET, "[SECRET]", lambda m: True, text, counts, "secret")
    text, n = _BEARER.subn(r"\1[SECRET]", text)
    _bump(counts, "secret", n)
    return text


def _mask_phones(text: str, counts: Counts) -> str:
    text = _sub(_PHONE, "[PHONE]", lambda m: _phone_digits_ok(m.group()), text, counts, "phone")

    def repl(m: re.Match[str]) -> str:
        if not _phone_digits_ok(m.group(2)):
            return m.group()
        _bump(counts, "phone")
        return m.group(1) + "[PHONE]"

    return _PHONE_AFTER_WORD.sub(repl, text)


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Mask emails, phone numbers, payment cards and secrets.

    Returns the masked text and how many of each kind (`email`, `phone`, `card`,
    `secret`) were masked; kinds that were not found are absent from the counts.
    """
    counts: Counts = {}
    text = _mask_secrets(text, counts)
    text = _sub(_EMAIL, "[EMAIL]", lambda m: True, text, counts, "email")
    text = _sub(_LONG_TOKEN, "[SECRET]", lambda m: _is_secret_token(m.group()), text, counts, "secret")
    text = _sub(_CARD, "[CARD]", lambda m: _is_card(m.group()), text, counts, "card")
    text = _mask_phones(text, counts)
    return text, counts


def select_fields(fields: Mapping[str, Any], allow: Sequence[str] | None) -> dict[str, Any]:
    """The per-collection field allowlist, applied before any text is extracted so
    a disallowed field never reaches the hash, the embedder or the provider. Without an
    allowlist every field is kept (a copy, so callers may not alias the stored doc)."""
    if allow is None:
        return dict(fields)
    return {k: fields[k] for k in allow if k in fields}
