"""The one name rule (shared/names.py): collections, spaces, fields; and that the OpenAPI
declaration and the other checks say the same as it."""

from __future__ import annotations

import re

import pytest

from services.api import schemas
from services.core.documents import check_collection
from shared.errors import ErrorCode, VibeError
from shared.filters import FilterError, parse_filter
from shared.names import (
    MAX_DOC_FIELDS,
    MAX_FIELD_CHARS,
    check_collection_name,
    check_doc_fields,
    check_field_list,
    check_space_name,
)


@pytest.mark.parametrize("name", ["a", "semantic.edges", "any", "Notes_2024-v1.0", "x" * 128, "9lives"])
def test_collection_names_accepted(name: str) -> None:
    assert check_collection_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 129, "c" * 8192, ".hidden", "-x", "a b", "a/b", "é", "a\x00", 7, None])
def test_collection_names_refused_with_a_bounded_message(name: object) -> None:
    with pytest.raises(VibeError) as e:
        check_collection_name(name)
    assert e.value.code is ErrorCode.INVALID_PARAMS and len(e.value.message) < 300


def test_writes_also_refuse_reserved_names() -> None:
    for name in ("any", "mcp-task-abc", "MCP-TASK-x", "x" * 129):
        with pytest.raises(VibeError):
            check_collection(name)


def test_the_openapi_pattern_is_the_rule() -> None:
    pattern = re.compile(schemas.COLLECTION_NAME["pattern"])
    for name in ("a", "x" * 128, "semantic.edges", "x" * 129, "a b", "-a", ""):
        assert bool(pattern.fullmatch(name)) == (name != "" and check_ok(name)), name


def check_ok(name: str) -> bool:
    try:
        check_collection_name(name)
        return True
    except VibeError:
        return False


def test_space_names() -> None:
    assert check_space_name("minilm@2") == "minilm@2"
    for bad in ("", "x" * 65, "a b", "@a"):
        with pytest.raises(VibeError):
            check_space_name(bad)


def test_document_fields_are_bounded_like_filters() -> None:
    check_doc_fields(["title", "x" * MAX_FIELD_CHARS])
    for bad in (["x" * (MAX_FIELD_CHARS + 1)], ["a\nb"], [""], [f"f{i}" for i in range(MAX_DOC_FIELDS + 1)]):
        with pytest.raises(VibeError):
            check_doc_fields(bad)
    with pytest.raises(FilterError):  # a filter cannot name a field longer than a document may have
        parse_filter({"x" * (MAX_FIELD_CHARS + 1): 1})


def test_settings_field_lists() -> None:
    assert check_field_list(["a", "b", "a"], "embedFields") == ["a", "b"]
    for bad in ("title", [1], ["_acl"], [f"f{i}" for i in range(101)]):
        with pytest.raises(VibeError):
            check_field_list(bad, "embedFields")
