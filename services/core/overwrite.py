"""Who may change an existing document (README Security): a writer may overwrite or delete it
only if it may read it under its *current* `_acl`; a new id may be created by any writer. One
implementation for every path that writes: the HTTP routes (services/api/routes_docs.py) and
the MCP tools (services/mcp/reindex.py), so an agent's key cannot do what its HTTP twin may not.

The check and the write hold a per-document lock inside one process (striped per tenant, taken
in a fixed order, so no deadlock); README Security says what two processes leave open."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from services.core.documents import DocumentService
from shared.errors import ErrorCode, VibeError
from shared.model import DocKey, Principal, StoredDoc
from shared.ports import DocumentReader

# The only answer a writer outside a document's ACL ever gets (PUT and bulk items).
OVERWRITE_REFUSED = "this key may not overwrite this document"
STRIPES = 256  # locks per tenant: two ids of one tenant share one with odds 1/256


class _TenantStripes:
    """Each tenant's own stripes. With one table for every tenant, a bulk of 200 ids held
    about half of the 256 locks (all of them from about 1,500 ids) for its whole write, so
    another tenant's single PUT waited behind it more often than not (py-spy: the top wait
    of tenant B's PUTs while tenant A bulked, bench/noisy_tenant.py). A tenant's table lives
    while some thread holds or waits for one of its locks (a count), so the map stays as
    small as the writes in flight."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._tables: dict[str, tuple[list[threading.Lock], int]] = {}

    def enter(self, tenant: str) -> list[threading.Lock]:
        with self._mutex:
            table, users = self._tables.get(tenant) or ([threading.Lock() for _ in range(STRIPES)], 0)
            self._tables[tenant] = (table, users + 1)
            return table

    def leave(self, tenant: str) -> None:
        with self._mutex:
            table, users = self._tables[tenant]
            if users <= 1:
                del self._tables[tenant]
            else:
                self._tables[tenant] = (table, users - 1)

    def tenants(self) -> int:
        with self._mutex:
            return len(self._tables)


_STRIPES = _TenantStripes()


def _stripes(keys: Sequence[DocKey]) -> list[tuple[str, int]]:
    """(tenant, stripe) pairs of `keys`, in the one fixed order every writer takes them."""
    return sorted({(k.tenant, zlib.crc32("\x1f".join(k).encode()) % STRIPES) for k in keys})


@contextmanager
def locked(keys: Sequence[DocKey]) -> Iterator[None]:
    """Hold this process's locks of `keys` (striped per tenant; taken in a fixed order, so no
    deadlock). Another tenant's ids never share a lock with these."""
    wanted = _stripes(keys)
    tables = {t: _STRIPES.enter(t) for t in dict.fromkeys(t for t, _ in wanted)}
    held: list[threading.Lock] = []
    try:
        for tenant, i in wanted:
            tables[tenant][i].acquire()
            held.append(tables[tenant][i])
        yield
    finally:
        for lock in reversed(held):
            lock.release()
        for tenant in tables:
            _STRIPES.leave(tenant)


def refused() -> VibeError:
    return VibeError(ErrorCode.FORBIDDEN, OVERWRITE_REFUSED)


def put_checked(store: DocumentReader, docs: DocumentService, p: Principal, items: Sequence[StoredDoc]) -> list[str]:
    """Write `items` together if `p` may write every one of them (absent, or readable by `p`
    now); otherwise write none and raise `forbidden`. Per item 'created' or 'updated'."""
    keys = list(dict.fromkeys(d.key for d in items))
    with locked(keys):
        current = store.get_docs(keys)
        if any(not cur.readable_by(p) for cur in current.values()):
            raise refused()
        return docs.put(items)


def delete_checked(store: DocumentReader, docs: DocumentService, p: Principal, key: DocKey) -> bool:
    """Delete `key` if it exists and `p` may read it; False otherwise (nothing changes, and an
    unreadable document looks absent)."""
    with locked([key]):
        doc = store.get_doc(key)
        if doc is None or not doc.readable_by(p):
            return False
        return docs.delete(key)
