"""The one rule for every name a client sends: collections, spaces and document/filter field
names. A name reaches store keys, index terms, payload keys and usage rows; an unbounded one
(an 8 kB collection name in a read) would be stored, counted and logged as it came. Every
front door (HTTP paths and bodies, MCP tools, CLI ingest) calls these before anything else.

Collections: `[A-Za-z0-9][A-Za-z0-9._-]{0,127}` (what writes always accepted, so every stored
collection stays addressable; `semantic.edges`, `any` match it). Spaces: the same shape with `@`
(model tags such as `minilm@2`), 64 characters. Fields: 1 to `MAX_FIELD_CHARS` characters
without control characters (JSON allows any string as a key), at most `MAX_DOC_FIELDS` top-level
fields a document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from shared.errors import invalid

COLLECTION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
SPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
# A filter names a field by this many characters at most (shared/filters.py); a document may not
# carry a field no filter could name, nor a name longer than a facet token keeps whole.
MAX_FIELD_CHARS = 64
MAX_DOC_FIELDS = 1_000  # top-level fields of one document (each is a facet token and a payload key)
MAX_SETTINGS_FIELDS = 100  # embedFields / filterableFields of one collection


def _shown(name: object) -> str:
    """A refused name as an error message may quote it: bounded, never the whole 8 kB."""
    return repr(name[:64] if isinstance(name, str) else type(name).__name__)


def is_collection_name(name: object) -> bool:
    return isinstance(name, str) and COLLECTION_RE.fullmatch(name) is not None


def check_collection_name(name: object, field: str = "collection") -> str:
    """The name itself (charset and length); reserved names are the write path's business."""
    if not is_collection_name(name):
        raise invalid(f"invalid collection name {_shown(name)}: 1 to 128 characters of A-Z a-z 0-9 . _ -, "
                      "starting with a letter or digit", field=field)
    assert isinstance(name, str)
    return name


def check_space_name(name: object, field: str = "space") -> str:
    if not isinstance(name, str) or SPACE_RE.fullmatch(name) is None:
        raise invalid(f"invalid space name {_shown(name)}: 1 to 64 characters of A-Z a-z 0-9 . _ - @, "
                      "starting with a letter or digit", field=field)
    return name


def field_name_problem(name: object) -> str | None:
    """Why `name` is not a valid field name (None: it is)."""
    if not isinstance(name, str) or not name or len(name) > MAX_FIELD_CHARS:
        return f"field names must be 1 to {MAX_FIELD_CHARS} characters"
    if any(ord(ch) < 0x20 for ch in name):
        return "field names must not contain control characters"
    return None


def check_field_name(name: object, field: str = "field") -> str:
    problem = field_name_problem(name)
    if problem is not None:
        raise invalid(f"{problem}: {_shown(name)}", field=field)
    assert isinstance(name, str)
    return name


def check_doc_fields(names: Iterable[str]) -> None:
    """A document's top-level field names: each valid, and not too many of them."""
    for count, name in enumerate(names, 1):
        if count > MAX_DOC_FIELDS:
            raise invalid(f"a document has at most {MAX_DOC_FIELDS} top-level fields")
        check_field_name(name)


def check_field_list(raw: object, field: str) -> list[str]:
    """A settings list of field names (`embedFields`, `filterableFields`): unique, bounded."""
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise invalid(f"{field} must be a list of field names", field=field)
    if len(raw) > MAX_SETTINGS_FIELDS:
        raise invalid(f"{field} takes at most {MAX_SETTINGS_FIELDS} field names", field=field)
    for name in raw:
        check_field_name(name, field=field)
        if name.startswith("_"):
            raise invalid(f"{field}: fields starting with '_' are reserved: {_shown(name)}", field=field)
    return list(dict.fromkeys(raw))
