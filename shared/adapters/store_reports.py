"""What the DocumentStore adapters compute the same way from their own query results."""

from __future__ import annotations

from collections.abc import Iterable

from shared.model import SemanticStatus

SKIPPED_STATES = ("denied", "deferred", "failed")  # states whose reasons /semantic/coverage lists


def coverage_report(counts: Iterable[tuple[str, str | None, int]]) -> dict[str, object]:
    """/semantic/coverage from `(status, reason, count)` rows: totals per state, the indexed
    percentage, and why documents were skipped."""
    states = {s.value: 0 for s in SemanticStatus}
    skipped: dict[str, int] = {}
    for status, reason, n in counts:
        states[status] += n
        if status in SKIPPED_STATES and reason:
            skipped[reason] = skipped.get(reason, 0) + n
    total = sum(states.values())
    pct = round(100.0 * states["ready"] / total, 2) if total else 0.0
    return {"total": total, "ready": states["ready"], "indexedPct": pct, "states": states, "skipped": skipped}
