"""Content normalization and hashing (seed 000 "Content Normalization")."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import blake3

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def normalize(text: str) -> str:
    """NFKC, lowercase, control characters removed, whitespace collapsed, trimmed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch if not unicodedata.category(ch).startswith("C") or ch.isspace() else "" for ch in text)
    return _WS.sub(" ", text).strip()


def content_hash(text: str) -> str:
    return "blake3:" + blake3.blake3(normalize(text).encode("utf-8")).hexdigest()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def doc_text(fields: dict[str, Any], allow: Sequence[str] | None) -> str:
    """The text a document is hashed and embedded by: the allowed fields in order, or the
    title then every other top-level string field in key order."""
    if allow is not None:
        keys = list(allow)
    else:
        keys = (["title"] if "title" in fields else []) + sorted(
            k for k in fields if k != "title" and not k.startswith("_"))
    return "\n".join(s for k in keys for s in _strings(fields.get(k)))


def token_count(text: str) -> int:
    return len(_WORD.findall(text))
