"""The `CollectionStore` part of both stores of record (per-collection settings, the tenant's
collection list, a collection's removal by pages), written once as the lifecycle SQL
(shared/adapters/lifecycle_sql/) is: `?` placeholders (turned into `%s` for psycopg), `ON
CONFLICT` and `RETURNING` in both dialects; each store supplies its transactions, reads and
change-log append through the lifecycle hooks (`SqlBase`: `_lc_tx`, `_lc_rows`, `_lc_log`). Its
own module so the settings table changes apart from the lifecycle's.

A collection is removed page by page, each page one short transaction that deletes documents,
their sidecar rows, usage rows, vectors and cold entries no other document of the tenant still
uses, and logs a `delete` for each document: every index and replica follows the change log as
for a single delete. Once no document is left, `forget_collection` removes what is kept per
collection (usage buckets, provider usage, promotion state, follow-up switch, settings)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.collection_settings import CollectionSettings
from shared.model import DocKey
from shared.ports import ColdRow

_COLS = "tenant, collection, language, embed_fields, filterable_fields, updated_at, rerank"
_IN_CHUNK = 500  # keys per `IN (...)`: under SQLite's and psycopg's parameter limits with room


def _fields(raw: object) -> tuple[str, ...] | None:
    return None if raw is None else tuple(json.loads(str(raw)))


def _row(r: Mapping[str, Any]) -> CollectionSettings:
    return CollectionSettings(str(r["tenant"]), str(r["collection"]), r["language"], _fields(r["embed_fields"]),
                              _fields(r["filterable_fields"]), float(r["updated_at"]),
                              None if r["rerank"] is None else bool(r["rerank"]))


def _json(fields: Sequence[str] | None) -> str | None:
    return None if fields is None else json.dumps(list(fields))


# The tenant's distinct collection names after a name, by a loose index scan of the primary key
# (one seek a name, whatever the documents per collection), at most `limit` steps.
_NAMES = """WITH RECURSIVE c(n, name) AS (
  SELECT 1, (SELECT MIN(collection) FROM {t} WHERE tenant=? AND collection>?)
  UNION ALL
  SELECT c.n + 1, (SELECT MIN(collection) FROM {t} WHERE tenant=? AND collection>c.name)
  FROM c WHERE c.name IS NOT NULL AND c.n < ?)
SELECT name FROM c WHERE name IS NOT NULL"""


class CollectionSettingsSql(SqlBase):
    """Mixin: the store class provides the hooks (`SqlBase`)."""

    # -- settings ----------------------------------------------------------------------------

    def collection_settings(self, tenant: str) -> dict[str, CollectionSettings]:
        """Every settings row of the tenant (one primary-key range read)."""
        rows = self._lc_rows(self._sql(f"SELECT {_COLS} FROM collection_settings WHERE tenant=?"), (tenant,))
        return {str(r["collection"]): _row(r) for r in rows}

    def put_collection_settings(self, row: CollectionSettings) -> None:
        with self._lc_tx() as conn:
            conn.execute(self._sql(
                f"INSERT INTO collection_settings ({_COLS}) VALUES (?,?,?,?,?,?,?) ON CONFLICT (tenant, collection) "
                "DO UPDATE SET language=excluded.language, embed_fields=excluded.embed_fields, "
                "filterable_fields=excluded.filterable_fields, updated_at=excluded.updated_at, "
                "rerank=excluded.rerank"),
                (row.tenant, row.collection, row.language, _json(row.embed_fields), _json(row.filterable_fields),
                 row.updated_at, None if row.rerank is None else int(row.rerank)))

    # -- the tenant's collections -------------------------------------------------------------

    def collection_names(self, tenant: str, after: str, limit: int) -> list[str]:
        """Collections of the tenant by name after `after`, at most `limit`: those with documents,
        settings or a promotion state (an admin may configure a collection before writing to it)."""
        names: set[str] = set()
        for table in ("docs", "collection_settings", "collection_modes"):
            rows = self._lc_rows(self._sql(_NAMES.format(t=table)), (tenant, after, tenant, limit))
            names.update(str(r["name"]) for r in rows)
        return sorted(names)[:limit]

    def collection_doc_count(self, tenant: str, collection: str) -> int:
        rows = self._lc_rows(self._sql("SELECT COUNT(*) AS n FROM docs WHERE tenant=? AND collection=?"),
                             (tenant, collection))
        return int(rows[0]["n"])

    # -- removal, by pages ---------------------------------------------------------------------

    def delete_collection_page(self, tenant: str, collection: str, limit: int) -> tuple[int, list[ColdRow]]:
        """Up to `limit` documents of the collection go, in one transaction, with their sidecar
        rows, usage rows, and the vectors and cold entries of their content that no other document
        of the tenant has (returned: the caller deletes those cold copies). When no document is
        left, up to `limit` sidecar rows whose document is already gone go the same way. Returns
        (keys removed, cold entries removed); (0, []) once nothing of the collection is left."""
        with self._lc_tx() as conn:
            rows = conn.execute(self._sql("SELECT doc_id, content_hash FROM docs WHERE tenant=? AND collection=? "
                                          f"ORDER BY doc_id LIMIT ?{self._FOR_UPDATE}"),
                                (tenant, collection, limit)).fetchall()
            ids = [str(r["doc_id"]) for r in rows]
            hashes = sorted({str(r["content_hash"]) for r in rows})
            if not ids:  # rows left behind by documents already gone (the gone-row sweep's work)
                ids = [str(r["doc_id"]) for r in conn.execute(self._sql(
                    "SELECT DISTINCT doc_id FROM sidecar WHERE tenant=? AND collection=? ORDER BY doc_id LIMIT ?"),
                    (tenant, collection, limit)).fetchall()]
            if not ids:
                return 0, []
            for i in range(0, len(ids), _IN_CHUNK):
                chunk = ids[i:i + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                for table in ("docs", "sidecar", "doc_usage"):
                    conn.execute(self._sql(f"DELETE FROM {table} WHERE tenant=? AND collection=? AND doc_id IN "
                                           f"({marks})"), (tenant, collection, *chunk))
            cold = self._drop_unused_content(conn, tenant, hashes)
            self._lc_log(conn, [(DocKey(tenant, collection, i), "delete", None) for i in ids])
            return len(ids), cold

    def _drop_unused_content(self, conn: Any, tenant: str, hashes: Sequence[str]) -> list[ColdRow]:
        """Vectors and cold entries of these contents that no document of the tenant has now."""
        cold: list[ColdRow] = []
        unused = "NOT EXISTS (SELECT 1 FROM docs WHERE tenant=? AND content_hash=?)"
        for h in hashes:
            # PostgreSQL: wait for a writer reusing this content (READ COMMITTED), as delete_doc does.
            conn.execute(self._sql(f"SELECT 1 FROM vectors WHERE tenant=? AND content_hash=?{self._FOR_UPDATE}"),
                         (tenant, h)).fetchall()
            conn.execute(self._sql(f"DELETE FROM vectors WHERE tenant=? AND content_hash=? AND {unused}"),
                         (tenant, h, tenant, h))
            cold += [(tenant, h, str(r["space"]), str(r["ref"])) for r in conn.execute(self._sql(
                f"DELETE FROM cold_vectors WHERE tenant=? AND content_hash=? AND {unused} RETURNING space, ref"),
                (tenant, h, tenant, h)).fetchall()]
        return cold

    def forget_collection(self, tenant: str, collection: str) -> None:
        """What is kept per collection once its documents are gone. Its provider usage is folded
        into the tenant's own row of each day (collection ''), so the daily cap and the tenant's
        totals still count what was spent, under no collection's name."""
        with self._lc_tx() as conn:
            conn.execute(self._sql(
                "INSERT INTO provider_usage (tenant, day, collection, calls, docs, tokens) "
                "SELECT tenant, day, '', calls, docs, tokens FROM provider_usage WHERE tenant=? AND collection=? "
                "ON CONFLICT (tenant, day, collection) DO UPDATE SET calls=provider_usage.calls+excluded.calls, "
                "docs=provider_usage.docs+excluded.docs, tokens=provider_usage.tokens+excluded.tokens"),
                (tenant, collection))
            for table in ("provider_usage", "usage_buckets", "doc_usage", "collection_modes", "touch_follow_up",
                          "collection_settings", "dead_letters"):
                conn.execute(self._sql(f"DELETE FROM {table} WHERE tenant=? AND collection=?"), (tenant, collection))
