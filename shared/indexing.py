"""Keeps the lexical and vector indexes in step with the store's change log.

The store is the system of record; indexes are followers. Each `sync()` applies the changes
after the follower's position and then records the new position, so a crash between the two
replays a few idempotent upserts instead of losing a write, and a deleted index is rebuilt from
the log on the next start.

Where the position lives depends on who else writes the index:
- an EMBEDDED index (tantivy, qdrant-edge) is private to its process and data dir: the position
  is a file beside it (`FilePosition`), and every process follows the log on its own. While one
  thread applies, another tenant's writer or reader applies its own tenant's pending changes
  ahead of the log's order (`_apply_ahead`) instead of waiting behind other tenants' work;
- a SHARED index (OpenSearch, a Qdrant server) is written by every API replica: the position
  lives in the store (`StorePosition`), so a new replica starts where the others are instead
  of replaying the whole log, and only the holder of a cross-process lease applies. One
  applier at a time is not an optimisation but a correctness rule: the follower applies each
  changed key's CURRENT state, and two appliers can interleave as A reads doc X (v1), B reads
  X (v2) and writes v2, A writes v1: the index keeps v1 while both positions move past it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Protocol

from shared.edges import is_edge
from shared.errors import IndexUnavailable
from shared.metrics import METRICS
from shared.model import DocKey, StoredDoc
from shared.ports import Change, DocumentStore, LexicalIndex, LifecycleStore, Rebuildable, VectorIndex

log = logging.getLogger("vibe.indexing")

STRIPES = 64  # per-tenant apply locks of a private index, shared by tenants that hash alike
AHEAD_BATCH = 1000


class Position(Protocol):
    """Where a follower has applied the change log up to, and who may apply next."""

    def load(self) -> int: ...

    def save(self, seq: int) -> None: ...

    def reset(self) -> None:
        """Back to 0: the index is rebuilt from the whole log."""

    def lease(self) -> AbstractContextManager[bool]:
        """Non-blocking: yields whether this process may apply now."""


class FilePosition:
    """Per-process position in a file of the data dir (embedded indexes); nobody else applies
    to the index, so the lease is always granted."""

    def __init__(self, path: Path):
        self.path = path

    def load(self) -> int:
        """An absent or unreadable position is 0: the whole log is replayed, which is idempotent."""
        try:
            return int(self.path.read_text())
        except (OSError, ValueError):
            return 0

    def save(self, seq: int) -> None:
        # A new file renamed over the old one: a reader, or a restart after a kill, never sees a
        # half-written position (truncate-then-write left an empty file in between).
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(str(seq))
        os.replace(tmp, self.path)

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)

    @contextmanager
    def lease(self) -> Iterator[bool]:
        yield True


class StorePosition:
    """Position shared by every process through the store (shared indexes). Read again at each
    sync, since other processes advance it; saved only forward; the lease is the store's
    cross-process lock for `name`."""

    def __init__(self, store: DocumentStore, name: str):
        self.store = store
        self.name = name

    def load(self) -> int:
        return self.store.follower_position(self.name)

    def save(self, seq: int) -> None:
        self.store.advance_follower_position(self.name, seq)

    def reset(self) -> None:
        self.store.reset_follower_position(self.name)

    def lease(self) -> AbstractContextManager[bool]:
        return self.store.follower_lease(self.name)


class IndexFollower:
    """Follows the change log into one index set (a lexical index, a vector index or both)
    from one position."""

    def __init__(
        self,
        store: DocumentStore,
        lexical: LexicalIndex | None,
        vectors: VectorIndex | None,
        position: Position,
        space: str,
        spaces: Callable[[str], set[str]] | None = None,
    ):
        self.store = store
        self.lexical = lexical
        self.vectors = vectors
        self.space = space
        # The spaces a tenant reads or builds (shared/spaces.py); a vector change of another space
        # (a retired one) is applied to that space's index too. Per tenant: one tenant's many
        # spaces must not multiply the work of applying another tenant's changes.
        self.spaces = spaces
        self.position = position
        self._lock = threading.Lock()  # threads of this process wait for each other, not skip
        self._schema_checked = False  # once per process: the index's layout matches this code
        # A private index (embedded profile) may apply one tenant's pending changes ahead of the
        # log's order (`_apply_ahead`): the keys of two tenants never meet, and each apply writes
        # a key's current state. Every apply of a tenant's keys holds that tenant's stripe, so
        # two appliers never interleave on one key (the race in this module's docstring).
        self._per_tenant = isinstance(position, FilePosition)
        self._stripes = [threading.Lock() for _ in range(STRIPES)]
        self._ahead: dict[str, int] = {}  # tenant -> newest of its changes applied ahead
        self._ahead_lock = threading.Lock()
        self._generation = 0  # moved by every reset: an apply ahead that straddles one is void
        self._orderer: threading.Thread | None = None
        self._pass_wanted = threading.Event()

    @property
    def seq(self) -> int:
        return self.position.load()

    @property
    def label(self) -> str:
        """What metrics call this follower: a shared index's position name, or "embedded"."""
        return self.position.name if isinstance(self.position, StorePosition) else "embedded"

    def lag(self) -> float:
        """Committed changes not applied yet (NaN when the store cannot be asked: a scrape
        must not fail because the database is briefly away)."""
        try:
            return float(max(0, self.store.change_log_head() - self.seq))
        except Exception:  # noqa: BLE001 - any store error reads as "unknown"
            return float("nan")

    def sync(self, batch: int = 5000, wait: float = 0.0, tenant: str | None = None) -> int:
        """Apply every pending change if this process holds the lease; returns how many were
        applied (0 when another process is applying: its applier also applies ours).

        After releasing the lease, look once more: a change committed after the holder's last
        read, whose writer found the lease taken and skipped, would otherwise wait for the next
        sync anywhere. Every release is followed by such a look, so the last holder sees it.

        `wait` (writers): when another process holds the lease, wait up to that many seconds
        for the position to reach the log's head as first refused (the caller's write is in
        it), so that a write (an ACL that revokes a reader, a delete) is in the index before
        the write returns.

        `tenant`: the caller needs only that tenant's changes applied. While another thread of
        this process applies, it stops waiting as soon as that applier's position passes the
        tenant's newest change, instead of waiting for the whole drain (another tenant's bulk
        and every vector its embeddings produced) and then looking again itself."""
        applied = 0
        target: int | None = None
        deadline = time.monotonic() + wait
        if not self._acquire(tenant):
            return 0
        try:
            if not self._schema_checked:
                applied += self._ensure_schema(batch)
            # A private index's caller that needs one tenant's changes applies the log up to that
            # tenant's newest change, not to the head: while another tenant's pipeline keeps
            # adding changes (its embeddings), a drain to the head could keep this caller applying
            # for them. What is left is applied by the next sync (the pipeline's own, after each
            # batch). A shared index's holder drains to the head: writers of other processes that
            # found the lease taken count on it.
            until = (self.store.change_log_head(tenant)
                     if tenant is not None and isinstance(self.position, FilePosition) else None)
            while True:
                with self.position.lease() as granted:
                    if granted:
                        done, seq = self._drain(batch, until=until)
                        applied += done
                if granted:
                    # A private position (embedded indexes) has no other applier to have skipped
                    # a change meanwhile: this process's writers wait on `_lock` instead.
                    if isinstance(self.position, FilePosition) or not self.store.changes_since(seq, 1):
                        return applied
                elif wait <= 0 or time.monotonic() >= deadline:
                    return applied
                else:
                    target = self.store.change_log_head() if target is None else target
                    if self.position.load() >= target:
                        return applied
                    time.sleep(0.01)  # the holder is applying; its final look covers our change
        finally:
            self._lock.release()

    def _acquire(self, tenant: str | None) -> bool:
        """The apply lock; with `tenant`, False as soon as the index is past that tenant's newest
        change (another thread's apply covered it) while the lock is held elsewhere."""
        if tenant is None:
            return self._lock.acquire()
        if self._lock.acquire(timeout=0.005):
            return True
        # Another thread is applying (another tenant's bulk, the pipeline's vectors): this
        # tenant's own changes go in ahead of them, and the ordered pass follows off this thread.
        if self._per_tenant and self._schema_checked and self._apply_ahead(tenant):
            self._wake_ordered_pass()
            return False
        while not self._lock.acquire(timeout=0.005):
            if self._past(tenant):
                return False
        return True

    def _wake_ordered_pass(self) -> None:
        """The log's ordered pass after an apply ahead, on a thread of its own: the position moves
        past the changes applied ahead (lag and convergence read it) without a request doing
        other tenants' work."""
        with self._ahead_lock:
            if self._orderer is None:
                self._orderer = threading.Thread(target=self._ordered_passes, daemon=True,
                                                 name=f"index-follower-{self.label}")
                self._orderer.start()
        self._pass_wanted.set()

    def _ordered_passes(self) -> None:
        while True:
            self._pass_wanted.wait()
            self._pass_wanted.clear()
            if not self.catch_up():
                time.sleep(1.0)  # the index away: logged and counted by catch_up; the next wake retries

    def catch_up(self, wait: float = 0.0, tenant: str | None = None) -> bool:
        """`sync` for request paths: an index that cannot be written right now (a server away)
        must not fail a read or an accepted write. The position stays, so the next sync applies
        what this one could not; reads re-check every page against the store meanwhile.

        With `tenant` (a read, which sees only its tenant's documents): nothing to do when the
        index is already past that tenant's newest change. Without this look, every read of
        every tenant queued behind the lock while one tenant's bulk was being applied."""
        if tenant is not None and self._past(tenant):
            return True
        try:
            self.sync(wait=wait, tenant=tenant)
            return True
        except Exception:  # noqa: BLE001 - logged and counted; the request goes on
            log.warning("index follower could not catch up", extra={"follower": self.label}, exc_info=True)
            METRICS.follower_errors.labels(follower=self.label).inc()
            return False

    def applied(self, tenant: str) -> int:
        """How far the index holds `tenant`'s changes: the position, or further where its own
        changes were applied ahead of other tenants'."""
        return max(self.position.load(), self._ahead.get(tenant, 0))

    def _past(self, tenant: str) -> bool:
        try:
            return self._schema_checked and self.applied(tenant) >= self.store.change_log_head(tenant)
        except Exception:  # noqa: BLE001 - the store away: the sync says so, logged and counted
            return False

    def _stripe(self, tenant: str) -> threading.Lock:
        return self._stripes[zlib.crc32(tenant.encode("utf-8", "surrogatepass")) % STRIPES]

    def _apply_ahead(self, tenant: str) -> bool:
        """Apply `tenant`'s pending changes now, ahead of other tenants' changes still waiting in
        the log: its writer or reader does not wait for them (another tenant's bulk, the vectors
        its embeddings made). The log's own pass then moves the position past them without
        writing them again (`_apply`). False when it could not (a change the index refuses, the
        index away): the caller takes the ordered path, which quarantines or keeps the position."""
        generation = self._generation
        try:
            with self._stripe(tenant):
                seq = self.applied(tenant)
                while changes := self.store.changes_since(seq, AHEAD_BATCH, tenant=tenant):
                    self._apply_group(changes)
                    seq = changes[-1].seq
                    METRICS.follower_applied_ahead.inc(len(changes))
                with self._ahead_lock:  # inside the stripe: the tenant's next caller starts after it
                    if generation != self._generation:
                        return False
                    self._ahead[tenant] = max(seq, self._ahead.get(tenant, 0))
                    if len(self._ahead) > 10_000:  # bounded: what the log's pass has reached is dropped
                        done = self.position.load()
                        self._ahead = {t: s for t, s in self._ahead.items() if s > done}
        except Exception:  # noqa: BLE001 - the ordered path sorts it out and logs it
            return False
        return True

    def _indexes(self) -> list[LexicalIndex | VectorIndex]:
        return [p for p in (self.lexical, self.vectors) if p is not None]

    def outdated(self) -> list[str]:
        """Names of this follower's indexes written by another schema version."""
        return [type(p).__name__ for p in self._indexes() if isinstance(p, Rebuildable) and p.schema_outdated()]

    def _ensure_schema(self, batch: int) -> int:
        """Once per process, before the first sync: an index written by another schema version
        (new filter fields, another analyzer) is reset and rebuilt from the whole change log,
        under the lease. Another process holding the lease (a replica already rebuilding a shared
        index) is left to it: this process looks again at its next sync."""
        if not self.outdated():
            self._schema_checked = True
            return 0
        with self.position.lease() as granted:
            if not granted:
                return 0
            stale = [p for p in self._indexes() if isinstance(p, Rebuildable) and p.schema_outdated()]
            applied = self._reset_and_drain(stale, batch) if stale else 0
        self._schema_checked = True
        return applied

    def _reset_and_drain(self, reset: Sequence[Rebuildable], batch: int) -> int:
        """Under the lease: reset the given indexes and the position, then replay the log."""
        names = [type(p).__name__ for p in reset]
        log.info("index rebuild started", extra={"follower": self.label, "indexes": names,
                                                 "changes": self.store.change_log_head()})
        with self._all_stripes():  # no apply ahead writes into an index being emptied
            for p in reset:
                p.reset_schema()
            self.position.reset()
            self._forget_ahead()
        started = time.monotonic()
        applied = self._drain(batch, progress=True)[0]
        METRICS.index_rebuilds.labels(follower=self.label).inc()
        log.info("index rebuild done", extra={"follower": self.label, "applied": applied,
                                              "seconds": round(time.monotonic() - started, 1)})
        return applied

    def rebuild(self, wait: float, batch: int = 5000, reset_schema: bool = False) -> int | None:
        """Reset the position and apply the whole log, both under one lease (waiting up to `wait`
        seconds for it), so no applier saves an old position over the reset; returns how many
        changes were applied, None if another process kept the lease. With `reset_schema` the
        indexes are emptied first (and stamped with this code's schema version), so documents
        the log no longer names cannot stay behind. Run by an operator (`vibe-semantic
        reindex-follower`, `rebuild-index`), so the replay does not land in a replica's request."""
        deadline = time.monotonic() + wait
        with self._lock:
            while True:
                with self.position.lease() as granted:
                    if granted:
                        if reset_schema:
                            reset = [p for p in self._indexes() if isinstance(p, Rebuildable)]
                            applied = self._reset_and_drain(reset, batch)
                            self._schema_checked = True
                            return applied
                        self.position.reset()
                        return self._drain(batch)[0]
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.1)

    def _drain(self, batch: int, progress: bool = False, until: int | None = None) -> tuple[int, int]:
        """Under the lease: apply from the current position to the end of the log (with `until`,
        to that seq). With `progress` (a rebuild), each batch is logged and
        `vibe_index_rebuild_remaining_changes` tells how far the replay is from the log's head."""
        applied, seq = 0, self.position.load()
        head = self.store.change_log_head() if progress else 0
        gauge = METRICS.index_rebuild_remaining.labels(follower=self.label)
        while (until is None or seq < until) and (changes := self.store.changes_since(seq, batch)):
            if until is not None and changes[-1].seq > until:
                changes = [c for c in changes if c.seq <= until]
                if not changes:
                    break
            try:
                self._apply(changes)
            except IndexUnavailable:
                raise  # the server, not the changes: the batch again at the next sync, one request
            except Exception as e:  # noqa: BLE001 - sorted out change by change below
                self._quarantine(changes, e)
            seq = changes[-1].seq
            self.position.save(seq)
            applied += len(changes)
            if progress:
                gauge.set(max(0, head - seq))
                log.info("index rebuild progress", extra={"follower": self.label, "applied": applied,
                                                          "seq": seq, "head": head})
        if progress:
            gauge.set(0)
        return applied, seq

    def _quarantine(self, changes: list[Change], first: Exception) -> None:
        """One change the index refuses for good (an immense term, a request too large) must not
        hold back every later change of every tenant. Applied one by one, the
        changes that fail while others succeed are quarantined: their keys are removed from the
        index (fail closed: no stale ACL stays searchable), the change goes to the dead letters
        (GET /semantic/deadLetters, vibe_follower_dead_letters_total) and the log moves on. When
        every change fails, the index is down, not the changes: the error propagates and the
        position stays, so nothing is skipped."""
        failed: list[tuple[Change, Exception]] = []
        answered: list[Change] = []
        for c in changes:
            if self.vectors is None and c.op not in ("doc", "delete"):
                # A vector change asks nothing of a lexical index: its "success" proves nothing, and
                # counted as one it would make a server that refuses everything (because it is
                # away) look like one refusing the batch's documents for good, quarantining them.
                continue
            try:
                self._apply([c])
                answered.append(c)
            except IndexUnavailable:
                raise
            except Exception as e:  # noqa: BLE001 - judged below
                failed.append((c, e))
        if not answered:
            raise first
        for c, err in self._refused_for_good(failed, answered[-1]):
            log.warning("index change quarantined", extra={"follower": self.label, "seq": c.seq, "op": c.op,
                                                            "error": str(err)[:200]})
            METRICS.dead_letters.labels(follower=self.label).inc()
            with suppress(Exception):
                if self.lexical is not None:
                    self.lexical.apply([], [c.key])
                if self.vectors is not None:
                    self.vectors.delete(c.space or self.space, [c.key])
            ledger = self.store
            if isinstance(ledger, LifecycleStore):
                ledger.record_dead_letter(self.label, c.seq, c.key, c.op, f"{type(err).__name__}: {err}", time.time())

    def _refused_for_good(self, failed: list[tuple[Change, Exception]],
                          probe: Change) -> list[tuple[Change, Exception]]:
        """The failed changes the index refuses while it answers others. A server that came back
        (or went away) in the middle of the pass failed the changes on one side of that moment:
        quarantined, those acknowledged documents would never be indexed (an OpenSearch restart
        under load in the process cluster does this). So each is tried again, and one that fails again is
        judged by re-applying `probe`, a change the index took in this pass (idempotent: the
        document's current state): if the index refuses that too, it is away, the error
        propagates and the position stays."""
        refused = []
        for c, _first in failed:
            try:
                self._apply([c])
                continue  # the index is back
            except Exception as e:  # noqa: BLE001 - judged by the probe
                err = e
            self._apply([probe])  # raises while the index is away: nothing is quarantined
            refused.append((c, err))
        return refused

    @contextmanager
    def _all_stripes(self) -> Iterator[None]:
        for lock in self._stripes:  # always in this order: nobody else holds two
            lock.acquire()
        try:
            yield
        finally:
            for lock in self._stripes:
                lock.release()

    def _forget_ahead(self) -> None:
        with self._ahead_lock:
            self._generation += 1
            self._ahead.clear()

    def _apply(self, changes: list[Change]) -> None:
        if not self._per_tenant:
            self._apply_group(changes)
            return
        for tenant, theirs in _by_tenant(changes).items():
            with self._stripe(tenant):
                # what an apply ahead wrote already (each key as it stood then, which is at least
                # as new as these changes) is not written again: a second write would only churn
                # the index (deleted copies count in BM25 statistics until a merge)
                ahead = self._ahead.get(tenant, 0)
                if todo := [c for c in theirs if c.seq > ahead]:
                    self._apply_group(todo)

    def _apply_group(self, changes: list[Change]) -> None:
        keys = list(dict.fromkeys(c.key for c in changes))
        docs = self.store.get_docs(keys)
        gone = [k for k in keys if k not in docs]
        if self.lexical is not None:
            # edges are found by the store's edge lookups, never by a search (shared/edges.py)
            touched = {c.key for c in changes if c.op == "doc" and not is_edge(c.key)}
            self.lexical.apply([docs[k] for k in keys if k in touched and k in docs], gone)
        if self.vectors is not None:
            for tenant, theirs in _by_tenant(changes).items():
                spaces = {self.space} | (self.spaces(tenant) if self.spaces is not None else set())
                spaces |= {c.space for c in theirs if c.space}
                mine = {c.key for c in theirs}
                present = {k: d for k, d in docs.items() if k in mine}
                for space in sorted(spaces):
                    self._apply_vectors(present, [k for k in gone if k in mine], space)

    def _apply_vectors(self, docs: dict[DocKey, StoredDoc], gone: list[DocKey], space: str) -> None:
        """Ready documents get (re)upserted with their current ACL; every other state drops
        its point, `none` included: a document deleted and re-created, edited twice within one
        batch, or evicted to the cold store must not stay searchable with its old vector and
        old ACL (deleting a point that is not there is a no-op)."""
        assert self.vectors is not None
        present = list(docs)
        vecs = self.store.vectors_for(present, space)
        ready = [(docs[k], vecs[k]) for k in present if k in vecs]
        drop = [k for k in present if k not in vecs]
        self.vectors.upsert(space, ready)
        self.vectors.delete(space, drop + gone)


def _by_tenant(changes: list[Change]) -> dict[str, list[Change]]:
    groups: dict[str, list[Change]] = {}
    for c in changes:
        groups.setdefault(c.key.tenant, []).append(c)
    return groups


class Follower(Protocol):
    """What writers and readers call: catch up now, and how far the log has been applied."""

    @property
    def seq(self) -> int: ...

    def sync(self, batch: int = 5000, wait: float = 0.0, tenant: str | None = None) -> int: ...

    def catch_up(self, wait: float = 0.0, tenant: str | None = None) -> bool: ...

    def applied(self, tenant: str) -> int: ...


class Followers:
    """A process's followers (one per position), synced one after the other."""

    def __init__(self, members: Sequence[IndexFollower]):
        self.members = list(members)

    @property
    def seq(self) -> int:
        """The least advanced position: every change after it is pending in some index."""
        return min((f.seq for f in self.members), default=0)

    def sync(self, batch: int = 5000, wait: float = 0.0, tenant: str | None = None) -> int:
        return sum(f.sync(batch, wait, tenant) for f in self.members)

    def catch_up(self, wait: float = 0.0, tenant: str | None = None) -> bool:
        return all([f.catch_up(wait, tenant) for f in self.members])

    def applied(self, tenant: str) -> int:
        return min((f.applied(tenant) for f in self.members), default=0)

    def of_lexical(self) -> IndexFollower:
        """The follower of the lexical index (what a keyword read must be in step with)."""
        return next(f for f in self.members if f.lexical is not None)

    def of_vectors(self) -> IndexFollower:
        """The follower of the vector index (what a semantic read must wait for)."""
        return next(f for f in self.members if f.vectors is not None)
