"""Who may change an existing document (README Security): a writer may overwrite or delete it
only if it may read it under its *current* `_acl`; a new id may be created by any writer. One
implementation for every path that writes: the HTTP routes (services/api/routes_docs.py) and
the MCP tools (services/mcp/reindex.py), so an agent's key cannot do what its HTTP twin may not.

The check and the write hold a per-document lock inside one process (striped, taken in a fixed
order, so no deadlock); README Security says what two processes leave open."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from services.core.documents import DocumentService
from shared.errors import ErrorCode, VibeError
from shared.model import DocKey, Principal, StoredDoc
from shared.ports import DocumentStore

# The only answer a writer outside a document's ACL ever gets (PUT and bulk items).
OVERWRITE_REFUSED = "this key may not overwrite this document"
_STRIPES = [threading.Lock() for _ in range(256)]


@contextmanager
def locked(keys: Sequence[DocKey]) -> Iterator[None]:
    """Hold this process's locks of `keys` (striped; taken in a fixed order, so no deadlock)."""
    stripes = sorted({zlib.crc32("\x1f".join(k).encode()) % len(_STRIPES) for k in keys})
    held: list[threading.Lock] = []
    try:
        for i in stripes:
            _STRIPES[i].acquire()
            held.append(_STRIPES[i])
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def refused() -> VibeError:
    return VibeError(ErrorCode.FORBIDDEN, OVERWRITE_REFUSED)


def put_checked(store: DocumentStore, docs: DocumentService, p: Principal, items: Sequence[StoredDoc]) -> list[str]:
    """Write `items` together if `p` may write every one of them (absent, or readable by `p`
    now); otherwise write none and raise `forbidden`. Per item 'created' or 'updated'."""
    keys = list(dict.fromkeys(d.key for d in items))
    with locked(keys):
        current = store.get_docs(keys)
        if any(not cur.readable_by(p) for cur in current.values()):
            raise refused()
        return docs.put(items)


def delete_checked(store: DocumentStore, docs: DocumentService, p: Principal, key: DocKey) -> bool:
    """Delete `key` if it exists and `p` may read it; False otherwise (nothing changes, and an
    unreadable document looks absent)."""
    with locked([key]):
        doc = store.get_doc(key)
        if doc is None or not doc.readable_by(p):
            return False
        return docs.delete(key)
