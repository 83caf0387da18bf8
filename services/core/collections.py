"""Whole-collection operations every front door shares: removing a collection by pages, and
deleting the documents of a filter the caller may read.

A collection delete runs page by page (`VIBE_COLLECTION_DELETE_PAGE` documents a transaction,
each page logged as deletes, so every index and replica follows). A request does a few pages
itself, so a small collection is gone when it answers; a larger one goes on in a background
thread of the process that took it, under a cross-process lease (one deleter per collection at a
time), and any replica's repeated DELETE reports progress or resumes it after a crash.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.conditions import matches
from shared.model import DocKey, Principal
from shared.ports import ColdRow, ColdStore, FieldCondition, StoreOfRecord

log = logging.getLogger("vibe.collections")

KEY_SEP = "\x1f"  # LifecycleStore.keys_after's cursor: collection, this, doc id
REQUEST_PAGES = 4  # pages a DELETE request removes itself before handing over to a thread


@dataclass
class Deletion:
    """Progress of one collection's removal in this process."""

    tenant: str
    collection: str
    deleted: int = 0
    done: bool = False
    running: bool = False


class CollectionDeleter:
    def __init__(self, store: StoreOfRecord, cold: ColdStore | None, after_page: Callable[[], object],
                 page: int = 500):
        self.store = store
        self.cold = cold
        self.after_page = after_page  # the index followers' catch-up: deletes reach the indexes
        self.page = page
        self._jobs: dict[tuple[str, str], Deletion] = {}
        self._lock = threading.Lock()

    def _lease(self, tenant: str, collection: str) -> str:
        return f"collection-delete:{tenant}:{collection}"

    def delete(self, tenant: str, collection: str) -> Deletion:
        """Remove up to `REQUEST_PAGES` pages now; if more is left, go on in a thread. Returns the
        progress as it stands when the request answers."""
        key = (tenant, collection)
        with self._lock:
            was = self._jobs.get(key)
            if was is not None and was.running:
                return was  # this process's thread is on it
            # a deletion this process left (another process held the lease, or a page failed)
            job = self._jobs[key] = Deletion(tenant, collection, was.deleted if was else 0, running=True)
        try:
            self._run(job, REQUEST_PAGES)
        except BaseException:
            job.running = False
            raise
        if job.done:
            with self._lock:
                self._jobs.pop(key, None)
        elif job.running:
            threading.Thread(target=self._background, args=(job,), name=f"collection-delete-{collection[:32]}",
                             daemon=True).start()
        return job

    def _background(self, job: Deletion) -> None:
        try:
            self._run(job, None)
        except Exception:  # noqa: BLE001 - the next DELETE resumes it
            log.warning("collection delete failed", extra={"collection": job.collection}, exc_info=True)
            job.running = False
        if job.done:
            with self._lock:
                if self._jobs.get((job.tenant, job.collection)) is job:
                    del self._jobs[(job.tenant, job.collection)]

    def _run(self, job: Deletion, pages: int | None) -> None:
        """Pages under the collection's lease; leaves `running` False when another process holds
        it (that process is deleting) or when the end is reached."""
        with self.store.lease(self._lease(job.tenant, job.collection)) as granted:
            if not granted:
                job.running = False
                return
            n = 0
            while pages is None or n < pages:
                removed, cold = self.store.delete_collection_page(job.tenant, job.collection, self.page)
                self._drop_cold(cold)
                if removed:
                    self.after_page()
                    job.deleted += removed
                    n += 1
                    continue
                self.store.forget_collection(job.tenant, job.collection)
                job.done, job.running = True, False
                return

    def _drop_cold(self, rows: Sequence[ColdRow]) -> None:
        """The cold copies' bytes (their entries are gone already; a copy left by a crash here is
        the cold store's orphan sweep's)."""
        if self.cold is None:
            return
        for tenant, content_hash, space, _ref in rows:
            try:
                self.cold.delete(tenant, space, content_hash)
            except Exception:  # noqa: BLE001 - the orphan sweep removes it later
                log.warning("cold copy not deleted", exc_info=True)


@dataclass
class FilterDeletion:
    deleted: int
    examined: int
    after: str | None  # the last id examined: the next call goes on after it (None: the end was reached)


def delete_matching(store: StoreOfRecord, principal: Principal, collection: str, where: Sequence[FieldCondition],
                    after: str | None, limit: int, examine: int,
                    delete: Callable[[Sequence[DocKey], Callable[[DocKey], bool]], int]) -> FilterDeletion:
    """Of the collection's documents after the id `after` (id order), at most `examine`, delete those
    the caller may read and the filter matches, at most `limit`. The decision is made on the
    store of record (an index may lag an ACL change); `delete(keys, still)` deletes under the
    documents' write locks, re-checking each with `still` there, and returns how many went."""
    keys = store.keys_after(principal.tenant, collection, f"{collection}{KEY_SEP}{after}" if after else "", examine)
    docs = store.get_docs(keys)

    def eligible(key: DocKey) -> bool:
        doc = store.get_doc(key) if key not in docs else docs[key]
        return doc is not None and doc.readable_by(principal) and matches(where, doc.fields)

    chosen: list[DocKey] = []
    last: DocKey | None = None
    for k in keys:
        last = k
        if eligible(k):
            chosen.append(k)
            if len(chosen) >= limit:
                break
    docs.clear()  # the re-check under the lock reads the documents again
    deleted = delete(chosen, eligible) if chosen else 0
    examined = keys.index(last) + 1 if last is not None else 0
    ended = last is None or (len(keys) < examine and last == keys[-1])
    return FilterDeletion(deleted, examined, None if ended or last is None else last.doc_id)
