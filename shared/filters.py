"""Metadata filters (`filter` in `/v1/read`): the request shape parsed into
`FieldCondition`s (shared/conditions.py holds them and `matches`, what a condition means).

Engines translate the conditions into their own query (inside the query, with the ACL, never
after a top-k); `matches` is the reference they are tested against, and what the read path
uses to re-check a page against the store of record (a document edited between indexing and
the page must not be shown for a filter it no longer meets).

Semantics, as OpenSearch and Qdrant users expect:
- a condition names one top-level field; every condition must hold (AND);
- a field holding a list matches when any element matches;
- equality is by type: strings with strings, numbers with numbers (1 == 1.0), booleans with
  booleans (True is never 1);
- a range holds for numbers only, with any of gt/gte/lt/lte;
- a missing field (or null) matches nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from shared.conditions import FieldCondition, Scalar
from shared.names import MAX_FIELD_CHARS  # one bound for documents and filters

MAX_FIELDS = 16
MAX_IN_VALUES = 100
MAX_STRING_CHARS = 1024
RANGE_OPS = ("gt", "gte", "lt", "lte")


class FilterError(ValueError):
    """A filter the API refuses (400 invalid_params); the message names the field."""


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(f"{where}: numbers must be finite")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise FilterError(f"{where}: strings must be at most {MAX_STRING_CHARS} characters")
        return value
    raise FilterError(f"{where}: a string, number or boolean is expected")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FilterError(f"{where}: a number is expected")
    if not math.isfinite(value):
        raise FilterError(f"{where}: numbers must be finite")
    return float(value)


def _field_name(name: Any) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_FIELD_CHARS:
        raise FilterError(f"filter field names must be 1 to {MAX_FIELD_CHARS} characters")
    if name.startswith("_"):
        raise FilterError(f"filter.{name}: fields starting with '_' cannot be filtered on")
    if any(ord(ch) < 0x20 for ch in name):
        raise FilterError("filter field names must not contain control characters")
    return name


def _condition(name: str, spec: Any) -> FieldCondition:
    where = f"filter.{name}"
    if not isinstance(spec, Mapping):
        return FieldCondition(name, "eq", (_scalar(spec, where),))
    if not spec:
        raise FilterError(f"{where}: an empty condition")
    keys = set(spec)
    unknown = keys - {"eq", "in", *RANGE_OPS}
    if unknown:
        raise FilterError(f"{where}: unknown operator {sorted(unknown)[0]!r} (eq, in, gt, gte, lt, lte)")
    if keys & {"eq", "in"} and len(keys) > 1:
        raise FilterError(f"{where}: 'eq' and 'in' take no other operator")
    if "eq" in spec:
        return FieldCondition(name, "eq", (_scalar(spec["eq"], f"{where}.eq"),))
    if "in" in spec:
        values = spec["in"]
        if not isinstance(values, list) or not values or len(values) > MAX_IN_VALUES:
            raise FilterError(f"{where}.in: a list of 1 to {MAX_IN_VALUES} values is expected")
        return FieldCondition(name, "in", tuple(_scalar(v, f"{where}.in") for v in values))
    bounds = {op: _number(spec[op], f"{where}.{op}") for op in RANGE_OPS if op in spec}
    return FieldCondition(name, "range", (), **bounds)


def parse_filter(raw: Any) -> tuple[FieldCondition, ...]:
    """The request's `filter` object → conditions (sorted by field, so equal filters compare
    and hash equal). None or `{}` → no condition. Raises FilterError on a bad shape."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise FilterError("filter must be an object of field conditions")
    if len(raw) > MAX_FIELDS:
        raise FilterError(f"filter takes at most {MAX_FIELDS} fields")
    return tuple(_condition(_field_name(name), raw[name]) for name in sorted(raw))


def describe(where: Sequence[FieldCondition]) -> list[dict[str, Any]]:
    """A JSON-able canonical form (cursor binding, cache keys); never holds document text."""
    out: list[dict[str, Any]] = []
    for c in where:
        item: dict[str, Any] = {"field": c.field, "op": c.op}
        if c.op == "range":
            item.update({op: getattr(c, op) for op in RANGE_OPS if getattr(c, op) is not None})
        else:
            item["values"] = [[type(v).__name__, v] for v in c.values]
        out.append(item)
    return out
