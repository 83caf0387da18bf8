"""The `KeyStore` (shared/keys.py) in both stores of record, with one SQL text: `?`
placeholders (turned into `%s` for psycopg by the store's `_sql`), `ON CONFLICT` and `DOUBLE
PRECISION` in both dialects. It borrows the store's transactions and reads (the lifecycle hooks
`_lc_tx`, `_lc_rows`) instead of mixing into the store classes, so the keys' table and SQL
change apart from the documents' and open no connection of their own.

Writes (create, revoke) first bump the generation row: that locks it (PostgreSQL row lock;
SQLite writers are serial anyway), so two concurrent creates for one tenant cannot both pass
the per-tenant count."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from shared.keys import KeyRecord, TooManyKeys

_COLS = "id, tenant, name, principals, certs, scopes, created_at, secret_hash"


class SqlHooks(Protocol):
    """What both store classes offer (shared/adapters/lifecycle_sql/)."""

    def _lc_tx(self) -> AbstractContextManager[Any]: ...

    def _lc_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]: ...

    def _sql(self, sql: str) -> str: ...


def _record(r: Mapping[str, Any]) -> KeyRecord:
    return KeyRecord(str(r["id"]), str(r["tenant"]), str(r["name"]), tuple(json.loads(r["principals"])),
                     tuple(json.loads(r["certs"])), tuple(json.loads(r["scopes"])), float(r["created_at"]),
                     str(r["secret_hash"]))


class SqlKeyStore:
    def __init__(self, store: SqlHooks):
        self._s = store  # its tables are the store's, made by its migrations (shared/adapters/schema/)

    def _rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._s._lc_rows(self._s._sql(sql), params)

    def create_key(self, record: KeyRecord, max_per_tenant: int) -> None:
        r = record
        with self._s._lc_tx() as conn:
            conn.execute(self._s._sql("UPDATE api_key_generation SET gen = gen + 1 WHERE id = 1"))
            row = conn.execute(self._s._sql("SELECT COUNT(*) AS n FROM api_keys WHERE tenant = ?"),
                               (r.tenant,)).fetchone()
            if int(row["n"]) >= max_per_tenant:
                raise TooManyKeys(f"tenant holds {int(row['n'])} keys")
            conn.execute(self._s._sql(f"INSERT INTO api_keys ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
                         (r.id, r.tenant, r.name, json.dumps(list(r.principals)), json.dumps(list(r.certs)),
                          json.dumps(list(r.scopes)), r.created_at, r.secret_hash))

    def keys_of(self, tenant: str) -> list[KeyRecord]:
        return [_record(r) for r in self._rows(
            f"SELECT {_COLS} FROM api_keys WHERE tenant = ? ORDER BY created_at, id", (tenant,))]

    def all_keys(self) -> list[KeyRecord]:
        return [_record(r) for r in self._rows(f"SELECT {_COLS} FROM api_keys")]

    def key_by_hash(self, secret_hash: str) -> KeyRecord | None:
        rows = self._rows(f"SELECT {_COLS} FROM api_keys WHERE secret_hash = ?", (secret_hash,))
        return _record(rows[0]) if rows else None

    def key_by_id(self, key_id: str) -> KeyRecord | None:
        rows = self._rows(f"SELECT {_COLS} FROM api_keys WHERE id = ?", (key_id,))
        return _record(rows[0]) if rows else None

    def revoke_key(self, tenant: str, key_id: str) -> bool:
        with self._s._lc_tx() as conn:
            conn.execute(self._s._sql("UPDATE api_key_generation SET gen = gen + 1 WHERE id = 1"))
            cur = conn.execute(self._s._sql("DELETE FROM api_keys WHERE tenant = ? AND id = ?"), (tenant, key_id))
            return bool(cur.rowcount)

    def key_generation(self) -> int:
        rows = self._rows("SELECT gen FROM api_key_generation WHERE id = 1")
        return int(rows[0]["gen"]) if rows else 0
