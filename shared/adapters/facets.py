"""Metadata filter terms shared by the engines.

A document's filterable values (its top-level scalar fields, and the scalar elements of its
top-level lists) become exact tokens, so that a `FieldCondition` is a handful of term lookups
inside each engine's query, next to the ACL, before scoring:

- equality: `field␟s␟text`, `field␟b␟1|0`, and for numbers the level-0 range token below
  (`1` and `1.0` are one number; `True` is never `1`: the kinds differ);
- numeric ranges: the number as its order-preserving 64-bit key in hex. Tantivy (whose Python
  binding has no range query on text terms, and whose JSON fast-field ranges panicked on mixed
  int/float columns in 0.27) also indexes the key's 15 prefixes (4 bits each, as Lucene's
  trie-coded numbers did), so any range is a union of at most ~450 exact terms; OpenSearch uses
  a keyword `range` over the level-0 tokens (fixed-width hex sorts like the numbers); Qdrant
  keeps the numbers as floats under a safe key (`num_payload`) and uses its native `Range`.

Why tokens in ONE field rather than a mapped field per document field: user documents carry
arbitrary field names, and a mapping per name would hit OpenSearch's 1,000-field limit and grow
tantivy's schema; one keyword field holds any number of names. Tokens are bounded: a token over
`MAX_TOKEN_BYTES` is replaced by a hash of itself, computed the same way on both sides, so long
strings still compare exactly (up to a 128-bit hash) and never fail a write.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from shared.filters import MAX_STRING_CHARS
from shared.model import StoredDoc
from shared.ports import FieldCondition, SearchFilter

SEP = "\x1f"
MAX_TOKEN_BYTES = 200
LEVELS = 16  # 4-bit steps over a 64-bit key
_MASK = (1 << 64) - 1
MIN_KEY, MAX_KEY = 0, _MASK


def _bounded(token: str) -> str:
    if len(token.encode()) <= MAX_TOKEN_BYTES:
        return token
    return "~" + hashlib.blake2b(token.encode(), digest_size=16).hexdigest()


def sortable(x: float) -> int:
    """An unsigned 64-bit key whose order is the numbers' order (-0.0 is 0.0)."""
    bits: int = struct.unpack(">Q", struct.pack(">d", x + 0.0))[0]
    return (bits ^ _MASK) if bits >> 63 else (bits | (1 << 63))


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        x = float(v)
    except OverflowError:  # an integer beyond a double: not filterable as a number
        return None
    return x if math.isfinite(x) else None


def num_token(field: str, key: int, level: int = 0) -> str:
    width = (64 - 4 * level) // 4
    return _bounded(f"{field}{SEP}r{level:x}{SEP}{key >> (4 * level):0{width}x}")


def _eq_token(field: str, v: object) -> str | None:
    if isinstance(v, bool):
        return _bounded(f"{field}{SEP}b{SEP}{int(v)}")
    if isinstance(v, str):
        # No filter can name a longer string (the API's bound): not indexed, which keeps long
        # texts (bodies) out of the filter tokens.
        return _bounded(f"{field}{SEP}s{SEP}{v}") if len(v) <= MAX_STRING_CHARS else None
    x = _number(v)
    return None if x is None else num_token(field, sortable(x))


def _scalars(value: object) -> Iterator[object]:
    """The field's scalar values: itself, or its scalar elements when a list (one level)."""
    if isinstance(value, list | tuple):
        yield from (e for e in value if isinstance(e, str | int | float) and e is not None)
    elif isinstance(value, str | int | float):
        yield value


def doc_tokens(fields: Mapping[str, Any], trie: bool) -> list[str]:
    """Every filter token of a document; `trie` adds the 15 prefix tokens per number (tantivy)."""
    out: dict[str, None] = {}
    for name, value in fields.items():
        if name.startswith("_"):
            continue
        for v in _scalars(value):
            tok = _eq_token(name, v)
            if tok is None:
                continue
            out[tok] = None
            x = _number(v)
            if trie and x is not None:
                key = sortable(x)
                if len(name.encode()) < MAX_TOKEN_BYTES - 24:  # every prefix token fits: no _bounded
                    for level in range(1, LEVELS):
                        out[f"{name}{SEP}r{level:x}{SEP}{key >> (4 * level):0{16 - level}x}"] = None
                else:
                    for level in range(1, LEVELS):
                        out[num_token(name, key, level)] = None
    return list(out)


def num_field(name: str) -> str:
    """A payload key for field `name` that no JSON-path syntax can misread (dots, brackets)."""
    return "f" + hashlib.blake2b(name.encode(), digest_size=10).hexdigest()


def num_payload(fields: Mapping[str, Any]) -> dict[str, list[float]]:
    """Numbers per field under `num_field` keys (Qdrant ranges)."""
    out: dict[str, list[float]] = {}
    for name, value in fields.items():
        if name.startswith("_"):
            continue
        nums = [x for x in (_number(v) for v in _scalars(value)) if x is not None]
        if nums:
            out[num_field(name)] = nums
    return out


# (tenant, collection) -> the fields declared filterable there (the operator's
# VIBE_FILTERABLE_FIELDS, and a collection's own `filterableFields`). Only their numbers get a
# payload index in a vector collection that every tenant shares: an index per field any writer
# sends (5,000 fields in one document would make 5,000 indexes, built inside the write) would make
# one tenant's payloads every tenant's cost. Filters on other fields still hold inside the engine's
# query, read from the point's payload without an index (slower on large shards, never wrong).
FilterableFields = Callable[[str, str], Collection[str]]
MAX_PAYLOAD_INDEXES = 32  # `num.*` indexes per vector collection at most (VIBE_MAX_PAYLOAD_INDEXES)


def fixed_fields(names: Collection[str]) -> FilterableFields:
    """The same declared fields for every tenant and collection (the operator's setting)."""
    frozen = frozenset(names)
    return lambda tenant, collection: frozen


def index_keys(docs: Sequence[StoredDoc], filterable: FilterableFields) -> set[str]:
    """The `num_payload` keys of these documents' numbers in fields declared filterable."""
    out: set[str] = set()
    declared: dict[tuple[str, str], Collection[str]] = {}
    for d in docs:
        where = (d.key.tenant, d.key.collection)
        if where not in declared:
            declared[where] = filterable(*where)
        for name in declared[where]:
            if not name.startswith("_") and any(_number(v) is not None for v in _scalars(d.fields.get(name))):
                out.add(num_field(name))
    return out


def eq_tokens(cond: FieldCondition) -> list[str]:
    """Tokens any of which satisfies an `eq`/`in` condition (empty: nothing can match)."""
    return list(dict.fromkeys(t for v in cond.values if (t := _eq_token(cond.field, v)) is not None))


def key_bounds(cond: FieldCondition) -> tuple[int, int] | None:
    """A range condition as inclusive bounds on `sortable` keys; None when no number fits.
    Exclusive bounds step one key (the next double), so they are exact."""
    lo, hi = MIN_KEY, MAX_KEY
    for bound, inclusive, lower in ((cond.gt, False, True), (cond.gte, True, True),
                                    (cond.lt, False, False), (cond.lte, True, False)):
        if bound is None:
            continue
        if math.isnan(bound):
            return None
        k = sortable(float(bound))
        if lower:
            lo = max(lo, k if inclusive else k + 1)
        else:
            hi = min(hi, k if inclusive else k - 1)
    # Non-finite numbers are never indexed: keep the bounds inside the finite doubles.
    lo, hi = max(lo, sortable(-math.inf) + 1), min(hi, sortable(math.inf) - 1)
    return (lo, hi) if lo <= hi else None


def range_tokens(field: str, lo: int, hi: int) -> list[str]:
    """The fewest trie tokens whose union is exactly the keys in [lo, hi] (at most 15 per end
    per level, plus 16 at the top level)."""
    out: list[str] = []
    level = 0
    while lo <= hi:
        if level == LEVELS - 1:
            out += [_bounded(f"{field}{SEP}r{level:x}{SEP}{p:01x}") for p in range(lo, hi + 1)]
            break
        nlo, nhi = (lo + 15) >> 4, ((hi + 1) >> 4) - 1  # whole groups of 16 at the next level
        width = (64 - 4 * level) // 4
        tok = lambda p, lv=level, w=width: _bounded(f"{field}{SEP}r{lv:x}{SEP}{p:0{w}x}")  # noqa: E731
        if nlo > nhi:
            out += [tok(p) for p in range(lo, hi + 1)]
            break
        out += [tok(p) for p in range(lo, nlo << 4)]
        out += [tok(p) for p in range((nhi + 1) << 4, hi + 1)]
        lo, hi, level = nlo, nhi, level + 1
    return out


def condition_tokens(cond: FieldCondition) -> list[str]:
    """Tokens any of which satisfies `cond` in a trie-coded index (tantivy)."""
    if cond.op == "range":
        bounds = key_bounds(cond)
        return [] if bounds is None else range_tokens(cond.field, *bounds)
    return eq_tokens(cond)


def holds(cond: FieldCondition, tokens: set[str]) -> bool:
    """Whether a document with these (trie) tokens meets `cond` (re-checks beside a query)."""
    return any(t in tokens for t in condition_tokens(cond))


def permits(flt: SearchFilter, key_ref: str, fields: Mapping[str, Any]) -> bool:
    """The metadata part of a filter (conditions and id allow-list) for one document."""
    if flt.ids is not None and key_ref not in {k.ref for k in flt.ids if k.tenant == flt.tenant}:
        return False
    if not flt.where:
        return True
    tokens = set(doc_tokens(fields, trie=True))
    return all(holds(c, tokens) for c in flt.where)


def id_refs(flt: SearchFilter) -> list[str] | None:
    """The allow-list as `collection/id` refs of the filter's tenant (None: no allow-list)."""
    if flt.ids is None:
        return None
    return list(dict.fromkeys(k.ref for k in flt.ids if k.tenant == flt.tenant))


def unsatisfiable(flt: SearchFilter) -> bool:
    """True when no document can pass (an empty allow-list, an `in` of nothing, an empty range):
    engines answer [] without a query."""
    refs = id_refs(flt)
    if refs is not None and not refs:
        return True
    return any(key_bounds(c) is None if c.op == "range" else not eq_tokens(c) for c in flt.where)


__all__: Sequence[str] = ("doc_tokens", "num_payload", "index_keys", "fixed_fields", "num_field",
                          "eq_tokens", "key_bounds", "range_tokens",
                          "condition_tokens", "holds", "permits", "id_refs", "unsatisfiable", "sortable", "num_token")
