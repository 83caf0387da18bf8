"""The scheduler's sweeps, each a page per tick from a cursor kept in the store: orphan vectors
and cold entries, cold copies of vectors that are back, superseded change-log entries, sidecar
rows of deleted documents, budget deferrals of a past day, and the (tenant, space) pairs the cold
store's orphan sweep walks."""

from __future__ import annotations

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.model import DocKey, SemanticStatus
from shared.ports import CodeCursor, ColdRow, GonePage, RowCursor

# The distinct (tenant, space) of a table by a loose index scan: one seek for each tenant, then
# one for each of its spaces (`space >= ''`: the sidecar's index is partial on it). SQLite and
# PostgreSQL (15) read every row for DISTINCT or UNION: `known_spaces` took 0.25-0.30 s (SQLite)
# and 0.75-1.2 s (PostgreSQL) a tick over 1M sidecar rows and 200k cold entries of 50 tenants,
# now ~1 ms and 6-10 ms. The cost follows the pairs, not the rows: at 10,000 tenants of 100
# rows each it is 0.35 s (SQLite) and 0.48 s (PostgreSQL), against 0.40 s and 1.4 s.
_PAIRS = """WITH RECURSIVE
 t(tenant) AS (SELECT MIN(tenant) FROM {t} UNION ALL
               SELECT (SELECT MIN(x.tenant) FROM {t} x WHERE x.tenant > t.tenant) FROM t WHERE t.tenant IS NOT NULL),
 p(tenant, space) AS (SELECT t.tenant, (SELECT MIN(x.space) FROM {t} x WHERE x.tenant = t.tenant AND x.space >= '')
                      FROM t WHERE t.tenant IS NOT NULL UNION ALL
                      SELECT p.tenant, (SELECT MIN(x.space) FROM {t} x WHERE x.tenant = p.tenant AND x.space > p.space
                                        AND x.space >= '') FROM p WHERE p.space IS NOT NULL)
SELECT tenant, space FROM p WHERE space IS NOT NULL"""

# `_PAIRS` from a pair on, a bounded number of steps: the pairs of {t} from (?, ?) on (itself
# included), at most ? steps (two arguments: the start, then the bound). A step is the next space
# of the tenant (one seek) or, once the tenant has none left (a row with a NULL space), the next
# tenant's first space (two seeks); so `n` steps give at least (n - 1) // 2 pairs. The orphan sweep
# reads a page of these a time (`known_spaces_page`) instead of every pair at every tick.
_PAIRS_FROM = """WITH RECURSIVE
 p(n, tenant, space) AS (
  SELECT 1, CAST(? AS TEXT), (SELECT MIN(x.space) FROM {t} x WHERE x.tenant = ? AND x.space >= ? AND x.space >= '')
  UNION ALL
  SELECT p.n + 1,
         CASE WHEN p.space IS NULL THEN (SELECT MIN(y.tenant) FROM {t} y WHERE y.tenant > p.tenant) ELSE p.tenant END,
         CASE WHEN p.space IS NULL
              THEN (SELECT MIN(x.space) FROM {t} x WHERE x.space >= ''
                    AND x.tenant = (SELECT MIN(y.tenant) FROM {t} y WHERE y.tenant > p.tenant))
              ELSE (SELECT MIN(x.space) FROM {t} x WHERE x.tenant = p.tenant AND x.space > p.space AND x.space >= '')
         END
  FROM p WHERE p.tenant IS NOT NULL AND p.n < ?)
SELECT tenant, space FROM p WHERE space IS NOT NULL ORDER BY n"""

# The distinct spaces of the sidecar by a loose scan of `sidecar_by_status`: one seek each.
_SPACES_OF_ROWS = """WITH RECURSIVE s(space) AS (SELECT MIN(space) FROM sidecar UNION ALL
 SELECT (SELECT MIN(x.space) FROM sidecar x WHERE x.space > s.space) FROM s WHERE s.space IS NOT NULL)
SELECT space FROM s WHERE space IS NOT NULL"""


class SweepsSql(SqlBase):
    """The scheduler's paged sweeps."""

    def known_spaces(self) -> list[tuple[str, str]]:
        rows = [*self._read(_PAIRS.format(t="sidecar")), *self._read(_PAIRS.format(t="cold_vectors")),
                *self._read("SELECT tenant, space FROM tenant_spaces")]
        return sorted({(str(r["tenant"]), str(r["space"])) for r in rows})

    def known_spaces_page(self, start: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """The first `limit` pairs of `known_spaces` from `start` on (`start` itself included when
        known; None: from the first): a page from each table by a bounded loose index scan
        (`_PAIRS_FROM`), merged. Each table's first `limit` pairs from `start` hold every pair of
        the union's first `limit`, so a walk by pages finds what `known_spaces` gives, at a cost
        that follows `limit`, not the tenants (at 10,000 tenants `known_spaces` took 0.14-0.35 s
        on SQLite and 0.48 s on PostgreSQL, at every tick of the orphan sweep)."""
        if limit <= 0:
            return []
        tenant, space = start if start is not None else ("", "")
        steps = 2 * limit + 1  # enough for `limit` pairs whatever their tenants (see _PAIRS_FROM)
        rows = [*self._read(_PAIRS_FROM.format(t="sidecar") + " LIMIT ?", (tenant, tenant, space, steps, limit)),
                *self._read(_PAIRS_FROM.format(t="cold_vectors") + " LIMIT ?", (tenant, tenant, space, steps, limit)),
                *self._read("SELECT tenant, space FROM tenant_spaces WHERE (tenant, space) >= (?, ?) "
                            "ORDER BY tenant, space LIMIT ?", (tenant, space, limit))]
        return sorted({(str(r["tenant"]), str(r["space"])) for r in rows})[:limit]

    # Vectors and cold entries of content no document has, and cold copies of vectors that are
    # back: a page of `limit` keys per tick from a cursor the scheduler keeps (`sweep_cursor`),
    # as `prune_gone_rows`. A query over the whole table each tick, with a document lookup per
    # row, took 1.1 s (SQLite) and 1.9 s (PostgreSQL) at 1M vectors and 200k cold entries to
    # find nothing, the cold copies' 0.23-0.26 s. What a pass finds is the same as a whole-table
    # query would; it is found up to a pass later (1M vectors at 5,000 a tick of 60 s: 3.3 h),
    # which costs only the storage of content nobody reads meanwhile (a document that takes the
    # content again reuses the vector or the cold entry).

    _NO_DOC = "NOT EXISTS (SELECT 1 FROM docs d WHERE d.tenant=t.tenant AND d.content_hash=t.content_hash)"

    def prune_orphan_vectors(self, after: CodeCursor | None, limit: int) -> tuple[int, CodeCursor | None]:
        found, cursor = self._code_page("vectors", self._NO_DOC, after, limit)
        removed = 0
        if not found:
            return 0, cursor
        with self._lc_tx() as conn:
            keys = sorted((str(r["tenant"]), str(r["content_hash"]), str(r["space"])) for r in found)
            self._lc_lock_vectors(conn, keys)
            for t, h, sp in keys:  # checked again in the transaction: a write may have reused it
                removed += int(self._x(conn, "DELETE FROM vectors WHERE tenant=? AND content_hash=? AND space=? AND "
                                             "NOT EXISTS (SELECT 1 FROM docs WHERE tenant=? AND content_hash=?)",
                                       (t, h, sp, t, h)).rowcount or 0)
        return removed, cursor

    def prune_orphan_cold(self, after: CodeCursor | None, limit: int) -> tuple[list[ColdRow], CodeCursor | None]:
        found, cursor = self._code_page("cold_vectors", self._NO_DOC, after, limit, ref=True)
        gone: list[ColdRow] = []
        if not found:
            return gone, cursor
        with self._lc_tx() as conn:
            for r in sorted(found, key=lambda r: (r["tenant"], r["content_hash"], r["space"])):
                cur = self._x(conn, "DELETE FROM cold_vectors WHERE tenant=? AND content_hash=? AND space=? AND "
                                    "NOT EXISTS (SELECT 1 FROM docs WHERE tenant=? AND content_hash=?)",
                              (r["tenant"], r["content_hash"], r["space"], r["tenant"], r["content_hash"]))
                if cur.rowcount:
                    gone.append((str(r["tenant"]), str(r["content_hash"]), str(r["space"]), str(r["ref"])))
        return gone, cursor

    def prune_cold_copies(self, after: CodeCursor | None, limit: int) -> tuple[list[ColdRow], CodeCursor | None]:
        back = ("EXISTS (SELECT 1 FROM vectors v WHERE v.tenant=t.tenant AND v.content_hash=t.content_hash "
                "AND v.space=t.space)")
        found, cursor = self._code_page("cold_vectors", back, after, limit, ref=True)
        gone: list[ColdRow] = []
        if not found:
            return gone, cursor
        refs = {(str(r["tenant"]), str(r["content_hash"]), str(r["space"])): str(r["ref"]) for r in found}
        with self._lc_tx() as conn:
            keys = sorted(refs)
            self._lc_lock_vectors(conn, keys)
            for t, h, sp in keys:  # checked again in the transaction: an eviction may have taken it
                cur = self._x(conn, "DELETE FROM cold_vectors WHERE tenant=? AND content_hash=? AND space=? AND "
                                    "EXISTS (SELECT 1 FROM vectors WHERE tenant=? AND content_hash=? AND space=?)",
                              (t, h, sp, t, h, sp))
                if cur.rowcount:
                    gone.append((t, h, sp, refs[(t, h, sp)]))
        return gone, cursor

    # The change log, compacted by pages: an entry goes once a later one of the same key, op and
    # space exists (the followers apply a key's current state, `IndexFollower._apply`, so the
    # later entry does everything the earlier would have; a follower between the two has applied
    # the earlier already). Without it the log only grew: every edit, embedding, eviction and
    # rehydration of a document added an entry for good, and an index rebuild replays them all.
    # Grouped by op too, though the space already separates keyword entries (none) from vector
    # ones: an op added later with a meaning of its own stays safe.

    _SUPERSEDED = ("EXISTS (SELECT 1 FROM changes d WHERE d.tenant=changes.tenant AND d.collection=changes.collection "
                   "AND d.doc_id=changes.doc_id AND d.op=changes.op AND d.seq>changes.seq "
                   "AND (d.space=changes.space OR (d.space IS NULL AND changes.space IS NULL)))")

    def compact_changes(self, after: int | None, limit: int) -> tuple[dict[str, int], int | None]:
        start = 0 if after is None else after
        # the page's last entry and one more, to know whether the end is reached
        bound = [int(r["seq"]) for r in self._read("SELECT seq FROM changes WHERE seq>? ORDER BY seq LIMIT 2 OFFSET ?",
                                                   (start, max(0, limit - 1)))]
        last = bound[0] if len(bound) == 2 else None
        upto, args = ("", (start,)) if last is None else (" AND seq<=?", (start, last))
        removed: dict[str, int] = {}
        with self._lc_tx() as conn:
            for r in self._x(conn, f"DELETE FROM changes WHERE seq>?{upto} AND {self._SUPERSEDED} RETURNING tenant",
                             args).fetchall():
                removed[str(r["tenant"])] = removed.get(str(r["tenant"]), 0) + 1
        return removed, last

    def prune_gone_rows(self, after: RowCursor | None, limit: int) -> GonePage:
        """Sidecar rows whose document is gone, in any status, deleted as the document's delete
        would have. A backfill's `ensure_sidecars` racing a delete can leave such rows, and the
        reconciler repairs only `queued` ones: the rest would stay in coverage for good.
        Examines the next `limit` rows in key order after `after` (a scan of the whole table per
        tick to find none, once they are gone, would cost more than the leftovers ever did).
        Vectors and cold entries of content no document has are `prune_orphans`' already, as
        after a delete; a `ready` row's point is logged away (`unvector` with its space, so it
        also leaves a space no tenant reads). Returns the rows deleted and where the next page
        starts, None once the end is reached."""
        found, cursor = self._gone_page(after, limit)
        gone: list[tuple[DocKey, str]] = []
        ready: list[tuple[DocKey, str, str | None]] = []
        if not found:
            return gone, cursor
        doc = ("SELECT 1 FROM docs d WHERE d.tenant=sidecar.tenant AND d.collection=sidecar.collection "
               "AND d.doc_id=sidecar.doc_id")
        with self._lc_tx() as conn:
            for key, space in sorted(found):  # the writers' lock order
                # The row is locked before its NOT EXISTS runs, in a statement of its own: a
                # DELETE that waits for a re-create's write of the row re-checks the row, but
                # its NOT EXISTS keeps the snapshot from before the new document, so under READ
                # COMMITTED it would delete the row of a document that exists (PostgreSQL).
                # A write that has not reached the row yet waits for this commit and writes the
                # row anew (a retired space it does not write gets one when it is realigned); a
                # document committed meanwhile is seen by the DELETE.
                row = (*key, space)
                self._x(conn, "SELECT 1 FROM sidecar WHERE tenant=? AND collection=? AND doc_id=? AND space=?"
                              f"{self._FOR_UPDATE}", row).fetchall()
                for r in self._x(conn, "DELETE FROM sidecar WHERE tenant=? AND collection=? AND doc_id=? AND space=? "
                                       f"AND NOT EXISTS ({doc}) RETURNING status", row).fetchall():
                    gone.append((key, space))
                    if r["status"] == SemanticStatus.READY.value:
                        ready.append((key, "unvector", space))
            self._lc_log(conn, ready)
        return gone, cursor

    def _gone_page(self, after: RowCursor | None, limit: int) -> GonePage:
        """Of the next `limit` sidecar rows after `after`, those whose document is gone now (a
        read, re-checked by the delete), and the last row examined (None: the end)."""
        found, cursor = self._row_page("NOT EXISTS (SELECT 1 FROM docs d WHERE d.tenant=s.tenant "
                                       "AND d.collection=s.collection AND d.doc_id=s.doc_id)", (), after, limit)
        return [(DocKey(r["tenant"], r["collection"], r["doc_id"]), str(r["space"])) for r in found], cursor

    def requeue_budget_deferred(self, before: float) -> int:
        # Space by space, so each statement reads `sidecar_by_status` (space, status, updated_at)
        # instead of every row: without the space the planner scanned the table each tick
        # (PostgreSQL 56 -> 1.5 ms at 1M rows, SQLite without statistics 38 -> 0.2 ms).
        # The spaces by a loose scan of that index (0.08 ms), not `known_spaces`, whose
        # cost follows the tenants (0.26 s at 10,000 of them).
        spaces = [str(r["space"]) for r in self._read(_SPACES_OF_ROWS)]
        with self._lc_tx() as conn:
            return sum(int(self._x(conn, "UPDATE sidecar SET status='none', reason=NULL WHERE space=? AND "
                                         "status='deferred' AND reason='budget' AND updated_at<?",
                                   (space, before)).rowcount or 0) for space in spaces)
