"""Cold store packed in one table: the same codes as the file layout
(shared/adapters/cold_files.py: a 12-byte header, then float16 or int8), many to a page.

Why not one file per vector: a 384-dimension float16 code is 780 bytes and an int8 one 396, but
a file takes at least one filesystem block (4 KiB on ext4), so 10,000 cold vectors took 41 MB
on disk whatever the codec: five times their size in float16, ten in int8, and more than the
float32 vectors they replace (and an inode each). Packed, 10,000 took 1.42x the codes' size
(float16) and 1.28x (int8): keys and page fill; puts were 2.3-3.6x faster. Below ~200 vectors the
fixed part (a 32 KiB WAL index, a WAL of at most ~256 KiB) is as large as the blocks files took.

Two homes, the same table:
- SQLite, a file of its own in `VIBE_COLD_DIR` (embedded profile): WAL, one connection per
  process under a lock, several processes on one data dir queue on the file lock as the store's
  do. A local filesystem (SQLite's locks are not safe on NFS).
- PostgreSQL (distributed profile), a table beside the store of record: workers on any host
  rehydrate without a shared volume.

Vectors evicted before this layout (files under the same cold dir) are still read, and deleted
with their key (`legacy_files`: only where the dir held such files at start); new ones go to
the table. Tenants are hashed as in the file layout, so the
table names no tenant; no text and no ACL is kept.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.adapters.cold_files import CODECS, FileColdStore, decode, encode, tenant_key
from shared.adapters.sqlite_wal import open_wal

_DDL = ("CREATE TABLE IF NOT EXISTS cold_codes (tenant TEXT NOT NULL, space TEXT NOT NULL, "
        "content_hash TEXT NOT NULL, code {blob} NOT NULL, PRIMARY KEY (tenant, space, content_hash)){suffix}")
_PUT = ("INSERT INTO cold_codes (tenant, space, content_hash, code) VALUES ({p}, {p}, {p}, {p}) "
        "ON CONFLICT (tenant, space, content_hash) DO UPDATE SET code = excluded.code")
_GET = "SELECT code FROM cold_codes WHERE tenant = {p} AND space = {p} AND content_hash = {p}"
_DELETE = "DELETE FROM cold_codes WHERE tenant = {p} AND space = {p} AND content_hash = {p}"
_HELD = "SELECT content_hash FROM cold_codes WHERE tenant = {p} AND space = {p}"
_PAGE = _HELD + " AND content_hash > {p} ORDER BY content_hash LIMIT {p}"  # the primary key's order
_BYTES = "SELECT COALESCE(SUM(LENGTH(code)), 0), COUNT(*) FROM cold_codes"


VACUUM_EVERY = 512
log = logging.getLogger("vibe.cold")


class _Sqlite:
    placeholder = "?"

    def __init__(self, path: Path):
        try:
            self._db = self._open(path)
        except sqlite3.OperationalError:
            raise  # locked, unreachable: a healthy file, never set aside
        except sqlite3.DatabaseError:
            # Not a database, or damaged (SQLITE_NOTADB, SQLITE_CORRUPT): what it held can be
            # re-embedded, so the service starts on a new file instead of refusing to, and the
            # old one is kept aside for whoever wants to look.
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            log.error("cold store unreadable; kept aside, starting a new one", extra={"kept": str(aside)})
            path.rename(aside)
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            self._db = self._open(path)
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL
        # The WAL is checkpointed at 256 KiB (not 4 MiB) and then truncated: beside a small cold store it
        # was most of the disk the store took (bench lifecycle, Cranfield: 97 vectors, 76 KB of codes).
        self._db.execute("PRAGMA wal_autocheckpoint=64")
        self._db.execute("PRAGMA journal_size_limit=0")
        self._lock = threading.RLock()  # one connection for the process's threads (a put takes ~35 us)
        self._deleted = 0

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        # auto_vacuum first, on a new file (an existing one keeps its mode): freed pages can be
        # given back to the file system (`deleted`), not only reused by later puts. A retired
        # space's expiry deletes all its codes at once, and its disk should come back.
        db = open_wal(path, _DDL.format(blob="BLOB", suffix=" WITHOUT ROWID") + ";",
                      first="PRAGMA auto_vacuum=INCREMENTAL;")
        db.execute("SELECT COUNT(*) FROM (SELECT 1 FROM cold_codes LIMIT 1)").fetchone()  # readable at all
        return db

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        with self._lock:  # autocommit: each statement is its own transaction
            yield self._db

    def deleted(self, every: int = VACUUM_EVERY) -> None:
        """Give freed pages back every `every` deletes of this process (cheap: it moves free
        pages to the end and truncates; no rewrite of live rows)."""
        with self._lock:
            self._deleted += 1
            if self._deleted % every == 0:
                # executescript steps the pragma to the end (a cursor's execute frees one page a step)
                self._db.executescript("PRAGMA incremental_vacuum;")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Postgres:
    placeholder = "%s"

    def __init__(self, pool: Any, owned: bool):
        """`pool`: a psycopg ConnectionPool of autocommit connections, the store's (`owned`
        False: no connection more per process) or one of its own."""
        self._pool = pool
        self._owned = owned
        with self.cursor() as c:
            c.execute("SELECT pg_advisory_xact_lock(hashtext('vibe:cold_codes'))")  # two starts, one DDL
            c.execute(_DDL.format(blob="BYTEA", suffix=""))

    @classmethod
    def connect(cls, url: str, connect_timeout: float = 30.0) -> _Postgres:
        from psycopg_pool import ConnectionPool

        pool: Any = ConnectionPool(url, min_size=1, max_size=4, open=True, name="vibe-cold",
                                   kwargs={"autocommit": True}, check=ConnectionPool.check_connection)
        try:
            pool.wait(timeout=connect_timeout)
            return cls(pool, owned=True)
        except BaseException:
            pool.close()
            raise

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        from psycopg.rows import tuple_row

        # the store's pool hands out dict rows; the cold store reads columns by position
        with self._pool.connection() as conn, conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            yield cur

    def deleted(self) -> None:
        """PostgreSQL's autovacuum reuses the space."""

    def close(self) -> None:
        if self._owned:
            self._pool.close()


def legacy_files(root: Path, codec: str) -> FileColdStore | None:
    """The file layout under `root` when it holds any (a directory per space), else None.

    Nothing writes files once the packed layout is in use, so a cold dir without them at start
    never gets any: every fresh embedding then skips two failed file opens (its cold lookup
    finds nothing in the table first), and every delete two unlinks."""
    try:
        with os.scandir(root) as entries:
            found = any(e.is_dir(follow_symlinks=False) for e in entries)
    except OSError:  # no cold dir yet
        return None
    return FileColdStore(root, codec) if found else None


class PackedColdStore:
    """The ColdStore port over one table, SQLite or PostgreSQL (`sqlite(...)`, `postgres(...)`)."""

    def __init__(self, db: _Sqlite | _Postgres, codec: str = "float16", legacy: FileColdStore | None = None):
        if codec not in CODECS:
            raise ValueError(f"unknown cold codec {codec!r}; choose one of {sorted(CODECS)}")
        self.db = db
        self.codec = codec
        self.legacy = legacy  # vectors evicted to files before the packed layout
        p = db.placeholder
        self._put, self._get, self._delete = (sql.format(p=p) for sql in (_PUT, _GET, _DELETE))

    @classmethod
    def sqlite(cls, root: Path, codec: str = "float16") -> PackedColdStore:
        return cls(_Sqlite(root / "cold.sqlite3"), codec, legacy_files(root, codec))

    @classmethod
    def postgres(cls, url: str, root: Path, codec: str = "float16", pool: Any = None) -> PackedColdStore:
        """On `pool` (the store of record's) when given, else on a pool of its own to `url`."""
        db = _Postgres(pool, owned=False) if pool is not None else _Postgres.connect(url)
        return cls(db, codec, legacy_files(root, codec))

    def put(self, tenant: str, space: str, content_hash: str, vector: Sequence[float]) -> tuple[str, int]:
        data = encode(vector, self.codec)
        t = tenant_key(tenant)
        with self.db.cursor() as c:
            c.execute(self._put, (t, space, content_hash, data))
        return f"packed:{space}/{t}/{content_hash}", len(data)

    def get(self, tenant: str, space: str, content_hash: str) -> list[float] | None:
        try:
            with self.db.cursor() as c:
                row = c.execute(self._get, (tenant_key(tenant), space, content_hash)).fetchone()
        except sqlite3.OperationalError:
            raise  # locked past the busy timeout: the job is retried, nothing is re-embedded
        except sqlite3.DatabaseError:  # a damaged page: re-embedding is the cost, not a failed job
            log.warning("cold store read failed; the vector is embedded again", exc_info=True)
            row = None
        if row is not None:
            return decode(bytes(row[0]))  # a torn or foreign code decodes to None: the caller re-embeds
        return self.legacy.get(tenant, space, content_hash) if self.legacy is not None else None

    def delete(self, tenant: str, space: str, content_hash: str) -> None:
        with self.db.cursor() as c:
            c.execute(self._delete, (tenant_key(tenant), space, content_hash))
        self.db.deleted()
        if self.legacy is not None:
            self.legacy.delete(tenant, space, content_hash)

    def held(self, tenant: str, space: str) -> set[str]:
        """The content hashes a tenant's space has in the table (not the legacy files)."""
        with self.db.cursor() as c:
            rows = c.execute(_HELD.format(p=self.db.placeholder), (tenant_key(tenant), space)).fetchall()
        return {str(r[0]) for r in rows}

    def hashes(self, tenant: str, space: str, after: str, limit: int) -> list[str]:
        """A page of `held`: the table only, not the files of the legacy layout (nothing writes
        those any more; a sweep over both would need one order across two sources)."""
        with self.db.cursor() as c:
            rows = c.execute(_PAGE.format(p=self.db.placeholder), (tenant_key(tenant), space, after, limit)).fetchall()
        return [str(r[0]) for r in rows]

    def stored(self) -> tuple[int, int]:
        """(bytes of codes, vectors) in the table."""
        with self.db.cursor() as c:
            size, count = c.execute(_BYTES).fetchone()
        return int(size), int(count)

    def close(self) -> None:
        self.db.close()
