"""What the DocumentStore adapters share: reports computed the same way from their own
query results, and SQL rules both dialects (SQLite, PostgreSQL) spell alike."""

from __future__ import annotations

from collections.abc import Iterable

from shared.model import COLD, SemanticStatus

# A write decides a document's sidecar from a read made before its transaction; a worker may
# commit the vector for that same content in between. Re-writing `queued` over that `ready`
# would strand the document (no job is queued for it, and the vector index drops it), so an
# upsert of the sidecar keeps a `ready` row of the same content. Appended to
# `INSERT ... ON CONFLICT ... DO UPDATE SET ...`.
KEEP_READY_SAME_CONTENT = (" WHERE NOT (sidecar.status='ready' AND sidecar.content_hash=excluded.content_hash"
                           " AND excluded.status='queued')")

SKIPPED_STATES = ("denied", "deferred", "failed")  # states whose reasons /semantic/coverage lists
COLD_FLAG = "CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END"  # an evicted row: `none` with a cold reference


def coverage_report(counts: Iterable[tuple[str, str | None, int, bool]]) -> dict[str, object]:
    """/semantic/coverage from `(status, reason, count, cold)` rows: totals per state (`cold`:
    evicted to the cold store), the indexed percentage, and why documents were skipped."""
    states = {s.value: 0 for s in SemanticStatus}
    states[COLD] = 0
    skipped: dict[str, int] = {}
    for status, reason, n, cold in counts:
        states[COLD if cold and status == SemanticStatus.NONE.value else status] += n
        if status in SKIPPED_STATES and reason:
            skipped[reason] = skipped.get(reason, 0) + n
    total = sum(states.values())
    pct = round(100.0 * states["ready"] / total, 2) if total else 0.0
    return {"total": total, "ready": states["ready"], "indexedPct": pct, "states": states, "skipped": skipped}
