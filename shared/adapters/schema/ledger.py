"""Migration 2's indexes of the provider-call ledger (shared/adapters/ledger_sql.py), one text
for both dialects: a tenant's rows in order (the admin page and its cursor), a document's calls,
a tenant's rows by time (`since`, and the oldest row kept, without a walk over the tenant's rows),
and the retention sweep's oldest-first walk. Frozen once released, as every step is."""

from __future__ import annotations

INDEXES = """CREATE INDEX IF NOT EXISTS provider_calls_by_tenant ON provider_calls(tenant, seq);
CREATE INDEX IF NOT EXISTS provider_calls_by_doc ON provider_calls(tenant, collection, doc_id, seq);
CREATE INDEX IF NOT EXISTS provider_calls_by_time ON provider_calls(tenant, at);
CREATE INDEX IF NOT EXISTS provider_calls_by_at ON provider_calls(at);
"""
