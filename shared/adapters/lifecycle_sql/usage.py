"""Usage statistics (query buckets, per-document decayed touches and pins) and provider usage
with its daily token cap."""

from __future__ import annotations

from collections.abc import Sequence

from shared.adapters.lifecycle_sql.base import _MAX, SqlBase
from shared.costs import utc_day
from shared.model import CollectionUsage, DocKey, UsageBatch


class UsageSql(SqlBase):
    """Usage statistics and provider usage."""

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
        0.1 s on PostgreSQL at 1M rows), and the last key examined."""
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
