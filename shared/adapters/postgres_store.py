"""Distributed durable store: documents, sidecar state, vectors and the change log in PostgreSQL.

The system of record of the distributed profile ("another durable store you
justify"): the sidecar state machine needs multi-row transactions — a status compare-and-set,
vectors and `ready` committed together (pgai's vectorizer rule) — which OpenSearch does not
offer. API and Celery workers on any host share it; the API's index followers read `changes`
and keep the positions of shared indexes in `follower_positions`. Same semantics as
`SqliteStore`, method by method (tests/contract/test_store_contract.py runs against both).

Locks are always taken in one global order, so concurrent writers wait but never deadlock:
docs rows (sorted by key) < sidecar rows (sorted) < vectors rows (sorted) < the change-log lock.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np
import psycopg
from psycopg import Connection, Cursor
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Json
from psycopg_pool import ConnectionPool

from shared.adapters.collection_settings_sql import CollectionSettingsSql
from shared.adapters.documents_sql import DocumentsSql
from shared.adapters.edges_sql import EdgesSql
from shared.adapters.lifecycle_sql import LifecycleSql
from shared.adapters.schema import postgres as postgres_schema
from shared.adapters.schema.runner import Migrated
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
    from_vibe_column,
    vibe_column,
)

# pg_advisory_xact_lock keys (any constant bigint; they only have to differ from each other).
# (The schema's, SCHEMA_LOCK, is shared/adapters/schema/postgres.py's.)
CHANGES_LOCK = 0x7669_6265_0002  # see `_log`
# Follower leases use the two-int4 form of the advisory lock key, (FOLLOWER_LOCKS, hash of the
# name), a key space apart from the one-bigint keys above. Two names whose 32-bit hashes
# collide would only take turns, never apply concurrently.
FOLLOWER_LOCKS = 0x7669_6265

_SIDECAR_COLS = ("tenant", "collection", "doc_id", "space", "status", "content_hash", "reason", "model_id",
                 "last_embedded_at", "attempts", "updated_at", "cold_ref")
_DOC_COLS = ("tenant", "collection", "doc_id", "fields", "acl", "intent", "vibe", "content_hash", "updated_at")

# Many keys in one statement: three parallel arrays joined as a relation (one index probe per
# key, and one round trip however many keys).
_KEYS = "unnest(%s::text[], %s::text[], %s::text[]) AS k(tenant, collection, doc_id)"
_ON_KEY = "USING (tenant, collection, doc_id)"

Conn = Connection[DictRow]


def _upsert(table: str, cols: Sequence[str], key: Sequence[str]) -> str:
    """INSERT that replaces the whole row on a key conflict (SQLite's INSERT OR REPLACE)."""
    updates = ", ".join(f"{c}=EXCLUDED.{c}" for c in cols if c not in key)
    return (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}")


_UPSERT_DOC = _upsert("docs", _DOC_COLS, ("tenant", "collection", "doc_id"))
_UPSERT_SIDECAR = (_upsert("sidecar", _SIDECAR_COLS, ("tenant", "collection", "doc_id", "space"))
                   + KEEP_READY_SAME_CONTENT)
_UPSERT_VECTOR = _upsert("vectors", ("tenant", "content_hash", "space", "model_id", "dim", "vec", "created_at"),
                         ("tenant", "content_hash", "space"))


def _key_arrays(keys: Iterable[DocKey]) -> list[list[str]]:
    """The three arrays `_KEYS` unnests."""
    ks = list(keys)
    return [[k.tenant for k in ks], [k.collection for k in ks], [k.doc_id for k in ks]]


def _key(r: DictRow) -> DocKey:
    return DocKey(r["tenant"], r["collection"], r["doc_id"])


def _row_to_sidecar(r: DictRow) -> SidecarEntry:
    return SidecarEntry(
        key=_key(r), space=r["space"], status=STATUS_OF[r["status"]], content_hash=r["content_hash"],
        reason=r["reason"], model_id=r["model_id"], last_embedded_at=r["last_embedded_at"],
        attempts=r["attempts"], updated_at=r["updated_at"], cold_ref=r["cold_ref"],
    )


def _row_to_doc(r: DictRow) -> StoredDoc:
    vibe, certs = from_vibe_column(r["vibe"])
    return StoredDoc(key=_key(r), fields=r["fields"], acl=r["acl"], intent=r["intent"],
                     content_hash=r["content_hash"], updated_at=r["updated_at"], vibe=vibe, certs=certs)


def _doc_params(d: StoredDoc) -> tuple[object, ...]:
    return (d.key.tenant, d.key.collection, d.key.doc_id, Json(d.fields), Json(d.acl), d.intent, Json(vibe_column(d)),
            d.content_hash, d.updated_at)


def _sidecar_params(s: SidecarEntry, now: float) -> tuple[object, ...]:
    return (s.key.tenant, s.key.collection, s.key.doc_id, s.space, s.status.value, s.content_hash, s.reason,
            s.model_id, s.last_embedded_at, s.attempts, s.updated_at or now, s.cold_ref)


def _to_bytes(vectors: DocVectors) -> bytes:
    """A document's passage vectors end to end (the row's `dim` splits them again)."""
    return np.asarray(vectors, dtype="<f4").tobytes()


def _from_bytes(raw: bytes, dim: int) -> DocVectors:
    flat = np.frombuffer(raw, dtype="<f4")
    return flat.reshape(-1, dim).tolist() if dim and flat.size % dim == 0 else [flat.tolist()]


def _log(conn: Conn, rows: Sequence[tuple[DocKey, str, str | None]]) -> None:
    """Append to the change log, making seq order equal commit order.

    An identity column hands out numbers when rows are inserted, not when they commit: were
    T1 to take seq 10 and commit after T2 took 11 and committed, a follower reading
    `seq > last` between the two commits would move to 11 and never see 10. So every writer
    takes one transaction-scoped advisory lock right before its insert; it is held until
    commit and released only after the commit is visible, so the next writer draws a higher
    number and commits later. A lock rather than the xid8/pg_snapshot_xmin scheme: followers
    stay a plain `seq > last` read and writers wait only for the insert and commit of another
    writer (taken last, after every row lock, so it cannot be part of a deadlock)."""
    if not rows:
        return
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHANGES_LOCK,))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO changes(tenant, collection, doc_id, op, space) VALUES (%s,%s,%s,%s,%s)",
                        [(k.tenant, k.collection, k.doc_id, op, space) for k, op, space in rows])


class PostgresStore(LifecycleSql, DocumentsSql, EdgesSql, TouchSwitchSql, CollectionSettingsSql):
    """DocumentStore and LifecycleStore over a PostgreSQL database, through a connection pool
    shared by threads."""

    _PH = "%s"
    _POW2 = "power(2.0::float8, {})"
    _FOR_UPDATE = " FOR UPDATE"
    _FOR_SHARE = " FOR SHARE"
    # json accessors of the edge lookups (shared/adapters/edges_sql.py): the expressions of its indexes
    _EDGE_FROM = "(fields->>'from')"
    _EDGE_TO = "(fields->>'to')"
    _EDGE_WEIGHT = "COALESCE((fields->>'weight')::float8, 1.0)"

    def __init__(self, url: str, pool_size: int = 10, connect_timeout: float = 30.0,
                 clock: Callable[[], float] | None = None):
        # Every timestamp the store makes itself (status changes, embeddings, space bindings):
        # the process's clock, injectable so lifecycle decisions replay on simulated time.
        self.clock: Callable[[], float] = clock or time.time
        # autocommit: a read is one round trip (no BEGIN/COMMIT); writes open `transaction()`.
        # check_connection on checkout: one cheap round trip, and a connection the server dropped
        # (restart, failover) is replaced instead of failing a request.
        self._pool = ConnectionPool[Conn](
            # At least 3: a follower lease holds a connection while its follower reads through
            # another, and two shared followers (OpenSearch, Qdrant) can hold leases at once.
            url, connection_class=Conn, min_size=1, max_size=max(pool_size, 3), open=True, name="vibe-store",
            kwargs={"autocommit": True, "row_factory": dict_row}, check=ConnectionPool.check_connection,
        )
        try:
            self._pool.wait(timeout=connect_timeout)  # fail at start-up, not at the first request
            # Tables and their versions: shared/adapters/schema/. Raises SchemaTooNew for a
            # database a newer build migrated.
            with self._conn() as conn:
                self.migrated: Migrated = postgres_schema.migrate(conn)
        except BaseException:
            self._pool.close()
            raise

    # -- connections -------------------------------------------------------------------

    @property
    def pool(self) -> ConnectionPool[Conn]:
        """Its connections, for a side table that needs no pool of its own (the packed cold store)."""
        return self._pool

    @contextmanager
    def _conn(self) -> Iterator[Conn]:
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[DictRow]:
        with self._conn() as conn:
            return conn.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[object] = ()) -> DictRow | None:
        with self._conn() as conn:
            return conn.execute(sql, params).fetchone()

    def schema_version(self) -> int:
        """The version of the database's schema (shared/adapters/schema/)."""
        with self._conn() as conn:
            return postgres_schema.current_version(conn)

    def close(self) -> None:
        self._pool.close()

    # -- documents ---------------------------------------------------------------------

    def put_docs(self, docs: Sequence[StoredDoc], sidecar: Sequence[SidecarEntry]) -> None:
        # Rows sorted for the lock order; a stable sort, so of two writes of one key the last
        # still wins. A document that fails to serialise rolls the whole transaction back.
        params = [_doc_params(d) for d in sorted(docs, key=lambda d: d.key)]
        now = self.clock()
        rows = [_sidecar_params(s, now) for s in sorted(sidecar, key=lambda s: (s.key, s.space))]
        with self._tx() as conn, conn.cursor() as cur:
            spaces = self._lc_lock_spaces(conn, [d.key.tenant for d in docs])
            if params:
                cur.executemany(_UPSERT_DOC, params)
            if rows:
                cur.executemany(_UPSERT_SIDECAR, rows)
            aligned = self._lc_align_written(conn, docs, {(s.key, s.space) for s in sidecar}, spaces, now)
            _log(conn, [*[(d.key, "doc", None) for d in docs], *aligned])

    def get_doc(self, key: DocKey) -> StoredDoc | None:
        r = self._one("SELECT * FROM docs WHERE tenant=%s AND collection=%s AND doc_id=%s", key)
        return _row_to_doc(r) if r else None

    def get_docs(self, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]:
        if not keys:
            return {}
        rows = self._all(f"SELECT d.* FROM docs d JOIN {_KEYS} {_ON_KEY}", _key_arrays(keys))
        return {d.key: d for d in map(_row_to_doc, rows)}

    def delete_doc(self, key: DocKey) -> bool:
        """Document, sidecar and its vectors go together; a vector stays only while another
        document of the tenant has the same content."""
        with self._tx() as conn:
            row = conn.execute("DELETE FROM docs WHERE tenant=%s AND collection=%s AND doc_id=%s "
                               "RETURNING content_hash", key).fetchone()
            conn.execute("DELETE FROM sidecar WHERE tenant=%s AND collection=%s AND doc_id=%s", key)
            if row is None:
                return False
            # Two documents of one content deleted at once: under READ COMMITTED each NOT
            # EXISTS would still see the other's uncommitted document and keep the vector.
            # Locking the vector rows first makes the second wait for the first to commit;
            # its next statement then sees that deletion.
            conn.execute("SELECT 1 FROM vectors WHERE tenant=%s AND content_hash=%s FOR UPDATE",
                         (key.tenant, row["content_hash"]))
            conn.execute("DELETE FROM vectors WHERE tenant=%s AND content_hash=%s AND NOT EXISTS "
                         "(SELECT 1 FROM docs WHERE tenant=%s AND content_hash=%s)",
                         (key.tenant, row["content_hash"], key.tenant, row["content_hash"]))
            _log(conn, [(key, "delete", None)])
            return True

    def collection_keys(self, tenant: str, collection: str | None) -> Iterable[DocKey]:
        sql, args = "SELECT collection, doc_id FROM docs WHERE tenant=%s", [tenant]
        if collection:
            sql, args = sql + " AND collection=%s", [tenant, collection]
        # Fetched whole: a lazy cursor would hold a pooled connection while the caller iterates.
        return [DocKey(tenant, r["collection"], r["doc_id"]) for r in self._all(sql, args)]

    # -- sidecar -----------------------------------------------------------------------

    def sidecar(self, key: DocKey, space: str) -> SidecarEntry | None:
        return self.sidecars([key], space).get(key)

    def sidecars(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, SidecarEntry]:
        if not keys:
            return {}
        rows = self._all(f"SELECT s.* FROM sidecar s JOIN {_KEYS} {_ON_KEY} WHERE s.space=%s",
                         [*_key_arrays(keys), space])
        return {s.key: s for s in map(_row_to_sidecar, rows)}

    def ready_among(self, keys: Sequence[DocKey], space: str) -> set[DocKey]:
        if not keys:
            return set()
        rows = self._all(f"SELECT s.tenant, s.collection, s.doc_id FROM sidecar s JOIN {_KEYS} {_ON_KEY} "
                         "WHERE s.space=%s AND s.status=%s", [*_key_arrays(keys), space, SemanticStatus.READY.value])
        return set(map(_key, rows))

    def set_status(
        self,
        keys: Sequence[DocKey],
        space: str,
        status: SemanticStatus,
        reason: str | None = None,
        only_from: Sequence[SemanticStatus] | None = None,
    ) -> list[DocKey]:
        with self._tx() as conn:
            return self._set_status(conn, keys, space, status, reason, only_from)

    def _set_status(self, conn: Conn, keys: Sequence[DocKey], space: str, status: SemanticStatus,
                    reason: str | None, only_from: Sequence[SemanticStatus] | None) -> list[DocKey]:
        """The compare-and-set: the guard is part of the UPDATE, so a row another transaction
        is moving is waited for and its new status re-checked (READ COMMITTED re-evaluates the
        WHERE on the committed row): of two workers racing `none → queued`, one wins."""
        if not keys:
            return []
        keys = list(dict.fromkeys(keys))  # a key named twice moves (and is reported) once
        guard = " AND status = ANY(%s)" if only_from else ""
        now = self.clock()
        params = [[status.value, reason, now, *k, space, *([[s.value for s in only_from]] if only_from else [])]
                  for k in sorted(keys)]  # sorted: the global lock order
        with conn.cursor() as cur:
            cur.executemany("UPDATE sidecar SET status=%s, reason=%s, updated_at=%s "
                            f"WHERE tenant=%s AND collection=%s AND doc_id=%s AND space=%s{guard} "
                            "RETURNING tenant, collection, doc_id", params, returning=True)
            moved = _returned_keys(cur)
        return [k for k in keys if k in moved]

    def keys_in_status(
        self, space: str, statuses: Sequence[SemanticStatus], limit: int = 10_000, tenant: str | None = None
    ) -> list[SidecarEntry]:
        if tenant is not None:
            rows = self._all("SELECT * FROM sidecar WHERE space=%s AND status = ANY(%s) AND tenant=%s "
                             "ORDER BY updated_at LIMIT %s", (space, [s.value for s in statuses], tenant, limit))
            return [_row_to_sidecar(r) for r in rows]
        rows = self._all("SELECT * FROM sidecar WHERE space=%s AND status = ANY(%s) ORDER BY updated_at LIMIT %s",
                         (space, [s.value for s in statuses], limit))
        return [_row_to_sidecar(r) for r in rows]

    # -- vectors -----------------------------------------------------------------------

    def commit_vectors(
        self, entries: Sequence[tuple[SidecarEntry, Sequence[float] | DocVectors]], model_id: str,
        now: float | None = None,
    ) -> list[DocKey]:
        """Job output and job state in one transaction (the pgai vectorizer's rule). The
        content-hash guard is in the UPDATE: a document rewritten meanwhile is left to the
        newer job, even when that rewrite commits while this transaction waits for the row."""
        if not entries:
            return []
        space = entries[0][0].space
        now = self.clock() if now is None else now
        in_order = sorted(((e, as_doc_vectors(v)) for e, v in entries),
                          key=lambda e: (e[0].key, e[0].space))  # the lock order
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "UPDATE sidecar SET status='ready', reason=NULL, model_id=%s, last_embedded_at=%s, updated_at=%s, "
                "cold_ref=NULL WHERE tenant=%s AND collection=%s AND doc_id=%s AND space=%s AND content_hash=%s "
                "RETURNING tenant, collection, doc_id",
                [(model_id, now, now, *e.key, e.space, e.content_hash) for e, _ in in_order], returning=True)
            moved = _returned_keys(cur)
            vectors = sorted((e.key.tenant, e.content_hash, e.space, model_id, len(v[0]), _to_bytes(v), now)
                             for e, v in in_order if e.key in moved)
            if vectors:
                cur.executemany(_UPSERT_VECTOR, vectors)
            ready = [e.key for e, _ in entries if e.key in moved]
            _log(conn, [(k, "vector", space) for k in ready])
        return ready

    def vector_for_hash(self, tenant: str, content_hash: str, space: str) -> DocVectors | None:
        r = self._one("SELECT vec, dim FROM vectors WHERE tenant=%s AND content_hash=%s AND space=%s",
                      (tenant, content_hash, space))
        return _from_bytes(r["vec"], r["dim"]) if r else None

    def vectors_for(self, keys: Sequence[DocKey], space: str) -> dict[DocKey, DocVectors]:
        """The vector of each key whose sidecar is `ready`, in one join."""
        if not keys:
            return {}
        rows = self._all(
            f"SELECT s.tenant, s.collection, s.doc_id, v.vec, v.dim FROM sidecar s JOIN {_KEYS} {_ON_KEY} "
            "JOIN vectors v ON v.tenant=s.tenant AND v.content_hash=s.content_hash AND v.space=s.space "
            "WHERE s.space=%s AND s.status='ready'", [*_key_arrays(keys), space])
        return {_key(r): _from_bytes(r["vec"], r["dim"]) for r in rows}

    # -- space bindings (the change log's reads and the reports: documents_sql.py) ----------

    def bind_space(self, space: str, model_id: str, dim: int) -> tuple[str, int]:
        """Record which model and dimension a space is built with (first use wins) and
        return the recorded pair, so the caller can refuse an embedder that differs."""
        with self._tx() as conn:
            conn.execute("INSERT INTO spaces VALUES (%s,%s,%s,%s) ON CONFLICT (space) DO NOTHING",
                         (space, model_id, dim, self.clock()))
            r = conn.execute("SELECT model_id, dim FROM spaces WHERE space=%s", (space,)).fetchone()
        assert r is not None
        return str(r["model_id"]), int(r["dim"])

    # -- lifecycle hooks (shared/adapters/lifecycle_sql/) -------------------------------

    def _lc_tx(self) -> Any:
        return self._tx()

    def _lc_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._all(sql, params)

    def _report_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        # The admin reports' set queries (shared/adapters/audit_sql.py) look costly enough to the
        # planner for it to JIT-compile them: 1.2 s of compiling for a 70 ms statement at 30k
        # documents. Off for these statements only (SET LOCAL ends with the transaction).
        with self._tx() as conn:
            conn.execute("SET LOCAL jit = off")
            return conn.execute(self._sql(sql), params).fetchall()

    def _lc_log(self, conn: Any, rows: Sequence[tuple[DocKey, str, str | None]]) -> None:
        _log(conn, rows)

    def _lc_lock_vectors(self, conn: Any, rows: Sequence[tuple[str, str, str]]) -> None:
        # Under READ COMMITTED a NOT EXISTS would miss a ready row another transaction is about
        # to commit; waiting on the vector row first lets the next statement see it.
        for row in rows:
            conn.execute("SELECT 1 FROM vectors WHERE tenant=%s AND content_hash=%s AND space=%s FOR UPDATE", row)

    def _lc_row_to_sidecar(self, r: Mapping[str, Any]) -> SidecarEntry:
        return _row_to_sidecar(r)  # type: ignore[arg-type]

    # -- followers of shared indexes (their position's read: documents_sql.py) ----------

    def advance_follower_position(self, name: str, seq: int) -> None:
        with self._conn() as conn:
            conn.execute("INSERT INTO follower_positions VALUES (%s,%s) ON CONFLICT (name) "
                         "DO UPDATE SET seq=GREATEST(follower_positions.seq, EXCLUDED.seq)", (name, seq))

    def reset_follower_position(self, name: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM follower_positions WHERE name=%s", (name,))

    @contextmanager
    def follower_lease(self, name: str) -> Iterator[bool]:
        """A session advisory lock on a connection held for the block, so no transaction stays
        open while the follower writes to its index (a long one would hold back vacuum). It is
        released in `finally`, also when applying raises, before the connection goes back to the
        pool; should the session die instead, the server releases it."""
        key = (FOLLOWER_LOCKS, _int4(name))
        with self._conn() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s, %s) AS ok", key).fetchone()
            if not (row and row["ok"]):
                yield False
                return
            try:
                yield True
            finally:
                # A session that died has released the lock already; its error must not hide
                # the one that ended the block.
                with suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)


def _int4(name: str) -> int:
    """A stable signed 32-bit hash (Python's `hash` differs between processes)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


def _returned_keys(cur: Cursor[DictRow]) -> set[DocKey]:
    """The keys in the RETURNING rows of an `executemany(..., returning=True)`, which leaves
    one result set per parameter set."""
    return {_key(r) for _ in cur.results() for r in cur.fetchall()}
