"""Version 1 of the store's schema, the part both dialects share (lifecycle state, the
follow-up switch, collection settings, API keys): `DOUBLE PRECISION`, `BIGINT`, `ON CONFLICT`
read the same in SQLite and PostgreSQL. Each store's own tables of version 1 are in its module
(sqlite.py, postgres.py), which runs this text after them.

Frozen: this is what the code before schema versions ran at every start, so a store of that code
already holds it, and every statement is idempotent (IF NOT EXISTS, a conversion that finds
nothing left to convert) for version 1 to bring such a store in line instead of failing on it. A
change to a table is a new migration (schema/__init__.py), never an edit here.
"""

from __future__ import annotations

LIFECYCLE = """CREATE TABLE IF NOT EXISTS usage_buckets(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, bucket BIGINT NOT NULL,
  queries BIGINT NOT NULL, hits BIGINT NOT NULL, last_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(tenant, collection, bucket));
CREATE TABLE IF NOT EXISTS doc_usage(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, doc_id TEXT NOT NULL,
  touches DOUBLE PRECISION NOT NULL, cooccur DOUBLE PRECISION NOT NULL, decayed_at DOUBLE PRECISION NOT NULL,
  last_used_at DOUBLE PRECISION, pinned_until DOUBLE PRECISION,
  PRIMARY KEY(tenant, collection, doc_id));
CREATE TABLE IF NOT EXISTS collection_modes(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, mode TEXT NOT NULL, since DOUBLE PRECISION NOT NULL,
  reason TEXT NOT NULL, manual INTEGER NOT NULL, figures TEXT NOT NULL,
  PRIMARY KEY(tenant, collection));
CREATE TABLE IF NOT EXISTS cold_vectors(
  tenant TEXT NOT NULL, content_hash TEXT NOT NULL, space TEXT NOT NULL, ref TEXT NOT NULL,
  codec TEXT NOT NULL, bytes BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(tenant, content_hash, space));
CREATE TABLE IF NOT EXISTS provider_usage(
  tenant TEXT NOT NULL, day TEXT NOT NULL, collection TEXT NOT NULL,
  calls BIGINT NOT NULL, docs BIGINT NOT NULL, tokens BIGINT NOT NULL,
  PRIMARY KEY(tenant, day, collection));
CREATE TABLE IF NOT EXISTS scheduler_runs(
  scope TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL, report TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sweep_cursors(name TEXT PRIMARY KEY, cursor TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backfill_tasks(
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, collection TEXT, space TEXT NOT NULL, kind TEXT NOT NULL,
  forced INTEGER NOT NULL, position_key TEXT NOT NULL, examined BIGINT NOT NULL, queued BIGINT NOT NULL,
  total BIGINT NOT NULL, state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS tenant_spaces(
  tenant TEXT NOT NULL, space TEXT NOT NULL, model_id TEXT NOT NULL, dim INTEGER NOT NULL,
  state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, activated_at DOUBLE PRECISION,
  PRIMARY KEY(tenant, space));
CREATE TABLE IF NOT EXISTS space_retirements(
  tenant TEXT NOT NULL, space TEXT NOT NULL, retired_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(tenant, space));
CREATE TABLE IF NOT EXISTS space_scopes(
  tenant TEXT NOT NULL, space TEXT NOT NULL, scope TEXT NOT NULL,
  PRIMARY KEY(tenant, space));
CREATE TABLE IF NOT EXISTS dead_letters(
  follower TEXT NOT NULL, seq BIGINT NOT NULL, tenant TEXT NOT NULL, collection TEXT NOT NULL,
  doc_id TEXT NOT NULL, op TEXT NOT NULL, error TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(follower, seq));
CREATE INDEX IF NOT EXISTS docs_by_hash ON docs(tenant, content_hash);
-- The documents written since a time, read inside a cut-over's transaction (`_realign`,
-- `_rows_for_every_doc`), which holds the tenant's writes: without it a walk over the tenant's
-- documents, 0.34 s at 1M (SQLite), 0.22-0.33 s (PostgreSQL); with it 1-12 ms. Its cost:
-- ingest within noise, a rewrite of 100k documents +3% (SQLite) and up to
-- +10% (PostgreSQL; every write changes updated_at, so every update writes an entry of it),
-- ~65 bytes a document on PostgreSQL.
CREATE INDEX IF NOT EXISTS docs_by_update ON docs(tenant, updated_at);
-- (tenant, space) leading, for `known_spaces`' skip from one pair to the next instead of a scan of
-- the table every tick. Its cost: PostgreSQL writes an entry of it at
-- every status change (those updates are not HOT anyway), a pass of 200k status changes ~20%
-- longer, ingest within noise; SQLite only at an insert or delete, ingest within noise, the file
-- 5% larger. `space >= ''` holds for every row: it keeps SQLite from taking this index
-- for an UPDATE or DELETE by a row's key (every index of a WITHOUT ROWID table holds the key, so
-- it "covers" such a statement, and was chosen over the primary key: a status pass over 300k rows
-- took 40% longer); only a statement naming the condition can use it. cold_by_space replaces
-- cold_by_hash, whose (tenant, content_hash) the primary key's prefix serves already, so a cold
-- entry still costs two indexes.
CREATE INDEX IF NOT EXISTS sidecar_by_space ON sidecar(tenant, space) WHERE space >= '';
CREATE INDEX IF NOT EXISTS cold_by_space ON cold_vectors(tenant, space, content_hash);
-- An entry's later ones of the same key and op, for `compact_changes`.
CREATE INDEX IF NOT EXISTS changes_by_key ON changes(tenant, collection, doc_id, op, seq);
-- A tenant's newest change, looked up by each of its reads (is the index past it?).
CREATE INDEX IF NOT EXISTS changes_by_tenant ON changes(tenant, seq);
-- Older stores' leftovers, converted: an index cold_by_space replaced, and collections promoted
-- before promotion became a collection mode.
DROP INDEX IF EXISTS cold_by_hash;
INSERT INTO collection_modes SELECT tenant, collection, 'eager', promoted_at, 'manual', 1, '{}'
  FROM promotions WHERE true ON CONFLICT DO NOTHING;
DELETE FROM promotions;
"""

# The touch policy's "auto" follow-up switch (shared/adapters/touch_switch_sql.py).
TOUCH_SWITCH = """CREATE TABLE IF NOT EXISTS touch_follow_up(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, reads BIGINT NOT NULL, mean DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY(tenant, collection));
"""

# Per-collection settings (shared/adapters/collection_settings_sql.py).
COLLECTION_SETTINGS = """CREATE TABLE IF NOT EXISTS collection_settings(
  tenant TEXT NOT NULL, collection TEXT NOT NULL, language TEXT, embed_fields TEXT, filterable_fields TEXT,
  updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY(tenant, collection));
"""

# API-made keys (shared/adapters/keys_sql.py). The generation row exists from the start: every
# create and revoke bumps it, which is what serializes them.
KEYS = """CREATE TABLE IF NOT EXISTS api_keys(id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,
  principals TEXT NOT NULL, certs TEXT NOT NULL, scopes TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE,
  created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant, created_at);
CREATE TABLE IF NOT EXISTS api_key_generation(id INTEGER PRIMARY KEY, gen BIGINT NOT NULL);
INSERT INTO api_key_generation VALUES (1, 0) ON CONFLICT DO NOTHING;
"""

SHARED = LIFECYCLE + TOUCH_SWITCH + COLLECTION_SETTINGS + KEYS
