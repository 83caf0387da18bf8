"""The `LifecycleStore` half of both stores of record, written once.

SQLite and PostgreSQL share this SQL: `?` placeholders (turned into `%s` for psycopg),
`INSERT ... ON CONFLICT ... DO UPDATE` (both dialects), `DOUBLE PRECISION` (SQLite reads it as
REAL) and no dialect functions except the power of two used for decay (`_POW2`: PostgreSQL's
`power`, a function the SQLite adapter registers on its connections). Each store supplies its
transactions, reads, change-log append and row locking (the hooks at the top of the class);
every statement here runs inside them, so a lifecycle decision is one transaction too.
The tables and indexes, and why each index exists, are in shared/adapters/schema/.

Decay without a read-modify-write: a document's `touches` are stored as of `decayed_at`; an
upsert scales the stored value to the new time and adds, in one statement, so two API processes
flushing at once both count.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from shared.costs import utc_day
from shared.model import (
    BackfillTask,
    CollectionMode,
    CollectionUsage,
    DocKey,
    SemanticStatus,
    SidecarEntry,
    SpaceInfo,
    StoredDoc,
    UsageBatch,
)
from shared.ports import CodeCursor, ColdRow, GonePage, RowCursor

CURSOR_SEP = "\x1f"

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
_MAX = "CASE WHEN {a} > {b} THEN {a} ELSE {b} END"  # greatest() / max() differ between dialects
# A row whose content changed while its space was not written (retired): `stale` if it had (or
# was getting) a vector of the old content, else `none`; either way without the cold reference.
_ALIGNED = "CASE WHEN status IN ('ready','queued','stale') OR cold_ref IS NOT NULL THEN 'stale' ELSE 'none' END"


def _mode(r: Mapping[str, Any]) -> CollectionMode:
    return CollectionMode(r["tenant"], r["collection"], r["mode"], float(r["since"]), r["reason"],
                          bool(r["manual"]), json.loads(r["figures"] or "{}"))


def _task(r: Mapping[str, Any]) -> BackfillTask:
    return BackfillTask(r["id"], r["tenant"], r["collection"], r["space"], r["kind"], bool(r["forced"]),
                        r["position_key"], int(r["examined"]), int(r["queued"]), int(r["total"]), r["state"],
                        float(r["created_at"]), float(r["updated_at"]))


def _space(r: Mapping[str, Any]) -> SpaceInfo:
    # a space retired before retirements were recorded counts from its last activation
    retired = (r["retired_at"] or r["activated_at"] or r["created_at"]) if r["state"] in ("retired", "expiring") \
        else None
    return SpaceInfo(r["tenant"], r["space"], r["model_id"], int(r["dim"]), r["state"], float(r["created_at"]),
                     r["activated_at"], None if retired is None else float(retired), r["scope"] or "all")


_SPACES = ("SELECT s.*, r.retired_at, m.scope FROM tenant_spaces s LEFT JOIN space_retirements r "
           "ON r.tenant=s.tenant AND r.space=s.space LEFT JOIN space_scopes m ON m.tenant=s.tenant AND m.space=s.space")


class LifecycleSql:
    """Mixin: the store class provides the hooks below."""

    clock: Callable[[], float]  # the store's (DocumentStore.clock)
    _PH = "?"
    _POW2 = "vibe_pow2({})"
    _FOR_UPDATE = ""
    _FOR_SHARE = ""  # PostgreSQL: " FOR SHARE" (SQLite writers are serial: BEGIN IMMEDIATE)

    # -- hooks ---------------------------------------------------------------------------

    def _lc_tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _lc_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        raise NotImplementedError

    def _lc_log(self, conn: Any, rows: Sequence[tuple[DocKey, str, str | None]]) -> None:
        raise NotImplementedError

    def _lc_lock_vectors(self, conn: Any, rows: Sequence[tuple[str, str, str]]) -> None:
        """Lock vector rows (tenant, hash, space) before a NOT EXISTS check (PostgreSQL)."""

    def _lc_row_to_sidecar(self, r: Mapping[str, Any]) -> SidecarEntry:
        raise NotImplementedError

    def follower_lease(self, name: str) -> AbstractContextManager[bool]:
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql if self._PH == "?" else sql.replace("?", self._PH)

    def _x(self, conn: Any, sql: str, params: Sequence[object] = ()) -> Any:
        return conn.execute(self._sql(sql), params)

    def _read(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._lc_rows(self._sql(sql), params)

    def lease(self, name: str) -> AbstractContextManager[bool]:
        return self.follower_lease(f"lease:{name}")

    # -- usage statistics --------------------------------------------------------------------

    def record_usage(self, batch: UsageBatch, now: float, bucket_seconds: float, half_life: float) -> None:
        if not batch:
            return
        bucket = int(now // bucket_seconds * bucket_seconds)
        docs: dict[DocKey, list[float]] = {}  # key -> [touches, cooccur, last used]
        for k, n in batch.touches.items():
            docs.setdefault(k, [0.0, 0.0, now])[0] += n
        for k, t in batch.used.items():
            row = docs.setdefault(k, [0.0, 0.0, t])
            row[2] = max(row[2], t)
        if batch.pages:
            pinned = self._pinned({k for page in batch.pages for k in page}, now)
            for page in batch.pages:
                hot = sum(1 for k in page if k in pinned)
                for k in page:
                    if hot - (k in pinned) > 0:
                        docs.setdefault(k, [0.0, 0.0, now])[1] += hot - (k in pinned)
        decay = self._POW2.format(
            "CASE WHEN doc_usage.decayed_at < excluded.decayed_at "
            f"THEN (doc_usage.decayed_at - excluded.decayed_at) / {float(half_life)!r} ELSE 0 END")
        newer = _MAX.format(a="excluded.decayed_at", b="doc_usage.decayed_at")
        last = _MAX.format(a="COALESCE(excluded.last_used_at, 0)", b="COALESCE(doc_usage.last_used_at, 0)")
        with self._lc_tx() as conn:
            for (tenant, collection), q in sorted(batch.queries.items()):
                self._x(conn,
                        "INSERT INTO usage_buckets VALUES (?,?,?,?,?,?) ON CONFLICT (tenant, collection, bucket) "
                        "DO UPDATE SET queries=usage_buckets.queries+excluded.queries, "
                        "hits=usage_buckets.hits+excluded.hits, last_at="
                        + _MAX.format(a="excluded.last_at", b="usage_buckets.last_at"),
                        (tenant, collection, bucket, q, batch.hits.get((tenant, collection), 0),
                         batch.last_query.get((tenant, collection), now)))
            day = utc_day(now)
            for (tenant, collection), (calls, tokens) in sorted(batch.provider.items()):
                self._x(conn, "INSERT INTO provider_usage VALUES (?,?,?,?,0,?) ON CONFLICT (tenant, day, collection) "
                              "DO UPDATE SET calls=provider_usage.calls+excluded.calls, "
                              "tokens=provider_usage.tokens+excluded.tokens", (tenant, day, collection, calls, tokens))
            for k, (touches, cooccur, used) in sorted(docs.items()):
                self._x(conn,
                        "INSERT INTO doc_usage VALUES (?,?,?,?,?,?,?,NULL) "
                        "ON CONFLICT (tenant, collection, doc_id) DO UPDATE SET "
                        f"touches=doc_usage.touches*{decay}+excluded.touches, "
                        f"cooccur=doc_usage.cooccur*{decay}+excluded.cooccur, "
                        f"decayed_at={newer}, last_used_at={last}",
                        (k.tenant, k.collection, k.doc_id, touches, cooccur, now, used))

    def _pinned(self, keys: set[DocKey], now: float) -> set[DocKey]:
        out: set[DocKey] = set()
        by_col: dict[tuple[str, str], list[str]] = {}
        for k in keys:
            by_col.setdefault((k.tenant, k.collection), []).append(k.doc_id)
        for (tenant, collection), ids in by_col.items():
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                rows = self._read("SELECT doc_id FROM doc_usage WHERE tenant=? AND collection=? AND pinned_until>? "
                                  f"AND doc_id IN ({','.join('?' * len(chunk))})", (tenant, collection, now, *chunk))
                out.update(DocKey(tenant, collection, r["doc_id"]) for r in rows)
        return out

    def collection_usage(self, since: float) -> list[CollectionUsage]:
        rows = self._read(
            "SELECT tenant, collection, SUM(CASE WHEN bucket>=? THEN queries ELSE 0 END) AS q, "
            "SUM(CASE WHEN bucket>=? THEN hits ELSE 0 END) AS h, MAX(last_at) AS last "
            "FROM usage_buckets GROUP BY tenant, collection", (since, since))
        return [CollectionUsage(r["tenant"], r["collection"], int(r["q"] or 0), int(r["h"] or 0), r["last"])
                for r in rows]

    def prune_usage(self, before: float) -> int:
        with self._lc_tx() as conn:
            return int(self._x(conn, "DELETE FROM usage_buckets WHERE bucket<?", (before,)).rowcount or 0)

    def _hot(self, now: float, touches: float, half_life: float,
             refresh_before: float | None) -> tuple[str, tuple[object, ...]]:
        """The condition on a doc_usage row `u` of `hot_docs`, and its arguments."""
        decay = self._POW2.format(f"(u.decayed_at - ?) / {float(half_life)!r}")
        return (f"(u.touches*{decay}>=? OR u.cooccur*{decay}>=?) AND COALESCE(u.pinned_until, 0)<?",
                (now, touches, now, touches, now if refresh_before is None else refresh_before))

    def hot_docs(self, now: float, touches: float, half_life: float, limit: int,
                 refresh_before: float | None = None) -> list[DocKey]:
        test, args = self._hot(now, touches, half_life, refresh_before)
        rows = self._read(f"SELECT u.tenant, u.collection, u.doc_id FROM doc_usage u WHERE {test} LIMIT ?",
                          (*args, limit))
        return [DocKey(r["tenant"], r["collection"], r["doc_id"]) for r in rows]

    def hot_docs_page(self, now: float, touches: float, half_life: float, after: DocKey | None, limit: int,
                      refresh_before: float | None = None) -> tuple[list[DocKey], DocKey | None]:
        """`hot_docs` over the next `limit` usage rows in key order after `after` (the scheduler's
        pins, a page a tick: the decay computed over every row took 0.58 s a tick on SQLite and
        0.1 s on PostgreSQL at 1M rows, /tmp script 2026-11-27), and the last key examined."""
        test, args = self._hot(now, touches, half_life, refresh_before)
        found, last = self._page("doc_usage u", ("tenant", "collection", "doc_id"), test, args, after, limit)
        keys = [DocKey(r["tenant"], r["collection"], r["doc_id"]) for r in found]
        return keys, None if last is None else DocKey(*last)

    def pin_docs(self, keys: Sequence[DocKey], until: float) -> int:
        with self._lc_tx() as conn:
            return sum(int(self._x(conn, "UPDATE doc_usage SET pinned_until=? WHERE tenant=? AND collection=? "
                                         "AND doc_id=?", (until, *k)).rowcount or 0) for k in sorted(set(keys)))

    def changes_pending(self, seq: int, tenant: str) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM changes WHERE seq>? AND tenant=?", (seq, tenant))
        return int(rows[0]["n"])

    def pinned_count(self, tenant: str, now: float) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM doc_usage WHERE tenant=? AND pinned_until>?", (tenant, now))
        return int(rows[0]["n"])

    def doc_usage(self, key: DocKey) -> dict[str, float | None] | None:
        rows = self._read("SELECT touches, cooccur, decayed_at, last_used_at, pinned_until FROM doc_usage "
                          "WHERE tenant=? AND collection=? AND doc_id=?", tuple(key))
        return dict(rows[0]) if rows else None

    # -- scheduler runs --------------------------------------------------------------------------

    def record_tick(self, at: float, changes: Mapping[str, Mapping[str, object]], failed: Sequence[str] = ()) -> None:
        """The last tick (any process's, scope `tick`, with the stages that failed) and, per tenant
        it changed something for, that tick's changes (scope `tenant:<name>`): GET /semantic/scheduler."""
        rows = [("tick", at, json.dumps({"failed": list(failed)} if failed else {})),
                *((f"tenant:{t}", at, json.dumps(c, sort_keys=True)) for t, c in sorted(changes.items()))]
        with self._lc_tx() as conn:
            for row in rows:
                self._x(conn, "INSERT INTO scheduler_runs VALUES (?,?,?) ON CONFLICT (scope) "
                              "DO UPDATE SET at=excluded.at, report=excluded.report", row)

    def last_ticks(self, tenant: str) -> tuple[float | None, tuple[float, dict[str, Any]] | None]:
        """(when the scheduler last ticked, (when and what it last changed for `tenant`) or None)."""
        rows = {r["scope"]: r for r in self._read("SELECT * FROM scheduler_runs WHERE scope IN (?, ?)",
                                                  ("tick", f"tenant:{tenant}"))}
        tick, mine = rows.get("tick"), rows.get(f"tenant:{tenant}")
        return (float(tick["at"]) if tick else None,
                (float(mine["at"]), json.loads(mine["report"])) if mine else None)

    def sweep_cursor(self, name: str) -> tuple[str, ...] | None:
        rows = self._read("SELECT cursor FROM sweep_cursors WHERE name=?", (name,))
        cursor = json.loads(rows[0]["cursor"]) if rows else None
        return None if cursor is None else tuple(str(x) for x in cursor)

    def set_sweep_cursor(self, name: str, cursor: Sequence[str] | None) -> None:
        stored = json.dumps(None if cursor is None else list(cursor))
        with self._lc_tx() as conn:
            self._x(conn, "INSERT INTO sweep_cursors VALUES (?,?) ON CONFLICT (name) "
                          "DO UPDATE SET cursor=excluded.cursor", (name, stored))

    def last_tick_failures(self) -> list[str]:
        rows = self._read("SELECT report FROM scheduler_runs WHERE scope=?", ("tick",))
        return [str(x) for x in json.loads(rows[0]["report"]).get("failed", [])] if rows else []

    # -- collection modes ----------------------------------------------------------------------

    def collection_modes(self, tenant: str | None = None) -> list[CollectionMode]:
        if tenant is None:
            return [_mode(r) for r in self._read("SELECT * FROM collection_modes ORDER BY tenant, collection")]
        return [_mode(r) for r in self._read("SELECT * FROM collection_modes WHERE tenant=? ORDER BY collection",
                                             (tenant,))]

    def set_collection_mode(self, mode: CollectionMode, only_if_not_manual: bool = False) -> bool:
        # The guards are in the upsert itself, not in a read before it: under READ COMMITTED an
        # operator's manual decision committed between such a read and the write would be
        # overwritten by the scheduler (the conflicting row is re-checked when the upsert waits).
        guard = "(collection_modes.mode<>excluded.mode OR collection_modes.manual<>excluded.manual)"
        if only_if_not_manual:
            guard += " AND collection_modes.manual=0"
        with self._lc_tx() as conn:
            cur = self._x(conn, "INSERT INTO collection_modes VALUES (?,?,?,?,?,?,?) ON CONFLICT (tenant, collection) "
                                "DO UPDATE SET mode=excluded.mode, since=excluded.since, reason=excluded.reason, "
                                f"manual=excluded.manual, figures=excluded.figures WHERE {guard}",
                          (mode.tenant, mode.collection, mode.mode, mode.since, mode.reason, int(mode.manual),
                           json.dumps(mode.figures)))
            return bool(cur.rowcount)

    # Kept for the DocumentStore port: the eager set every writer consults.
    def promoted(self) -> set[tuple[str, str]]:
        return {(r["tenant"], r["collection"])
                for r in self._read("SELECT tenant, collection FROM collection_modes WHERE mode='eager'")}

    # -- eviction and pruning ------------------------------------------------------------------

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
    # find nothing, the cold copies' 0.23-0.26 s (/tmp/lc scripts, 2026-11-27). What a pass
    # finds is the same; it is found up to a pass later (1M vectors at 5,000 a tick of 60 s:
    # 3.3 h), which costs only the storage of content nobody reads meanwhile (a document that
    # takes the content again reuses the vector or the cold entry, as before).

    def _code_page(self, table: str, test: str, after: CodeCursor | None, limit: int,
                   ref: bool = False) -> tuple[list[Mapping[str, Any]], CodeCursor | None]:
        """`_page` over `table` (vectors, cold_vectors: both keyed (tenant, content_hash, space),
        the row `t`): a read, which the delete checks again."""
        found, last = self._page(f"{table} t", ("tenant", "content_hash", "space"), test, (), after, limit,
                                 extra=", t.ref" if ref else "")
        return found, None if last is None else (last[0], last[1], last[2])

    def _page(self, table: str, key: tuple[str, ...], test: str, args: Sequence[object],
              after: Sequence[str] | None, limit: int, extra: str = "", joins: str = "",
              ) -> tuple[list[Mapping[str, Any]], tuple[str, ...] | None]:
        """Of the next `limit` rows of `table` ("name alias") in the order of its `key` columns
        after `after`, the key (and `extra` columns) of those meeting `test` (with its `args`, and
        the tables `joins` brings), and the key of the last row examined (None: the end). The
        scheduler's sweeps go by such pages from cursors in the store (`sweep_cursor`). One row
        more is read to know whether the end is reached: a table that fits in a page is then
        examined whole at every tick, as before (a page that stopped exactly at the end would
        make the next tick's page an empty one)."""
        alias = table.split()[-1]
        cols = ", ".join(f"{alias}.{k}" for k in key)
        since, at = ("", ()) if after is None else (f" WHERE ({cols}) > ({','.join('?' * len(key))})", tuple(after))
        page = self._read(f"SELECT {cols}{extra}, CASE WHEN {test} THEN 1 ELSE 0 END AS hit FROM {table} "
                          f"{joins}{since} ORDER BY {cols} LIMIT ?", (*args, *at, limit + 1))
        last = page[limit - 1] if len(page) > limit else None
        return [r for r in page[:limit] if r["hit"]], None if last is None else tuple(str(last[k]) for k in key)

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

    def storage_report(self, tenant: str | None = None) -> dict[str, int]:
        where, args = ("WHERE tenant=?", (tenant,)) if tenant is not None else ("", ())
        v = self._read(f"SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(vec)), 0) AS b FROM vectors {where}", args)[0]
        c = self._read(f"SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM cold_vectors {where}", args)[0]
        return {"vectors": int(v["n"]), "vectorBytes": int(v["b"]), "cold": int(c["n"]), "coldBytes": int(c["b"])}

    def coverage_all(self, space: str) -> dict[str, int]:
        rows = self._read("SELECT status, CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END AS cold, COUNT(*) AS n "
                          "FROM sidecar WHERE space=? GROUP BY status, CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END",
                          (space,))
        out: dict[str, int] = {}
        for r in rows:
            name = "cold" if r["status"] == SemanticStatus.NONE.value and r["cold"] else r["status"]
            out[name] = out.get(name, 0) + int(r["n"])
        return out

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

    def prune_gone_rows(self, after: RowCursor | None, limit: int) -> GonePage:
        """Sidecar rows whose document is gone, in any status, deleted as the document's delete
        would have. Earlier versions left them (a backfill's `ensure_sidecars` racing a delete)
        and only `queued` ones were ever repaired: the rest stayed in coverage for good.
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
                # COMMITTED it deleted the row of a document that exists (probed on PostgreSQL).
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

    def _row_page(self, test: str, args: Sequence[object], after: RowCursor | None, limit: int,
                  extra: str = "", joins: str = "") -> tuple[list[Mapping[str, Any]], RowCursor | None]:
        """`_page` over the sidecar (`s`, keyed (tenant, collection, doc_id, space))."""
        found, last = self._page("sidecar s", ("tenant", "collection", "doc_id", "space"), test, args, after, limit,
                                 extra=extra, joins=joins)
        return found, None if last is None else (last[0], last[1], last[2], last[3])

    def requeue_budget_deferred(self, before: float) -> int:
        # Space by space, so each statement reads `sidecar_by_status` (space, status, updated_at)
        # instead of every row: without the space the planner scanned the table each tick
        # (PostgreSQL 56 -> 1.5 ms at 1M rows, SQLite without statistics 38 -> 0.2 ms; /tmp scripts,
        # 2026-11-27). The spaces by a loose scan of that index (0.08 ms), not `known_spaces`, whose
        # cost follows the tenants (0.26 s at 10,000 of them).
        spaces = [str(r["space"]) for r in self._read(_SPACES_OF_ROWS)]
        with self._lc_tx() as conn:
            return sum(int(self._x(conn, "UPDATE sidecar SET status='none', reason=NULL WHERE space=? AND "
                                         "status='deferred' AND reason='budget' AND updated_at<?",
                                   (space, before)).rowcount or 0) for space in spaces)

    # -- provider usage and caps ---------------------------------------------------------------

    def charge_tokens(self, tenant: str, day: str, by_collection: dict[str, tuple[int, int]], calls: int,
                      cap: int) -> bool:
        wanted = sum(t for _, t in by_collection.values())
        with self._lc_tx() as conn:
            if cap:
                # One row per tenant and day serialises the chargers of a capped tenant (PostgreSQL
                # row lock; SQLite writers are serial anyway), so the sum below cannot go stale.
                self._x(conn, "INSERT INTO provider_usage VALUES (?,?,'',0,0,0) ON CONFLICT DO NOTHING",
                        (tenant, day))
                self._x(conn, f"SELECT tokens FROM provider_usage WHERE tenant=? AND day=? AND collection=''"
                              f"{self._FOR_UPDATE}", (tenant, day))
                used = self._x(conn, "SELECT COALESCE(SUM(tokens), 0) AS t FROM provider_usage "
                                     "WHERE tenant=? AND day=?",
                               (tenant, day)).fetchone()
                if int(used["t"]) + wanted > cap:
                    return False
            busiest = max(by_collection, key=lambda c: by_collection[c][0]) if by_collection else None
            for collection, (docs, tokens) in sorted(by_collection.items()):
                self._x(conn, "INSERT INTO provider_usage VALUES (?,?,?,?,?,?) ON CONFLICT (tenant, day, collection) "
                              "DO UPDATE SET calls=provider_usage.calls+excluded.calls, "
                              "docs=provider_usage.docs+excluded.docs, tokens=provider_usage.tokens+excluded.tokens",
                        (tenant, day, collection, calls if collection == busiest else 0, docs, tokens))
        return True

    def tokens_used(self, tenant: str, day: str) -> int:
        rows = self._read("SELECT COALESCE(SUM(tokens), 0) AS t FROM provider_usage WHERE tenant=? AND day=?",
                          (tenant, day))
        return int(rows[0]["t"])

    def usage_by_day(self, tenant: str, collection: str | None, days: int) -> list[dict[str, object]]:
        sql, args = "SELECT day, SUM(calls) AS calls, SUM(docs) AS docs, SUM(tokens) AS tokens FROM provider_usage " \
                    "WHERE tenant=?", [tenant]
        if collection is not None:
            sql, args = sql + " AND collection=?", [*args, collection]
        rows = self._read(sql + " GROUP BY day ORDER BY day DESC LIMIT ?", (*args, days))
        return [{"day": r["day"], "calls": int(r["calls"]), "documents": int(r["docs"]), "tokens": int(r["tokens"])}
                for r in rows]

    # -- backfill tasks ---------------------------------------------------------------------------

    def create_task(self, task: BackfillTask) -> None:
        with self._lc_tx() as conn:
            self._x(conn, "INSERT INTO backfill_tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (task.id, task.tenant, task.collection, task.space, task.kind, int(task.force), task.cursor,
                     task.examined, task.queued, task.total, task.state, task.created_at, task.updated_at))

    def tasks(self, tenant: str | None = None, running_only: bool = False) -> list[BackfillTask]:
        sql, args = "SELECT * FROM backfill_tasks WHERE 1=1", []
        if tenant is not None:
            sql, args = sql + " AND tenant=?", [tenant]
        if running_only:
            sql += " AND state='running'"
        return [_task(r) for r in self._read(sql + " ORDER BY created_at", args)]

    def update_task(self, task_id: str, cursor: str, examined: int, queued: int, state: str, now: float) -> None:
        """Only a running task moves: a step that read the task before another process cancelled
        it (a new migration request, an activation, a demotion) must not write it back to
        `running` (seen once beside two racing migration requests)."""
        with self._lc_tx() as conn:
            self._x(conn, "UPDATE backfill_tasks SET position_key=?, examined=?, queued=?, state=?, updated_at=? "
                          "WHERE id=? AND state='running'", (cursor, examined, queued, state, now, task_id))

    def keys_after(self, tenant: str, collection: str | None, cursor: str, limit: int) -> list[DocKey]:
        col, _, doc = cursor.partition(CURSOR_SEP)
        sql, args = "SELECT collection, doc_id FROM docs WHERE tenant=?", [tenant]
        if collection is not None:
            sql, args = sql + " AND collection=?", [*args, collection]
        sql += " AND (collection>? OR (collection=? AND doc_id>?)) ORDER BY collection, doc_id LIMIT ?"
        return [DocKey(tenant, r["collection"], r["doc_id"]) for r in self._read(sql, (*args, col, col, doc, limit))]

    def count_docs(self, tenant: str, collection: str | None) -> int:
        if collection is None:
            return int(self._read("SELECT COUNT(*) AS n FROM docs WHERE tenant=?", (tenant,))[0]["n"])
        return int(self._read("SELECT COUNT(*) AS n FROM docs WHERE tenant=? AND collection=?",
                              (tenant, collection))[0]["n"])

    def oldest_doc_at(self, tenant: str) -> float | None:
        # one seek of docs_by_update (tenant, updated_at), not a walk over the tenant's documents
        rows = self._read("SELECT MIN(updated_at) AS t FROM docs WHERE tenant=?", (tenant,))
        return None if rows[0]["t"] is None else float(rows[0]["t"])

    # -- follower dead letters ------------------------------------------------------------------

    def record_dead_letter(self, follower: str, seq: int, key: DocKey, op: str, error: str, at: float) -> None:
        with self._lc_tx() as conn:
            self._x(conn, "INSERT INTO dead_letters VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (follower, seq) DO UPDATE "
                          "SET error=excluded.error, at=excluded.at",
                    (follower, seq, key.tenant, key.collection, key.doc_id, op, error[:500], at))

    def dead_letters(self, tenant: str, limit: int = 200) -> list[dict[str, object]]:
        rows = self._read("SELECT follower, seq, collection, doc_id, op, error, at FROM dead_letters WHERE tenant=? "
                          "ORDER BY at DESC LIMIT ?", (tenant, limit))
        return [dict(r) for r in rows]

    # -- spaces per tenant ------------------------------------------------------------------------

    def tenant_spaces(self, tenant: str | None = None) -> list[SpaceInfo]:
        if tenant is None:
            return [_space(r) for r in self._read(f"{_SPACES} ORDER BY s.tenant, s.created_at")]
        return [_space(r) for r in self._read(f"{_SPACES} WHERE s.tenant=? ORDER BY s.created_at", (tenant,))]

    def space_binding(self, space: str) -> tuple[str, int] | None:
        rows = self._read("SELECT model_id, dim FROM spaces WHERE space=?", (space,))
        return (str(rows[0]["model_id"]), int(rows[0]["dim"])) if rows else None

    def tenant_space_binding(self, tenant: str, space: str) -> tuple[str, int] | None:
        rows = self._read("SELECT model_id, dim FROM tenant_spaces WHERE tenant=? AND space=?", (tenant, space))
        return (str(rows[0]["model_id"]), int(rows[0]["dim"])) if rows else None

    def release_space_binding(self, space: str, model_id: str, dim: int) -> bool:
        """While space names were global, a tenant's migration bound the name in `spaces` too, and
        that row then kept the operator from configuring the name (VIBE_SPACE) with another model.
        Such a row is told from the operator's own by the tenants who use the space without a row
        of their own: only the configured space serves them, so any of their sidecar rows in the
        space means the operator bound it, and it stays. Otherwise, when some tenant's space
        accounts for the binding, it goes (those tenants' spaces keep their model in their rows)."""
        with self._lc_tx() as conn:
            cur = self._x(conn, "DELETE FROM spaces WHERE space=? AND model_id=? AND dim=? AND EXISTS "
                                "(SELECT 1 FROM tenant_spaces t WHERE t.space=? AND t.model_id=? AND t.dim=?) "
                                "AND NOT EXISTS (SELECT 1 FROM sidecar s WHERE s.space=? AND NOT EXISTS "
                                "(SELECT 1 FROM tenant_spaces t WHERE t.tenant=s.tenant AND t.space=s.space))",
                          (space, model_id, dim, space, model_id, dim, space))
            return bool(cur.rowcount)

    def put_tenant_space(self, info: SpaceInfo) -> None:
        with self._lc_tx() as conn:
            self._put_space(conn, info)

    def _put_space(self, conn: Any, info: SpaceInfo) -> None:
        self._x(conn, "INSERT INTO tenant_spaces VALUES (?,?,?,?,?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                      "SET model_id=excluded.model_id, dim=excluded.dim, state=excluded.state, "
                      "activated_at=excluded.activated_at",
                (info.tenant, info.space, info.model_id, info.dim, info.state, info.created_at, info.activated_at))
        if info.state == "retired":
            # a retirement without a time keeps the one recorded (the retention runs from it)
            at = info.retired_at if info.retired_at is not None else self.clock()
            keep = "" if info.retired_at is not None else " WHERE false"
            self._x(conn, "INSERT INTO space_retirements VALUES (?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                          f"SET retired_at=excluded.retired_at{keep}", (info.tenant, info.space, at))
        else:
            self._x(conn, "DELETE FROM space_retirements WHERE tenant=? AND space=?", (info.tenant, info.space))
        # A migration's scope is the building space's alone: any other state forgets it.
        if info.state == "building" and info.scope != "all":
            self._x(conn, "INSERT INTO space_scopes VALUES (?,?,?) ON CONFLICT (tenant, space) DO UPDATE "
                          "SET scope=excluded.scope", (info.tenant, info.space, info.scope))
        else:
            self._x(conn, "DELETE FROM space_scopes WHERE tenant=? AND space=?", (info.tenant, info.space))

    def forget_tenant_space(self, tenant: str, space: str) -> None:
        with self._lc_tx() as conn:
            self._x(conn, "DELETE FROM tenant_spaces WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM space_retirements WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM space_scopes WHERE tenant=? AND space=?", (tenant, space))

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
                # did not count it (seen: 5 of 30 documents, "100%"). One pass over the tenant's
                # documents, so only then: a finished migration has passed every document.
                return self._rows_for_every_doc(conn, to.tenant, to.space, now, filled_since)
            return 0

    def fill_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                        now: float) -> tuple[int, tuple[str, str] | None]:
        # One short transaction per batch, in key order: a forced cut-over's own pass over every
        # document held the tenant's writes for 19 s at 1M documents (SQLite, 2026-11-27); after
        # these batches it only looks at what was written since (`filled_since`).
        return self._in_batch(tenant, after, limit, lambda conn, where, args: self._none_rows(
            conn, tenant, space, now, where, args))

    def realign_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                           now: float) -> tuple[int, tuple[str, str] | None]:
        # The same for a retired space made current again: realigned inside the cut-over, a
        # tenant's writes waited as long as the whole pass (bench.cutover_writes: 1.4-1.6 s at 1M
        # documents on SQLite, 1.2 s at 200k on PostgreSQL), like the forced fill's single pass.
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

    def claim_expiry(self, tenant: str, space: str, retired_before: float) -> bool:
        """A retired space whose retirement is older than `retired_before` becomes `expiring`,
        under its row lock and re-checked there: a re-activation committed meanwhile (or a newer
        retirement) wins and nothing is claimed. An `expiring` space is claimed already (an
        expiry interrupted by a crash resumes). Re-activation refuses an `expiring` space."""
        with self._lc_tx() as conn:
            row = self._x(conn, f"SELECT state, activated_at, created_at FROM tenant_spaces WHERE tenant=? AND space=?"
                                f"{self._FOR_UPDATE}", (tenant, space)).fetchone()
            if row is None or row["state"] not in ("retired", "expiring"):
                return False
            if row["state"] == "expiring":
                return True
            at = self._x(conn, "SELECT retired_at FROM space_retirements WHERE tenant=? AND space=?",
                         (tenant, space)).fetchone()
            retired = (at["retired_at"] if at else None) or row["activated_at"] or row["created_at"]
            if float(retired) > retired_before:
                return False
            self._x(conn, "UPDATE tenant_spaces SET state='expiring' WHERE tenant=? AND space=?", (tenant, space))
            return True

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
        read under a share lock (PostgreSQL), as in `fill_space_rows`: under READ COMMITTED the
        insert still saw a document whose delete committed meanwhile, and that delete had not
        seen the new row, which then stayed (helper walk-through, 2026-11-27: 546 such rows in 5
        rounds of 20,000 documents with three deleting threads; 5,173 with the pass before)."""
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
        # an evicted vector (`none` with a cold reference) is embedded in the space already: counted
        # as waiting, every eviction of the new space restarted the migration, which rehydrated it,
        # and the next eviction sent it cold again (seen: 1,248 evictions in 2.5 minutes for 299
        # documents, and activation refused now and then)
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

    # -- a document write and the tenant's other spaces ------------------------------------------

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

    def count_in_status(self, tenant: str, space: str, status: SemanticStatus) -> int:
        rows = self._read("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status=? AND tenant=?",
                          (space, status.value, tenant))
        return int(rows[0]["n"])

    def cold_by_space(self, tenant: str) -> dict[str, tuple[int, int]]:
        rows = self._read("SELECT space, COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM cold_vectors "
                          "WHERE tenant=? GROUP BY space", (tenant,))
        return {str(r["space"]): (int(r["n"]), int(r["b"])) for r in rows}

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

    def drop_space_vectors(self, tenant: str, space: str) -> int:
        """Sidecar rows, vectors and cold entries of one tenant's space; the change log drops the
        ready rows' points from the vector index."""
        with self._lc_tx() as conn:
            ready = [DocKey(tenant, r["collection"], r["doc_id"]) for r in self._x(
                conn, "SELECT collection, doc_id FROM sidecar WHERE tenant=? AND space=? AND status='ready' "
                      "ORDER BY collection, doc_id", (tenant, space)).fetchall()]
            n = int(self._x(conn, "DELETE FROM sidecar WHERE tenant=? AND space=?", (tenant, space)).rowcount or 0)
            self._x(conn, "DELETE FROM vectors WHERE tenant=? AND space=?", (tenant, space))
            self._x(conn, "DELETE FROM cold_vectors WHERE tenant=? AND space=?", (tenant, space))
            self._lc_log(conn, [(k, "unvector", space) for k in ready])
        return n
