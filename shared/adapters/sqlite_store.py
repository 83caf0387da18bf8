"""Embedded durable store: documents, sidecar state, vectors and the change log in SQLite.

SQLite (WAL) is the system of record; the lexical and vector indexes follow its change log
(`changes`) and can be rebuilt from it. Several processes may open the same file, which is
what lets Celery workers and the API share one data dir. Every multi-row write is one
transaction, so a write is either fully accepted or changes nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.collection_settings_sql import CollectionSettingsSql
from shared.adapters.documents_sql import DocumentsSql
from shared.adapters.edges_sql import EdgesSql
from shared.adapters.lifecycle_sql import LifecycleSql
from shared.adapters.schema import sqlite as sqlite_schema
from shared.adapters.schema.runner import Migrated
from shared.adapters.sqlite_wal import immediate
from shared.adapters.store_reports import KEEP_READY_SAME_CONTENT
from shared.adapters.touch_switch_sql import TouchSwitchSql
from shared.model import (
    STATUS_OF,
    DocKey,
    DocVectors,
    SemanticStatus,
    SidecarEntry,
    StoredDoc,
    as_doc_vectors,
    doc_key,
    from_vibe_column,
    vibe_column,
)
from shared.threads import TicketLock

_SIDECAR_COLS = (
    "tenant, collection, doc_id, space, status, content_hash, reason, model_id, "
    "last_embedded_at, attempts, updated_at, cold_ref"
)
_UPSERT_SIDECAR = (
    f"INSERT INTO sidecar ({_SIDECAR_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(tenant, collection, doc_id, space) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in _SIDECAR_COLS.split(", ")[4:])  # all but the 4 key columns
    + KEEP_READY_SAME_CONTENT
)


BUSY_TIMEOUT_SECONDS = 30  # how long a writer waits for another before "database is locked"
_WRITERS: dict[str, TicketLock] = {}
_WRITERS_LOCK = threading.Lock()


def _writers_of(key: str) -> TicketLock:
    """The one ticket lock of a database file (its resolved path) in this process, whichever
    store objects open it."""
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(key, TicketLock())


def _forget_writers() -> None:
    """In a forked child: the parent's locks may be held by threads the child does not have."""
    global _WRITERS_LOCK
    _WRITERS_LOCK = threading.Lock()
    _WRITERS.clear()


os.register_at_fork(after_in_child=_forget_writers)


def _row_to_sidecar(r: sqlite3.Row) -> SidecarEntry:
    return SidecarEntry(
        key=doc_key(r["tenant"], r["collection"], r["doc_id"]),
        space=r["space"],
        status=STATUS_OF[r["status"]],
        content_hash=r["content_hash"],
        reason=r["reason"],
        model_id=r["model_id"],
        last_embedded_at=r["last_embedded_at"],
        attempts=r["attempts"],
        updated_at=r["updated_at"],
        cold_ref=r["cold_ref"],
    )


def _row_to_doc(r: sqlite3.Row) -> StoredDoc:
    vibe, certs = from_vibe_column(json.loads(r["vibe"]))
    return StoredDoc(
        key=doc_key(r["tenant"], r["collection"], r["doc_id"]),
        fields=json.loads(r["fields"]),
        acl=json.loads(r["acl"]),
        intent=r["intent"],
        content_hash=r["content_hash"],
        updated_at=r["updated_at"],
        vibe=vibe,
        certs=certs,
    )


def _pow2(x: float | None) -> float | None:
    return None if x is None else 2.0 ** max(-1074.0, min(1023.0, x))


def _to_blob(vectors: DocVectors) -> bytes:
    """A document's passage vectors end to end, float32 (the row's `dim` splits them again)."""
    return np.asarray(vectors, dtype=np.float32).tobytes()


def _from_blob(blob: bytes, dim: int) -> DocVectors:
    flat = np.frombuffer(blob, dtype=np.float32)
    return flat.reshape(-1, dim).tolist() if dim and flat.size % dim == 0 else [flat.tolist()]


class SqliteStore(LifecycleSql, DocumentsSql, EdgesSql, TouchSwitchSql, CollectionSettingsSql):
    """DocumentStore and LifecycleStore over one SQLite file; one connection per thread."""

    # the admin reports' indexes, named (shared/adapters/audit_sql.py says why)
    _AUDIT_TABLES = {"sidecar": "sidecar s INDEXED BY sidecar_ready_by_hash",
                     "vectors": "vectors v INDEXED BY vectors_by_space"}
    _COVERAGE_TABLES = {"states": "sidecar INDEXED BY sidecar_by_status",
                        "details": "sidecar INDEXED BY sidecar_details"}

    def __init__(self, path: Path, clock: Callable[[], float] | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writers_key = str(path.resolve())
        # Every timestamp the store makes itself (status changes, embeddings, space bindings):
        # the process's clock, injectable so lifecycle decisions replay on simulated time.
        self.clock: Callable[[], float] = clock or time.time
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # Tables and their versions: shared/adapters/schema/. Raises SchemaTooNew for a file
        # a newer build migrated.
        try:
            self.migrated: Migrated = sqlite_schema.migrate(self._conn(), self._tx)
        except BaseException:
            self.close()
            raise

    # -- connections -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
            # Checkpoint the WAL every ~40 MB instead of every 4 MB (the default, 1000 pages): a
            # 2000-document bulk wrote ~1000 pages, so nearly every commit also ran a checkpoint,
            # whose cost grew with the database (commit 21 ms at 50k documents, 52-71 ms at 200k;
            # 27-32 ms so). Durability is the same (WAL, synchronous=NORMAL); the WAL file stays
            # at most ~40 MB plus one transaction.
            conn.execute("PRAGMA wal_autocheckpoint=10000")
            # usage decay (shared/adapters/lifecycle_sql/); SQLite's math functions are optional
            conn.create_function("vibe_pow2", 1, _pow2, deterministic=True)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @property
    def _writers(self) -> TicketLock:
        return _writers_of(self._writers_key)  # looked up each time: a forked child has its own

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE so concurrent writers queue instead of failing mid-transaction. The
        process's own writers queue in turn on the database file's ticket lock first
        (shared/threads.py `TicketLock`): on SQLite's busy handler alone, a thread committing
        back to back would keep a request's write waiting for as long as it went on. Other
        processes' writers wait on the busy timeout."""
        writers = self._writers
        if writers.held():  # nested: refused as SQLite refuses it, not a deadlock
            raise sqlite3.OperationalError("cannot start a transaction within a transaction")
        if not writers.acquire(timeout=BUSY_TIMEOUT_SECONDS):
            raise sqlite3.OperationalError("database is locked")
        try:
            with self._immediate() as c:
                yield c
        finally:
            writers.release()

    def _immediate(self) -> AbstractContextManager[sqlite3.Connection]:
        """The transaction itself, on this thread's connection (the writers meet in SQLite)."""
        return immediate(self._conn())

    def schema_version(self) -> int:
        """The version of the file's schema (shared/adapters/schema/)."""
        return sqlite_schema.current_version(self._conn())

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()
        self._local = threading.local()

    # -- documents ---------------------------------------------------------------------

    def put_docs(self, docs: Sequence[StoredDoc], sidecar: Sequence[SidecarEntry]) -> None:
        with self._tx() as c:
            spaces = self._lc_lock_spaces(c, [d.key.tenant for d in docs])
            c.executemany(
                "INSERT OR REPLACE INTO docs VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (d.key.tenant, d.key.collection, d.key.doc_id, json.dumps(d.fields),
                     json.dumps(d.acl), d.intent, json.dumps(vibe_column(d)), d.content_hash, d.updated_at)
                    for d in docs
                ],
            )
            c.executemany(
                _UPSERT_SIDECAR,
                [self._sidecar_tuple(s) for s in sidecar],
            )
            aligned = self._lc_align_written(c, docs, {(s.key, s.space) for s in sidecar}, spaces, self.clock())
            self._log(c, [*[(d.key, "doc", None) for d in docs], *aligned])

    def _sidecar_tuple(self, s: SidecarEntry) -> tuple[object, ...]:
        return (s.key.tenant, s.key.collection, s.key.doc_id, s.space, s.status.value, s.content_hash,
                s.reason, s.model_id, s.last_embedded_at, s.attempts, s.updated_at or self.clock(),
                s.cold_ref)

    @staticmethod
    def _log(c: sqlite3.Connection, rows: Iterable[tuple[DocKey, str, str | None]]) -> None:
        c.executemany(
            "INSERT INTO changes(tenant, collection, doc_id, op, space) VALUES (?,?,?,?,?)",
            [(k.tenant, k.collection, k.doc_id, op, space) for k, op, space in rows],
        )

    def get_doc(self, key: DocKey) -> StoredDoc | None:
        r = self._conn().execute(
            "SELECT * FROM docs WHERE tenant=? AND collection=? AND doc_id=?",
            (key.tenant, key.collection, key.doc_id),
        ).fetchone()
        return _row_to_doc(r) if r else None

    def get_docs(self, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]:
        docs = (_row_to_doc(r) for r in self._by_keys("SELECT * FROM docs WHERE", keys))
        return {d.key: d for d in docs}

    def _by_keys(self, select: str, keys: Sequence[DocKey], *args: object) -> Iterator[sqlite3.Row]:
        """Rows for many keys, grouped by (tenant, collection) so that each statement is a
        primary-key range with `doc_id IN (...)` instead of a scan."""
        groups: dict[tuple[str, str], list[str]] = {}
        for k in keys:
            groups.setdefault((k.tenant, k.collection), []).append(k.doc_id)
        for (tenant, collection), ids in groups.items():
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                sql = f"{select} tenant=? AND collection=? AND doc_id IN ({','.join('?' * len(chunk))})"
                yield from self._conn().execute(sql, [*args, tenant, collection, *chunk])

    def delete_doc(self, key: DocKey) -> bool:
        """Document, sidecar and its vectors go together; a vector stays only while another
        document of the tenant has the same content."""
        args = (key.tenant, key.collection, key.doc_id)
        with self._tx() as c:
            row = c.execute("SELECT content_hash FROM docs WHERE tenant=? AND collection=? AND doc_id=?",
                            args).fetchone()
            cur = c.execute("DELETE FROM docs WHERE tenant=? AND collection=? AND doc_id=?", args)
            c.execute("DELETE FROM sidecar WHERE tenant=? AND collection=? AND doc_id=?", args)
            if row is not None:
                c.execute("DELETE FROM vectors WHERE tenant=? AND content_hash=? AND NOT EXISTS "
                          "(SELECT 1 FROM docs WHERE tenant=? AND content_hash=?)",
                          (key.tenant, row["content_hash"], key.tenant, row["content_hash"]))
            if cur.rowcount:
                self._log(c, [(key, "delete", None)])
            return cur.rowcount > 0

    def collection_keys(self, tenant: str, collection: str | None) -> Iterable[DocKey]:
        sql, args = "SELECT collection, doc_id FROM docs WHERE tenant=?", [tenant]
        if collection:
            sql, args = sql + " AND collection=?", [tenant, collection]
        for r in self._conn().execute(sql, args).fetchall():
            yield DocKey(tenant, r["collection"], r["doc_id"])

    # -- sidecar -----------------------------------------------------------------------

    def sidecar(self, key: DocKey, space: str) -> SidecarEntry | None:
        return self.sidecars([key], space).get(key)

    def sidecars(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, SidecarEntry]:
        rows = self._by_keys("SELECT * FROM sidecar WHERE space=? AND", keys, space)
        return {s.key: s for s in map(_row_to_sidecar, rows)}

    def ready_among(self, keys: Sequence[DocKey], space: str) -> set[DocKey]:
        rows = self._by_keys("SELECT tenant, collection, doc_id FROM sidecar WHERE space=? AND status=? AND", keys,
                             space, SemanticStatus.READY.value)
        return {doc_key(r[0], r[1], r[2]) for r in rows}

    def set_status(
        self,
        keys: Sequence[DocKey],
        space: str,
        status: SemanticStatus,
        reason: str | None = None,
        only_from: Sequence[SemanticStatus] | None = None,
    ) -> list[DocKey]:
        moved: list[DocKey] = []
        guard, guard_args = "", []
        if only_from:
            guard = f" AND status IN ({','.join('?' * len(only_from))})"
            guard_args = [s.value for s in only_from]
        now = self.clock()
        with self._tx() as c:
            for k in dict.fromkeys(keys):  # a key named twice moves (and is reported) once
                cur = c.execute(
                    "UPDATE sidecar SET status=?, reason=?, updated_at=? "
                    f"WHERE tenant=? AND collection=? AND doc_id=? AND space=?{guard}",
                    [status.value, reason, now, k.tenant, k.collection, k.doc_id, space, *guard_args],
                )
                if cur.rowcount:
                    moved.append(k)
        return moved

    def keys_in_status(
        self, space: str, statuses: Sequence[SemanticStatus], limit: int = 10_000, tenant: str | None = None
    ) -> list[SidecarEntry]:
        marks = ",".join("?" * len(statuses))
        only = "" if tenant is None else " AND tenant=?"
        rows = self._conn().execute(
            f"SELECT * FROM sidecar WHERE space=? AND status IN ({marks}){only} ORDER BY updated_at LIMIT ?",
            [space, *[s.value for s in statuses], *([] if tenant is None else [tenant]), limit],
        )
        return [_row_to_sidecar(r) for r in rows]

    # -- vectors -----------------------------------------------------------------------

    def commit_vectors(
        self, entries: Sequence[tuple[SidecarEntry, Sequence[float] | DocVectors]], model_id: str,
        now: float | None = None,
    ) -> list[DocKey]:
        """Job output and job state in one transaction (the pgai vectorizer's rule)."""
        ready: list[DocKey] = []
        now = self.clock() if now is None else now
        with self._tx() as c:
            for entry, given in entries:
                k, vecs = entry.key, as_doc_vectors(given)
                cur = c.execute(
                    "UPDATE sidecar SET status='ready', reason=NULL, model_id=?, last_embedded_at=?, "
                    "updated_at=?, cold_ref=NULL WHERE tenant=? AND collection=? AND doc_id=? "
                    "AND space=? AND content_hash=?",
                    (model_id, now, now, k.tenant, k.collection, k.doc_id, entry.space, entry.content_hash),
                )
                if not cur.rowcount:
                    continue  # the document changed or went away meanwhile: a newer job owns it
                c.execute(
                    "INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?,?)",
                    (k.tenant, entry.content_hash, entry.space, model_id, len(vecs[0]), _to_blob(vecs), now),
                )
                ready.append(k)
            self._log(c, [(k, "vector", entries[0][0].space) for k in ready] if ready else [])
        return ready

    def vector_for_hash(self, tenant: str, content_hash: str, space: str) -> DocVectors | None:
        r = self._conn().execute(
            "SELECT vec, dim FROM vectors WHERE tenant=? AND content_hash=? AND space=?",
            (tenant, content_hash, space),
        ).fetchone()
        return _from_blob(r["vec"], r["dim"]) if r else None

    def vectors_for(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, DocVectors]:
        out: dict[DocKey, DocVectors] = {}
        side = self.sidecars(keys, space)
        for k, s in side.items():
            if s.status == SemanticStatus.READY:
                vec = self.vector_for_hash(k.tenant, s.content_hash, space)
                if vec is not None:
                    out[k] = vec
        return out

    # -- space bindings (the change log's reads and the reports: documents_sql.py) ----------

    def bind_space(self, space: str, model_id: str, dim: int) -> tuple[str, int]:
        """Record which model and dimension a space is built with (first use wins) and
        return the recorded pair, so the caller can refuse an embedder that differs."""
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO spaces VALUES (?,?,?,?)", (space, model_id, dim, self.clock()))
            r = c.execute("SELECT model_id, dim FROM spaces WHERE space=?", (space,)).fetchone()
        return str(r["model_id"]), int(r["dim"])

    # -- lifecycle hooks (shared/adapters/lifecycle_sql/) -------------------------------

    def _lc_tx(self) -> Any:
        return self._tx()

    def _lc_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._conn().execute(sql, params).fetchall()

    def _lc_log(self, conn: Any, rows: Sequence[tuple[DocKey, str, str | None]]) -> None:
        self._log(conn, rows)

    def _lc_row_to_sidecar(self, r: Mapping[str, Any]) -> SidecarEntry:
        return _row_to_sidecar(r)  # type: ignore[arg-type]

    # -- followers of shared indexes (their position's read: documents_sql.py) ----------

    def advance_follower_position(self, name: str, seq: int) -> None:
        self._conn().execute(
            "INSERT INTO follower_positions VALUES (?,?) ON CONFLICT(name) DO UPDATE SET seq=max(seq, excluded.seq)",
            (name, seq))

    def reset_follower_position(self, name: str) -> None:
        self._conn().execute("DELETE FROM follower_positions WHERE name=?", (name,))

    @contextmanager
    def follower_lease(self, name: str) -> Iterator[bool]:
        """An exclusive `flock` on a lock file beside the database. The processes that share a
        SQLite file share its host, where flock is exact, and the kernel drops the lock when its
        holder dies, so a crashed applier never leaves a lease behind (a lease row in a table
        would need an expiry instead). The file is opened per call: flock locks belong to an open
        file, so two threads or two store instances exclude each other like two processes."""
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        with open(self.path.with_name(f"{self.path.name}.follower-{digest}.lock"), "ab") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
