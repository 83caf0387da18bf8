"""Eviction: idle `ready` vectors move to the cold store (the row keeps a cold reference and
goes `none`), and the cold entries' bookkeeping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import _MAX, SqlBase
from shared.model import DocKey, SidecarEntry
from shared.ports import RowCursor


class EvictionSql(SqlBase):
    """Eviction to the cold store and cold entries."""

    # An evictable row `s` of the sidecar (with `_IDLE_JOINS`): `ready`, of a lazy collection, not
    # pinned at `now` and neither used nor embedded since `idle_before` (its arguments, in that order).
    _IDLE_JOINS = ("LEFT JOIN doc_usage u ON u.tenant=s.tenant AND u.collection=s.collection AND u.doc_id=s.doc_id "
                   "LEFT JOIN collection_modes m ON m.tenant=s.tenant AND m.collection=s.collection "
                   "AND m.mode='eager'")

    _IDLE = ("s.status='ready' AND m.tenant IS NULL AND COALESCE(u.pinned_until, 0)<? AND "
             + _MAX.format(a="COALESCE(u.last_used_at, 0)", b="COALESCE(s.last_embedded_at, 0)") + "<?")

    def eviction_candidates(
        self, space: str, idle_before: float, now: float, limit: int,
        tenant: str | None = None, collection: str | None = None,
    ) -> list[SidecarEntry]:
        sql = f"SELECT s.* FROM sidecar s {self._IDLE_JOINS} WHERE s.space=? AND {self._IDLE}"
        args: list[object] = [space, now, idle_before]
        if tenant is not None:
            sql, args = sql + " AND s.tenant=?", [*args, tenant]
        if collection is not None:
            sql, args = sql + " AND s.collection=?", [*args, collection]
        return [self._lc_row_to_sidecar(r) for r in self._read(sql + " LIMIT ?", (*args, limit))]

    def eviction_page(self, spaces: Sequence[str], idle_before: float, now: float, after: RowCursor | None,
                      limit: int) -> tuple[list[SidecarEntry], RowCursor | None]:
        """The scheduler's eviction: of the next `limit` sidecar rows in key order after `after`,
        those of `spaces` that `eviction_candidates` would give (a read: `evict` checks each again
        in its transaction), and the last row examined (None: the end). Every row counts, of any
        space or status, so a page costs what its size does (~2.5 us a row), found or not:
        `eviction_candidates` over every `ready` row of a space took 0.3-1.8 s at 1M rows to find
        none (SQLite, PostgreSQL)."""
        if not spaces:
            return [], None
        test = f"s.space IN ({','.join('?' * len(spaces))}) AND {self._IDLE}"
        found, cursor = self._row_page(test, (*spaces, now, idle_before), after, limit, ", s.*", self._IDLE_JOINS)
        return [self._lc_row_to_sidecar(r) for r in found], cursor

    def evict(self, entries: Sequence[tuple[SidecarEntry, str, int]], codec: str, now: float) -> list[DocKey]:
        with self._lc_tx() as conn:
            return self._evict_in(conn, entries, codec, now)

    def evict_retired(self, tenant: str, space: str, entries: Sequence[tuple[SidecarEntry, str, int]], codec: str,
                      now: float) -> list[DocKey] | None:
        """`evict` for the background move of a retired space: None (nothing moved) once the
        space is no longer `retired` (re-activated, or its retention expiry started). The space's
        row is share-locked first, so a re-activation (`switch_space`) waits for this batch or
        this batch sees it, never half of each."""
        with self._lc_tx() as conn:
            row = self._x(conn, f"SELECT state FROM tenant_spaces WHERE tenant=? AND space=?{self._FOR_SHARE}",
                          (tenant, space)).fetchone()
            if row is None or row["state"] != "retired":
                return None
            return self._evict_in(conn, [e for e in entries if (e[0].key.tenant, e[0].space) == (tenant, space)],
                                  codec, now)

    def _evict_in(self, conn: Any, entries: Sequence[tuple[SidecarEntry, str, int]], codec: str,
                  now: float) -> list[DocKey]:
        moved: list[tuple[DocKey, str]] = []
        hashes: set[tuple[str, str, str]] = set()
        for e, ref, nbytes in sorted(entries, key=lambda x: (x[0].key, x[0].space)):  # the lock order
            cur = self._x(conn, "UPDATE sidecar SET status='none', reason=NULL, cold_ref=?, updated_at=? "
                                "WHERE tenant=? AND collection=? AND doc_id=? AND space=? AND status='ready' "
                                "AND content_hash=?", (ref, now, *e.key, e.space, e.content_hash))
            if not cur.rowcount:
                continue  # used, rewritten or deleted meanwhile: the newer state wins
            moved.append((e.key, e.space))
            hashes.add((e.key.tenant, e.content_hash, e.space))
            self._x(conn, "INSERT INTO cold_vectors VALUES (?,?,?,?,?,?,?) ON CONFLICT (tenant, content_hash, "
                          "space) DO UPDATE SET ref=excluded.ref, codec=excluded.codec, bytes=excluded.bytes",
                    (e.key.tenant, e.content_hash, e.space, ref, codec, nbytes, now))
        self._lc_lock_vectors(conn, sorted(hashes))
        for tenant, chash, space in sorted(hashes):
            self._x(conn, "DELETE FROM vectors WHERE tenant=? AND content_hash=? AND space=? AND NOT EXISTS "
                          "(SELECT 1 FROM sidecar WHERE tenant=? AND content_hash=? AND space=? "
                          "AND status='ready')",
                    (tenant, chash, space, tenant, chash, space))
        self._lc_log(conn, [(k, "unvector", space) for k, space in moved])
        return [k for k, _ in moved]

    def cold_entry(self, tenant: str, content_hash: str, space: str) -> str | None:
        rows = self._read("SELECT ref FROM cold_vectors WHERE tenant=? AND content_hash=? AND space=?",
                          (tenant, content_hash, space))
        return str(rows[0]["ref"]) if rows else None

    def cold_referenced(self, tenant: str, space: str, hashes: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(hashes), 500):
            chunk = list(hashes[i:i + 500])
            rows = self._read("SELECT content_hash FROM cold_vectors WHERE tenant=? AND space=? "
                              f"AND content_hash IN ({','.join('?' * len(chunk))})", (tenant, space, *chunk))
            found.update(str(r["content_hash"]) for r in rows)
        return found

    def cold_hashes(self, tenant: str, space: str, limit: int) -> list[str]:
        rows = self._read("SELECT content_hash FROM cold_vectors WHERE tenant=? AND space=? ORDER BY content_hash "
                          "LIMIT ?", (tenant, space, limit))
        return [str(r["content_hash"]) for r in rows]

    def forget_cold(self, tenant: str, space: str, hashes: Sequence[str]) -> int:
        """Cold entries whose files are gone; the rows that referenced them lose the reference."""
        n = 0
        with self._lc_tx() as conn:
            for h in sorted(set(hashes)):
                n += int(self._x(conn, "DELETE FROM cold_vectors WHERE tenant=? AND space=? AND content_hash=?",
                                 (tenant, space, h)).rowcount or 0)
                self._x(conn, "UPDATE sidecar SET cold_ref=NULL WHERE tenant=? AND space=? AND content_hash=? "
                              "AND cold_ref IS NOT NULL", (tenant, space, h))
        return n
