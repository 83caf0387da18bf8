"""Content normalization, hashing and text extraction (the normalization inner_voice clients
hash against).

The same `doc_text` feeds the content hash and the embedder, so a document is re-embedded
exactly when the text it would be embedded by changes.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import blake3

HASH_PREFIX = "blake3:"
# The content hash clients read (`contentHash` in admin answers) is `sha256:` over the same
# normalised text, while the store keeps keying sidecars, vectors, cold copies and job keys by
# `blake3:`: changing that key would make every unchanged document of an existing store look
# changed (a re-embedding storm) unless every row and cold file were rewritten. Both name the
# same content, so a client may send either where a content hash is accepted.
SHA256_PREFIX = "sha256:"
_GIVEN_HASH = re.compile(r"(blake3|sha256):([0-9a-fA-F]{64})")
SNIPPET_LIMIT = 800  # snippets are capped at 600–800 characters (what inner_voice clients expect)

_WS = re.compile(r"\s+")
# Categories dropped by `normalize`: controls (Cc), format/zero-width characters (Cf) and
# lone surrogates (Cs). Surrogates are not in the brief's list, but they cannot be encoded
# as UTF-8, so keeping them would make `content_hash` raise on JSON like "\ud800".
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
# The ASCII characters `normalize` drops: the controls (Cc) that are not whitespace. ASCII has
# no Cf or Cs character, and NFKC and lower() keep ASCII text ASCII.
_ASCII_DROPPED = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")
# Scripts written without spaces: each ideograph/kana counts as one token, otherwise a whole
# Chinese or Japanese sentence would count as a single word and look "too short".
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def _keep(ch: str) -> bool:
    # Whitespace controls (\t, \n, \r, \x1c-\x1f, \x85) are kept so they collapse to a
    # space instead of gluing two words together.
    return ch.isspace() or unicodedata.category(ch) not in _DROPPED_CATEGORIES


def normalize(text: str) -> str:
    """NFKC, lowercase, control/zero-width characters removed, whitespace collapsed, trimmed.

    inner_voice's manual lists control removal last (step 5); it runs before the whitespace
    collapse here so that "a \\u200b b" and "a b" normalize (and hash) the same instead of
    leaving a double space. For every other input the result equals the manual's order.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    if text.isascii() and not _ASCII_DROPPED.search(text):
        return " ".join(text.split())  # nothing to drop: collapse whitespace, in C
    # Word by word: a printable word holds no Cc/Cf/Cs character, so only the rare other words
    # are filtered character by character (the per-character filter was ~21% of bulk ingest
    # CPU). Same result as filtering the whole text, then collapsing whitespace: `str.split()`
    # splits on exactly the characters `_keep` keeps as whitespace (str.isspace, as `\s`), and
    # words left empty are dropped.
    words = (w if w.isprintable() else "".join(ch for ch in w if _keep(ch)) for w in text.split())
    return " ".join(w for w in words if w)


def content_hash(text: str) -> str:
    """`blake3:` + hex digest of the normalized text: the dedupe and re-embed key."""
    return HASH_PREFIX + blake3.blake3(normalize(text).encode("utf-8")).hexdigest()


def visible_content_hash(text: str) -> str:
    """`sha256:` + hex digest of the normalized text: the content hash clients are shown."""
    return SHA256_PREFIX + hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def parse_content_hash(value: str) -> tuple[str, str]:
    """(`blake3`|`sha256`, lowercase hex) of a content hash a client sent; ValueError otherwise."""
    m = _GIVEN_HASH.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError("a content hash is `sha256:` or `blake3:` followed by 64 hex digits")
    return m.group(1), m.group(2).lower()


def same_content(given: str, text: str) -> bool:
    """Whether a client's content hash (either scheme) names this text's content."""
    scheme, digest = parse_content_hash(given)
    mine = visible_content_hash(text) if scheme == "sha256" else content_hash(text)
    return mine == f"{scheme}:{digest}"


def _strings(value: Any) -> list[str]:
    """The non-empty strings of a field value; numbers, booleans and nested objects carry
    no prose worth embedding, so they are skipped."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = [v for v in value if isinstance(v, str)]
    else:
        return []
    return [s for s in items if s.strip()]


def _default_keys(fields: Mapping[str, Any]) -> list[str]:
    # Title first because it is the densest summary of the document; the rest in key order
    # so the text (and the hash) does not depend on the writer's JSON key order.
    rest = sorted(k for k in fields if k != "title" and not k.startswith("_"))
    return (["title"] if "title" in fields else []) + rest


def doc_text(fields: Mapping[str, Any], allow: Sequence[str] | None) -> str:
    """The text a document is hashed and embedded by.

    With an allowlist: exactly those fields, in the allowlist's order. Without: `title`,
    then every other top-level string (or list-of-strings) field in sorted key order,
    skipping `_`-prefixed keys. Values are joined with newlines.
    """
    keys = list(allow) if allow is not None else _default_keys(fields)
    return "\n".join(s for k in keys for s in _strings(fields.get(k)))


def token_count(text: str, at_most: int | None = None) -> int:
    """Cheap token estimate: word runs, plus one token per CJK ideograph or kana. With
    `at_most`, counting stops there (min(count, at_most)): enough for a lower bound, without
    listing every token of a long document."""
    if at_most is None:
        return len(_TOKEN.findall(text))
    return sum(1 for _ in itertools.islice(_TOKEN.finditer(text), at_most))


def cap_text(text: str, limit: int = SNIPPET_LIMIT) -> str:
    """At most `limit` characters, cut after the last sentence end (`.`, `!`, `?` followed
    by whitespace) in the last quarter of the window; otherwise a hard cut, as inner_voice
    clients expect. A boundary earlier than that would drop too much text."""
    if len(text) <= limit:
        return text
    floor = limit * 3 // 4
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, limit + 1) if m.end() <= limit]
    best = ends[-1] if ends else 0
    return text[:best] if best >= floor else text[:limit]
