"""Redaction before any text reaches an embedder (V§9)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_SECRET = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|Bearer\s+[A-Za-z0-9._~+/-]{16,}=*)"
)
_LONG_TOKEN = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b")
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
_PHONE = re.compile(r"(?<![\w.])\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?[ .-]?\d{3,4}[ .-]?\d{3,4}\b")


def _luhn(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str, counts: dict[str, int]) -> str:
    def sub(m: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            counts["card"] = counts.get("card", 0) + 1
            return "[CARD]"
        return m.group()

    return _CARD.sub(sub, text)


def redact(text: str) -> tuple[str, dict[str, int]]:
    counts: dict[str, int] = {}
    for kind, pattern, mask in (("secret", _SECRET, "[SECRET]"), ("email", _EMAIL, "[EMAIL]"),
                                ("secret", _LONG_TOKEN, "[SECRET]")):
        text, n = pattern.subn(mask, text)
        if n:
            counts[kind] = counts.get(kind, 0) + n
    text = _cards(text, counts)
    text, n = _PHONE.subn("[PHONE]", text)
    if n:
        counts["phone"] = n
    return text, counts


def select_fields(fields: dict[str, Any], allow: Sequence[str] | None) -> dict[str, Any]:
    if allow is None:
        return fields
    return {k: fields[k] for k in allow if k in fields}
