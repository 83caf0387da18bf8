"""Promotion: each collection's mode (eager or lazy, and who decided) and the backfill tasks
that embed a promoted collection or migrate a space, with the document walk they page through."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shared.adapters.lifecycle_sql.base import CURSOR_SEP, SqlBase
from shared.model import BackfillTask, CollectionMode, DocKey


def _mode(r: Mapping[str, Any]) -> CollectionMode:
    return CollectionMode(r["tenant"], r["collection"], r["mode"], float(r["since"]), r["reason"],
                          bool(r["manual"]), json.loads(r["figures"] or "{}"))

def _task(r: Mapping[str, Any]) -> BackfillTask:
    return BackfillTask(r["id"], r["tenant"], r["collection"], r["space"], r["kind"], bool(r["forced"]),
                        r["position_key"], int(r["examined"]), int(r["queued"]), int(r["total"]), r["state"],
                        float(r["created_at"]), float(r["updated_at"]))


class PromotionSql(SqlBase):
    """Collection modes and backfill tasks."""

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
        `running` (two racing migration requests can do that)."""
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
