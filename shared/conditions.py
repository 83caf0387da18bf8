"""A metadata condition on a document field and what it means: the one definition engines are
tested against and the read path re-checks a page with (shared/filters.py parses requests into
these). It imports nothing from the product, so the domain model and the ports can both use it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Scalar = str | int | float | bool


@dataclass(frozen=True)
class FieldCondition:
    """One metadata condition on a top-level document field (`filter` in `/v1/read`).

    A field holding a list matches when any element matches (as in OpenSearch and Qdrant).
    `eq`: `values` has one value; `in`: one or more; `range`: numbers, any of the four bounds.
    Booleans are never numbers here (`True` does not equal `1`)."""

    field: str
    op: str  # "eq" | "in" | "range"
    values: tuple[Scalar, ...] = ()
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


def _same(a: Any, b: Scalar) -> bool:
    if isinstance(b, bool) or isinstance(a, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(b, str) or isinstance(a, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return isinstance(a, int | float) and a == b


def _in_range(a: Any, c: FieldCondition) -> bool:
    if isinstance(a, bool) or not isinstance(a, int | float):
        return False
    return ((c.gt is None or a > c.gt) and (c.gte is None or a >= c.gte)
            and (c.lt is None or a < c.lt) and (c.lte is None or a <= c.lte))


def _element(a: Any, c: FieldCondition) -> bool:
    if c.op == "range":
        return _in_range(a, c)
    return any(_same(a, v) for v in c.values)


def condition_holds(c: FieldCondition, fields: Mapping[str, Any]) -> bool:
    value = fields.get(c.field)
    if isinstance(value, list):
        return any(_element(v, c) for v in value)
    return value is not None and _element(value, c)


def matches(where: Sequence[FieldCondition], fields: Mapping[str, Any]) -> bool:
    """Whether a document's fields meet every condition."""
    return all(condition_holds(c, fields) for c in where)
