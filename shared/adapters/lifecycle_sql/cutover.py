"""Cut-overs between a tenant's spaces: the switch in one transaction, the rows a space made
current needs (filled for documents without one, realigned after a retirement), in batches
before the switch so it only looks at what was written since, and a migration's backlog."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import _ALIGNED
from shared.adapters.lifecycle_sql.spaces import SpacesSql
from shared.model import DocKey, SpaceInfo


class CutoverSql(SpacesSql):
    """Cut-overs, fills and realignments."""

    def switch_space(self, to: SpaceInfo, expect: str, retire: SpaceInfo | None, now: float,
                     fill_rows: bool = False, filled_since: float | None = None,
                     realigned_since: float | None = None) -> int | None:
        """One transaction for a cut-over: `to` takes its new state (active, or building for a
        gradual way back) only if its row is still in state `expect`, `retire` (the tenant's
        active space) becomes retired, and a space coming back from `retired` is realigned
        with the documents (`realign_space`). The tenant's space rows are locked first (the
        same order as every writer's share lock), so a document write either commits before
        and is seen by the realignment, or waits and sees the new spaces. Returns the rows
        realigned, or None (nothing changed) when `to` was not in state `expect` (a retention
        expiry claimed it, another operator switched first). With `realigned_since`, the
        realignment looks only at documents written since then (`realign_space_rows` did the
        rest before, in batches)."""
        with self._lc_tx() as conn:
            rows = self._x(conn, f"SELECT space, state FROM tenant_spaces WHERE tenant=? ORDER BY space"
                                 f"{self._FOR_UPDATE}", (to.tenant,)).fetchall()
            if next((r["state"] for r in rows if r["space"] == to.space), None) != expect:
                return None
            self._put_space(conn, to)
            if retire is not None:
                self._put_space(conn, retire)
            if expect == "retired":
                return self._realign(conn, to.tenant, to.space, now, since=realigned_since)
            if to.state == "active" and fill_rows:
                # A forced cut-over leaves the documents the migration never reached without a row
                # in the new space; a touch never spends on a document without a row, and coverage
                # would not count it (a space could show 100% with documents missing). One pass over the tenant's
                # documents, so only then: a finished migration has passed every document.
                return self._rows_for_every_doc(conn, to.tenant, to.space, now, filled_since)
            return 0

    def fill_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                        now: float) -> tuple[int, tuple[str, str] | None]:
        # One short transaction per batch, in key order: a forced cut-over's own pass over every
        # document would hold the tenant's writes for as long as the pass (about 19 s at 1M
        # documents on SQLite); after these batches it only looks at what was written since
        # (`filled_since`).
        return self._in_batch(tenant, after, limit, lambda conn, where, args: self._none_rows(
            conn, tenant, space, now, where, args))

    def realign_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                           now: float) -> tuple[int, tuple[str, str] | None]:
        # The same for a retired space made current again: realigned inside the cut-over, a
        # tenant's writes would wait as long as the whole pass (1.4-1.6 s at 1M documents on
        # SQLite, 1.2 s at 200k on PostgreSQL), like the forced fill's single pass.
        return self._in_batch(tenant, after, limit, lambda conn, where, args: self._realign(
            conn, tenant, space, now, span=(where, args)))

    def _in_batch(self, tenant: str, after: tuple[str, str] | None, limit: int,
                  step: Callable[[Any, str, Sequence[object]], int]) -> tuple[int, tuple[str, str] | None]:
        """`step` in a transaction of its own over the next `limit` documents of the tenant after
        the key `after` (None: from the first), given as a condition on (collection, doc_id) that
        fits both the documents and the sidecar (the last batch is open-ended, so it also takes
        rows past the last document). Returns what `step` counted and the batch's last key, None
        once the end is reached."""
        lo = after or ("", "")
        with self._lc_tx() as conn:
            end = self._x(conn, "SELECT collection, doc_id FROM docs WHERE tenant=? AND (collection, doc_id) > (?, ?) "
                                "ORDER BY collection, doc_id LIMIT 1 OFFSET ?", (tenant, *lo, limit - 1)).fetchone()
            upto = " AND (collection, doc_id) <= (?, ?)" if end is not None else ""
            bound = () if end is None else (end["collection"], end["doc_id"])
            n = step(conn, f" AND (collection, doc_id) > (?, ?){upto}", (*lo, *bound))
        return n, None if end is None else (str(end["collection"]), str(end["doc_id"]))

    def realign_space(self, tenant: str, space: str, now: float) -> int:
        """Bring a tenant's space that was retired up to date with the documents (it was not
        written to meanwhile): rows of content edited since go `stale` (or `none`) with the
        document's hash and no cold reference, rows left `queued` go back to `none` (their jobs
        are gone), documents written since get a `none` row. A row that is still `ready` is
        logged again, so the vector index re-reads it with the document's current ACL."""
        with self._lc_tx() as conn:
            return self._realign(conn, tenant, space, now)

    def _realign(self, conn: Any, tenant: str, space: str, now: float, since: float | None = None,
                 span: tuple[str, Sequence[object]] | None = None) -> int:
        """`realign_space` over every document of the tenant, or those written since `since`
        (a write keeps a retired space's rows on its content itself; it gives no row there and
        its ACL may have changed), or those of a key range `span` (a condition on collection and
        doc_id with its arguments, from `_in_batch`). Outside a batch, every `queued` row goes
        back to `none` (the status index finds them): no job is coming for a retired space."""
        if span is not None:
            return self._realign_where(conn, tenant, space, now, *span, queued=True)
        if since is None:
            return self._realign_where(conn, tenant, space, now, queued=True)
        # The documents written since, read once and named by key: a condition on `updated_at` in
        # each statement scanned the tenant's documents three times inside the cut-over (PostgreSQL,
        # 200k documents: writes held 0.48 s, about what the batches before it had saved).
        # Sorted here, not in SQL: SQLite then walked the tenant's primary key for the order
        # instead of taking docs_by_update (it cannot tell how few documents are that recent).
        recent: dict[str, list[str]] = {}
        for collection, doc_id in sorted((str(r["collection"]), str(r["doc_id"])) for r in self._x(
                conn, "SELECT collection, doc_id FROM docs WHERE tenant=? AND updated_at >= ?",
                (tenant, since)).fetchall()):
            recent.setdefault(collection, []).append(doc_id)
        n = 0
        for collection, ids in recent.items():
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                n += self._realign_where(conn, tenant, space, now,
                                         f" AND collection=? AND doc_id IN ({','.join('?' * len(chunk))})",
                                         (collection, *chunk))
        # then, as over every document, the `queued` rows (after the content check, which sends a
        # queued row of changed content to `stale`)
        return n + int(self._x(conn, "UPDATE sidecar SET status='none', reason=NULL, updated_at=? "
                                     "WHERE tenant=? AND space=? AND status='queued'",
                               (now, tenant, space)).rowcount or 0)

    def _realign_where(self, conn: Any, tenant: str, space: str, now: float, where: str = "",
                       args: Sequence[object] = (), queued: bool = False) -> int:
        """`_realign` for the documents and rows of the tenant that meet `where` (a condition on
        collection and doc_id, which both tables have), with their `queued` rows if `queued`."""
        doc_hash = ("(SELECT d.content_hash FROM docs d WHERE d.tenant=sidecar.tenant "
                    "AND d.collection=sidecar.collection AND d.doc_id=sidecar.doc_id)")
        ready = [DocKey(tenant, r["collection"], r["doc_id"]) for r in self._x(
            conn, f"SELECT collection, doc_id FROM sidecar WHERE tenant=? AND space=? AND status='ready'{where} "
                  "ORDER BY collection, doc_id", (tenant, space, *args)).fetchall()]
        n = int(self._x(conn, f"UPDATE sidecar SET status={_ALIGNED}, reason=NULL, cold_ref=NULL, "
                              f"attempts=0, updated_at=?, content_hash={doc_hash} "
                              f"WHERE tenant=? AND space=? AND content_hash<>{doc_hash}{where}",
                        (now, tenant, space, *args)).rowcount or 0)
        if queued:
            n += int(self._x(conn, f"UPDATE sidecar SET status='none', reason=NULL, updated_at=? "
                                   f"WHERE tenant=? AND space=? AND status='queued'{where}",
                             (now, tenant, space, *args)).rowcount or 0)
        n += self._none_rows(conn, tenant, space, now, where, args)
        self._lc_log(conn, [(k, "vector", space) for k in ready])
        return n

    def _rows_for_every_doc(self, conn: Any, tenant: str, space: str, now: float,
                            since: float | None = None) -> int:
        """A `none` row in `space` for every document of the tenant that has none there (with
        `since`: of those written since then, the rest being filled already). The documents are
        read under a share lock (PostgreSQL), as in `fill_space_rows`: without it, under READ
        COMMITTED the insert can still see a document whose delete commits meanwhile, and that
        delete, not seeing the new row, leaves it behind for good (concurrent deletes during a
        fill left hundreds of such rows in tens of thousands of documents)."""
        if since is None:
            return self._none_rows(conn, tenant, space, now)
        return self._none_rows(conn, tenant, space, now, " AND updated_at >= ?", (since,))

    def _none_rows(self, conn: Any, tenant: str, space: str, now: float, where: str = "",
                   args: Sequence[object] = ()) -> int:
        """A `none` row in `space` for each document of the tenant (and `where`) that has none."""
        return int(self._x(conn, "INSERT INTO sidecar (tenant, collection, doc_id, space, status, content_hash, "
                                 "reason, attempts, updated_at) SELECT tenant, collection, doc_id, ?, 'none', "
                                 f"content_hash, NULL, 0, ? FROM docs WHERE tenant=?{where}{self._FOR_SHARE} "
                                 "ON CONFLICT (tenant, collection, doc_id, space) DO NOTHING",
                           (space, now, tenant, *args)).rowcount or 0)

    def migration_backlog(self, tenant: str, space: str, source: str, scope: str,
                          eager: Sequence[str] = ()) -> dict[str, int]:
        """The documents a migration into `space` has still to embed, by their state there
        (`none` also for a document without a row yet): every document of the tenant for scope
        `all`; for `ready`, those `ready` or `queued` in `source` (the active space, as it is
        now: what a read touches during the migration joins it) and those of the `eager`
        collections."""
        sql = ("SELECT COALESCE(n.status, 'none') AS status, COUNT(*) AS c FROM docs d "
               "LEFT JOIN sidecar n ON n.tenant=d.tenant AND n.collection=d.collection AND n.doc_id=d.doc_id "
               "AND n.space=? ")
        args: list[object] = [space]
        # an evicted vector (`none` with a cold reference) is embedded in the space already: were
        # it counted as waiting, every eviction of the new space would restart the migration, which
        # rehydrates it, and the next eviction sends it cold again (a loop of evictions that also
        # keeps activation refusing)
        where = (" WHERE d.tenant=? AND (n.status IS NULL OR n.status IN ('queued', 'stale') "
                 "OR (n.status='none' AND n.cold_ref IS NULL))")
        in_eager: list[str] = []
        if scope != "all":
            sql += ("LEFT JOIN sidecar o ON o.tenant=d.tenant AND o.collection=d.collection AND o.doc_id=d.doc_id "
                    "AND o.space=? ")
            args.append(source)
            in_eager = sorted(set(eager))
            where += " AND (o.status IN ('ready', 'queued')"
            where += f" OR d.collection IN ({','.join('?' * len(in_eager))}))" if in_eager else ")"
        rows = self._read(sql + where + " GROUP BY COALESCE(n.status, 'none')", (*args, tenant, *in_eager))
        out = {"none": 0, "queued": 0, "stale": 0}
        for r in rows:
            out[str(r["status"])] = int(r["c"])
        return out
