"""Migration 6's indexes, one text for both dialects, for the admin views' set-based reports
(shared/adapters/audit_sql.py). /semantic/mismatch merges the ready rows' content hashes with
the hashes that have a vector, two narrow index walks, instead of probing `vectors` row by row
(a row holds the vectors themselves, ~1.5 kB at 384 dimensions: a probe of the table cost
~10 µs on SQLite). /semantic/coverage counts states from an index walk and reads only the rows
that need more than their status (why a document was skipped, whether it is cold). Both
sidecar indexes are partial: only ready rows enter the first, only skipped and cold rows the
second, so a status change writes an entry only into or out of those states; an update of a
row by its key keeps to the primary key (it matches more of the key). Frozen once released,
as every step is."""

from __future__ import annotations

INDEXES = """CREATE INDEX IF NOT EXISTS vectors_by_space ON vectors(tenant, space, content_hash, dim);
CREATE INDEX IF NOT EXISTS sidecar_ready_by_hash ON sidecar(tenant, space, status, content_hash)
  WHERE status='ready';
CREATE INDEX IF NOT EXISTS sidecar_details ON sidecar(tenant, space, status, reason, cold_ref)
  WHERE cold_ref IS NOT NULL OR status IN ('denied', 'deferred', 'failed');
"""
