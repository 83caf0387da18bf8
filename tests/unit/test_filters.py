"""shared/filters.py: the one definition of a metadata filter's meaning (engines are tested
against it; the read path re-checks a page with it) and the request shape's bounds."""

from __future__ import annotations

from typing import Any

import pytest

from shared.conditions import matches
from shared.filters import MAX_FIELDS, FilterError, parse_filter
from shared.ports import FieldCondition

DOC: dict[str, Any] = {"year": 2001, "score": 0.5, "lang": "en", "tags": ["a", "b", 3], "peer": True,
                       "one": 1, "nested": {"x": 1}, "none": None, "syear": "2001"}


@pytest.mark.parametrize(("flt", "want"), [
    ({}, True),
    ({"year": 2001}, True), ({"year": 2001.0}, True), ({"year": 2002}, False),
    ({"syear": 2001}, False), ({"year": "2001"}, False),
    ({"peer": True}, True), ({"peer": 1}, False), ({"one": True}, False), ({"one": 1}, True),
    ({"tags": "b"}, True), ({"tags": 3}, True), ({"tags": "c"}, False), ({"tags": {"in": ["c", "a"]}}, True),
    ({"year": {"gte": 2001}}, True), ({"year": {"gt": 2001}}, False), ({"year": {"lt": 2001.5, "gt": 2000}}, True),
    ({"score": {"lte": 0.5}}, True), ({"syear": {"gte": 0}}, False), ({"peer": {"gte": 0}}, False),
    ({"tags": {"gte": 3, "lte": 3}}, True),
    ({"missing": 1}, False), ({"none": 1}, False), ({"nested": 1}, False),
    ({"year": 2001, "lang": "en"}, True), ({"year": 2001, "lang": "de"}, False),
])
def test_matches(flt: dict[str, Any], want: bool) -> None:
    assert matches(parse_filter(flt), DOC) is want


def test_parse_is_canonical() -> None:
    assert parse_filter({"b": 1, "a": {"in": ["x"]}}) == (FieldCondition("a", "in", ("x",)),
                                                         FieldCondition("b", "eq", (1,)))
    assert parse_filter({"a": {"gte": 1, "lt": 2}}) == (FieldCondition("a", "range", gte=1.0, lt=2.0),)
    assert parse_filter(None) == ()


@pytest.mark.parametrize("flt", [
    [], "a=1", {"_acl": "x"}, {"": 1}, {"x" * 65: 1}, {"a\x01": 1}, {"a": None}, {"a": [1]}, {"a": {}},
    {"a": {"in": []}}, {"a": {"in": "x"}}, {"a": {"in": list(range(101))}}, {"a": {"in": [None]}},
    {"a": {"eq": 1, "gt": 0}}, {"a": {"gte": "1"}}, {"a": {"gte": True}}, {"a": {"gte": float("inf")}},
    {"a": {"like": "x"}}, {"a": "x" * 1025}, {f"f{i}": 1 for i in range(MAX_FIELDS + 1)},
])
def test_bad_filters_are_refused(flt: Any) -> None:
    with pytest.raises(FilterError):
        parse_filter(flt)
