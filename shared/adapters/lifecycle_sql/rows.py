"""Sidecar rows kept in line with the documents: a document write's rows in the tenant's other
spaces, a backfill's missing rows, and the reconciler's repair of rows no job can finish."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import _ALIGNED, SqlBase
from shared.model import DocKey, SidecarEntry, StoredDoc


class SidecarRowsSql(SqlBase):
    """Sidecar rows aligned with the documents."""

    def _lc_lock_spaces(self, conn: Any, tenants: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """First statement of a document write: share-lock the tenants' space rows (a cut-over,
        `switch_space`, locks them for update) and read them as they are now."""
        out: dict[str, list[tuple[str, str]]] = {}
        for tenant in sorted(set(tenants)):
            rows = self._x(conn, f"SELECT space, state FROM tenant_spaces WHERE tenant=? ORDER BY space"
                                 f"{self._FOR_SHARE}", (tenant,)).fetchall()
            out[tenant] = [(str(r["space"]), str(r["state"])) for r in rows]
        return out

    def _lc_align_written(self, conn: Any, docs: Sequence[StoredDoc], planned: set[tuple[DocKey, str]],
                          spaces: dict[str, list[tuple[str, str]]], now: float) -> list[tuple[DocKey, str, str | None]]:
        """In the write's transaction, after its documents and planned rows: the written
        documents' rows in every other space of the tenant (a retired space, or one a cut-over
        made current after the write read the spaces) take the new content hash (`stale` or
        `none`, without the cold reference of the old content), and an active or building space
        the write did not plan for gets a `none` row. So no row waits for a job of content
        that is gone (it would stay `queued` forever) and no active space misses a document.
        Returns the change-log rows (the vector index drops old points)."""
        new = {d.key: d.content_hash for d in docs}
        rows: list[Mapping[str, Any]] = []
        by_col: dict[tuple[str, str], list[str]] = {}
        for k in new:
            by_col.setdefault((k.tenant, k.collection), []).append(k.doc_id)
        spaces_of: dict[DocKey, set[str]] = {}
        for k, space in planned:
            spaces_of.setdefault(k, set()).add(space)
        for (tenant, collection), ids in sorted(by_col.items()):
            for i in range(0, len(ids), 500):
                chunk = sorted(ids[i:i + 500])
                # The spaces planned for every document of the chunk are left out in SQL: their rows
                # were just written, and a bulk write then reads back no row at all (a tenant with
                # one space) instead of one per document (~4% of bulk ingest).
                done = sorted(set.intersection(*(spaces_of.get(DocKey(tenant, collection, d), set())
                                                 for d in chunk)))
                skip = f" AND space NOT IN ({','.join('?' * len(done))})" if done else ""
                rows += self._x(conn, "SELECT tenant, collection, doc_id, space, content_hash FROM sidecar "
                                      f"WHERE tenant=? AND collection=? AND doc_id IN ({','.join('?' * len(chunk))})"
                                      f"{skip} ORDER BY doc_id, space", (tenant, collection, *chunk, *done)).fetchall()
        logged: list[tuple[DocKey, str, str | None]] = []
        have: set[tuple[DocKey, str]] = set()
        for r in rows:
            key = DocKey(r["tenant"], r["collection"], r["doc_id"])
            have.add((key, r["space"]))
            if (key, r["space"]) in planned or r["content_hash"] == new[key]:
                continue
            cur = self._x(conn, f"UPDATE sidecar SET status={_ALIGNED}, reason=NULL, cold_ref=NULL, attempts=0, "
                                "updated_at=?, content_hash=? WHERE tenant=? AND collection=? AND doc_id=? AND space=? "
                                "AND content_hash=?", (now, new[key], *key, r["space"], r["content_hash"]))
            if cur.rowcount:
                logged.append((key, "unvector", r["space"]))
        for key, chash in sorted(new.items()):
            for space, state in spaces.get(key.tenant, []):
                if state in ("active", "building") and (key, space) not in planned and (key, space) not in have:
                    self._x(conn, "INSERT INTO sidecar (tenant, collection, doc_id, space, status, content_hash, "
                                  "reason, attempts, updated_at) VALUES (?,?,?,?,'none',?,NULL,0,?) "
                                  "ON CONFLICT (tenant, collection, doc_id, space) DO NOTHING",
                            (*key, space, chash, now))
        return logged

    def ensure_sidecars(self, entries: Sequence[SidecarEntry]) -> int:
        n = 0
        with self._lc_tx() as conn:
            for s in sorted(entries, key=lambda s: (s.key, s.space)):
                # Only while the document exists, read under a share lock: a backfill read the
                # document a moment ago, and a row inserted after its delete committed would stay
                # for good (a delete removes the rows it sees; nothing else removes a `none` one).
                n += int(self._x(conn, "INSERT INTO sidecar (tenant, collection, doc_id, space, status, content_hash, "
                                       "reason, attempts, updated_at) "
                                       "SELECT tenant, collection, doc_id, ?, ?, ?, ?, 0, ? FROM docs "
                                       f"WHERE tenant=? AND collection=? AND doc_id=?{self._FOR_SHARE} "
                                       "ON CONFLICT (tenant, collection, doc_id, space) DO NOTHING",
                                 (s.space, s.status.value, s.content_hash, s.reason, s.updated_at,
                                  *s.key)).rowcount or 0)
        return n

    def repair_queued(self, space: str, keys: Sequence[DocKey], stuck_before: float,
                      now: float) -> dict[str, list[DocKey]]:
        """The reconciler's stuck rows that a job can never finish (the handler drops a job
        whose document is gone or whose content changed, so re-enqueued they stay `queued` for
        good): a row of a document that is gone is deleted, as the document's delete would have;
        a row of content its document no longer has takes the document's hash and goes `stale`
        without a cold reference, as a write aligns a space it did not plan for (the old content
        is never embedded; the new one is when a read or a backfill asks). The statements
        re-check that the row is still `queued` since before `stuck_before`, so a write
        committed meanwhile wins (PostgreSQL re-reads a row it waited for)."""
        out: dict[str, list[DocKey]] = {"document_gone": [], "content_changed": []}
        doc = ("FROM docs d WHERE d.tenant=sidecar.tenant AND d.collection=sidecar.collection "
               "AND d.doc_id=sidecar.doc_id")
        by_col: dict[tuple[str, str], list[str]] = {}
        for k in set(keys):
            by_col.setdefault((k.tenant, k.collection), []).append(k.doc_id)
        with self._lc_tx() as conn:
            for (tenant, collection), ids in sorted(by_col.items()):
                ids.sort()
                for i in range(0, len(ids), 500):
                    chunk = ids[i:i + 500]
                    where = (f"WHERE tenant=? AND collection=? AND doc_id IN ({','.join('?' * len(chunk))}) "
                             "AND space=? AND status='queued' AND updated_at<?")
                    args = (tenant, collection, *chunk, space, stuck_before)
                    gone = self._x(conn, f"DELETE FROM sidecar {where} AND NOT EXISTS (SELECT 1 {doc}) "
                                         "RETURNING doc_id", args).fetchall()
                    changed = self._x(conn, f"UPDATE sidecar SET status={_ALIGNED}, reason=NULL, cold_ref=NULL, "
                                            f"attempts=0, updated_at=?, content_hash=(SELECT d.content_hash {doc}) "
                                            f"{where} AND content_hash<>(SELECT d.content_hash {doc}) "
                                            "RETURNING doc_id", (now, *args)).fetchall()
                    out["document_gone"] += [DocKey(tenant, collection, r["doc_id"]) for r in gone]
                    out["content_changed"] += [DocKey(tenant, collection, r["doc_id"]) for r in changed]
            # a row queued again after it was ready may still have a point of the old content
            self._lc_log(conn, [(k, "unvector", space) for k in out["content_changed"]])
        return out
