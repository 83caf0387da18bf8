"""The sweeps' cursors as the store keeps them (`sweep_cursor`: a tuple of strings), read back
into the shape each store query takes. A stored cursor of another shape (none yet, or one
another version of the scheduler wrote) starts the pass over instead of failing the stage at
every tick."""

from __future__ import annotations

from shared.model import DocKey
from shared.ports import CodeCursor, RowCursor

ColdCode = tuple[str, str, str]  # tenant, space, content hash


def row_cursor(stored: tuple[str, ...] | None) -> RowCursor | None:
    if stored is None or len(stored) != 4:
        return None
    tenant, collection, doc_id, space = stored
    return tenant, collection, doc_id, space


def code_cursor(stored: tuple[str, ...] | None) -> ColdCode | None:
    if stored is None or len(stored) != 3:
        return None
    tenant, space, content_hash = stored
    return tenant, space, content_hash


def hash_cursor(stored: tuple[str, ...] | None) -> CodeCursor | None:
    if stored is None or len(stored) != 3:
        return None
    tenant, content_hash, space = stored
    return tenant, content_hash, space


def doc_cursor(stored: tuple[str, ...] | None) -> DocKey | None:
    if stored is None or len(stored) != 3:
        return None
    return DocKey(*stored)


def seq_cursor(stored: tuple[str, ...] | None) -> int | None:
    """A change-log seq."""
    if stored is None or len(stored) != 1 or not stored[0].isdigit():
        return None
    return int(stored[0])
