"""Migration 3's indexes of the explain records (shared/adapters/explain_sql.py), one text for
both dialects: a lookup by id is the primary key; a tenant's rows in order (its cap drops the
oldest first) and the expiry sweep's walk. Frozen once released, as every step is."""

from __future__ import annotations

INDEXES = """CREATE INDEX IF NOT EXISTS explain_records_by_tenant ON explain_records(tenant, seq);
CREATE INDEX IF NOT EXISTS explain_records_by_expiry ON explain_records(expires_at);
"""
