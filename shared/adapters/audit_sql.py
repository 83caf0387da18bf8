"""The store of record's audit of its own consistency, for /semantic/mismatch and
/semantic/lag, in both dialects through the same hooks as documents_sql.py (`SqlBase`).

Set-based: a fixed number of statements whatever the tenant's size. The view used to read
every ready row and look up its vector one at a time from Python (0.8 s at p50, 9-44 s at p99
for ~3,300 documents under load). A join probing `vectors` row by row inside the database was
still ~2 µs a row at 100k on SQLite (its rows hold the vectors, ~1.5 kB each), so the audit
instead walks two narrow indexes in content-hash order and merges them (EXCEPT): the ready
rows' hashes and the hashes that have a vector of the space's dimension (migration 6,
schema/audit.py). What the merge leaves is the few bad hashes; only their rows are then
looked at, to tell a missing vector from one of another dimension and to list examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.adapters.store_reports import COLD_FLAG, coverage_report
from shared.model import DocKey
from shared.ports import VectorAudit

_READY = "FROM {sidecar} WHERE s.tenant=? AND s.space=? AND s.status='ready'"
# The hashes of ready rows with no vector of the expected dimension (any dimension when none
# is expected). ORDER BY makes SQLite merge the two sorted index walks instead of building a
# temporary table of one side; PostgreSQL hashes them.
_BAD = ("SELECT s.content_hash " + _READY + " EXCEPT SELECT v.content_hash FROM {vectors} "
        "WHERE v.tenant=? AND v.space=?{dim} ORDER BY 1")
# The rows /semantic/coverage needs more of than their status: why a document was skipped, and
# whether a `none` row is cold. The partial index sidecar_details holds exactly these (its WHERE
# is this text, which SQLite needs to find in the statement to use it).
_DETAILS = "(cold_ref IS NOT NULL OR status IN ('denied', 'deferred', 'failed'))"
_HAS_VECTOR = ("EXISTS (SELECT 1 FROM vectors w WHERE w.tenant=s.tenant AND w.space=s.space "
               "AND w.content_hash=s.content_hash)")


class AuditSql(SqlBase):
    """Mixin: the store class provides the hooks (`SqlBase`)."""

    # The audit's tables as its statements name them. SQLite's planner, without statistics,
    # walks the primary keys rather than the narrow indexes of migration 6, so SqliteStore
    # names them (INDEXED BY); PostgreSQL chooses for itself.
    _AUDIT_TABLES = {"sidecar": "sidecar s", "vectors": "vectors v"}
    _COVERAGE_TABLES = {"states": "sidecar", "details": "sidecar"}

    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]:
        """States of one collection from its rows (a primary-key range); of the whole tenant,
        from the status index and the few rows `_DETAILS` selects."""
        if collection:
            rows = self._report_rows(f"SELECT status, reason, {COLD_FLAG} AS cold, COUNT(*) AS n FROM sidecar "
                              f"WHERE tenant=? AND collection=? AND space=? GROUP BY status, reason, {COLD_FLAG}",
                              (tenant, collection, space))
            return coverage_report((r["status"], r["reason"], r["n"], bool(r["cold"])) for r in rows)
        t = self._COVERAGE_TABLES
        counts = {r["status"]: int(r["n"]) for r in self._report_rows(
            f"SELECT status, COUNT(*) AS n FROM {t['states']} WHERE space=? AND tenant=? GROUP BY status",
            (space, tenant))}
        details = [(r["status"], r["reason"], int(r["n"]), bool(r["cold"])) for r in self._report_rows(
            f"SELECT status, reason, {COLD_FLAG} AS cold, COUNT(*) AS n FROM {t['details']} WHERE tenant=? "
            f"AND space=? AND {_DETAILS} GROUP BY status, reason, {COLD_FLAG}", (tenant, space))]
        # Counted with their details instead. The two statements are two snapshots: a row may
        # change state between them (a retired space cooling, a job failing), so a detail row's
        # status may be missing from the first count or counted there fewer times.
        for status, _, n, _ in details:
            counts[status] = max(0, counts.get(status, 0) - n)
        return coverage_report([*details, *((status, None, n, False) for status, n in counts.items())])

    def vector_audit(self, tenant: str, space: str, dim: int | None, examples: int = 20) -> VectorAudit:
        tables = self._AUDIT_TABLES
        ready = int(self._report_rows("SELECT COUNT(*) AS n " + _READY.format(**tables), (tenant, space))[0]["n"])
        bad_sql = _BAD.format(dim="" if dim is None else " AND v.dim=?", **tables)
        # Each bad row, whether it has a vector at all (then of another dimension), numbered
        # oldest first within its kind: one statement gives both counts and both example lists.
        rows = self._report_rows(
            "SELECT has_vector, n, collection, doc_id FROM (SELECT has_vector, collection, doc_id, "
            "ROW_NUMBER() OVER (PARTITION BY has_vector ORDER BY updated_at, collection, doc_id) AS rn, "
            "COUNT(*) OVER (PARTITION BY has_vector) AS n FROM ("
            f"SELECT CASE WHEN {_HAS_VECTOR} THEN 1 ELSE 0 END AS has_vector, s.collection, s.doc_id, s.updated_at "
            f"{_READY.format(**tables)} AND s.content_hash IN ({bad_sql})) AS b) AS r WHERE rn<=? "
            "ORDER BY has_vector, rn",
            (tenant, space, tenant, space, tenant, space, *(() if dim is None else (dim,)), max(examples, 1)))
        counts: dict[int, int] = {0: 0, 1: 0}
        keys: dict[int, list[DocKey]] = {0: [], 1: []}
        for r in rows:
            kind = int(r["has_vector"])
            counts[kind] = int(r["n"])
            keys[kind].append(DocKey(tenant, r["collection"], r["doc_id"]))
        return VectorAudit(ready, counts[0], keys[0][:examples], counts[1], keys[1][:examples])

    def _report_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        """A report's statement (PostgresStore runs it with JIT compilation off)."""
        return self._read(sql, params)

    def stuck_count(self, tenant: str, space: str, before: float) -> int:
        rows = self._report_rows("SELECT COUNT(*) AS n FROM sidecar WHERE space=? AND status='queued' AND tenant=? "
                          "AND updated_at<?", (space, tenant, before))
        return int(rows[0]["n"]) if rows else 0
