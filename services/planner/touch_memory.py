"""What each query's last touch saw and probed (`PageMemory`), so a repeat whose page has settled
spends nothing past it, and the query key that memory is kept under."""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from shared.model import DocKey


class _Seen(NamedTuple):
    page: frozenset[DocKey]  # the page at the query's last touch
    probe: frozenset[DocKey]  # what that touch probed beyond the page
    probed: int  # probing touches so far
    touches: int  # touches so far


class PageMemory:
    """What each query's last touch saw and probed, per query key (a hash of tenant, ACL,
    collection and query: one caller's memory never answers another's), bounded LRU.

    A repeat is settled when its page holds the same documents as at its last touch, or when
    none of what that touch probed beyond the page (dig, similar) made it onto the page: the
    last spend did not pay, so more of the same is unlikely to."""

    def __init__(self, size: int = 10_000):
        self.size = size
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def settled(self, key: str, page: Sequence[DocKey], rounds: int = 0) -> bool | None:
        """None the first time this query touches; else whether its page is settled (also
        once it has probed `rounds` times, when `rounds` > 0)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                return None
            self._seen.move_to_end(key)
        now = frozenset(page)
        return now == seen.page or (bool(seen.probe) and not (seen.probe & now)) or 0 < rounds <= seen.probed

    def touches(self, key: str) -> int:
        """How many times this query's touch was remembered."""
        with self._lock:
            seen = self._seen.get(key)
        return seen.touches if seen else 0

    def remember(self, key: str, page: Sequence[DocKey], probe: Sequence[DocKey]) -> None:
        with self._lock:
            seen = self._seen.pop(key, None)
            probed, touches = (seen.probed, seen.touches) if seen else (0, 0)
            self._seen[key] = _Seen(frozenset(page), frozenset(probe), probed + (1 if probe else 0), touches + 1)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)


_MEMORIES: weakref.WeakKeyDictionary[object, PageMemory] = weakref.WeakKeyDictionary()
_MEMORIES_LOCK = threading.Lock()


def memory_for(owner: object) -> PageMemory:
    """One page memory per planner (process-local: another replica starts without it, which
    only means one more dig there)."""
    with _MEMORIES_LOCK:
        mem = _MEMORIES.get(owner)
        if mem is None:
            mem = _MEMORIES[owner] = PageMemory()
        return mem


def query_key(tenant: str, acl: Sequence[str], collection: str, text: str, limit: int) -> str:
    h = hashlib.sha256()
    for part in (tenant, collection, str(limit), *sorted(acl), "\x00", text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()

