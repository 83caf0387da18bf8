"""Schema versions of the store of record, with forward migrations, for both stores.

Each store keeps a `schema_migrations` table, one row per applied step (version, why, when);
its version is the highest. At start the store runs `migrate` (sqlite.py, postgres.py), which
applies the steps the database lacks, each in its own transaction under the schema lock, so
processes starting together apply each step once; a database newer than the code is refused
(`SchemaTooNew`). Version 1 is the schema of the code from before versions, idempotent, so a
new database and one of that code both end at version 1 and go on from there.

Adding a migration (say version 2):

  1. append to `MIGRATIONS` in sqlite.py
       Migration(2, "passages: a long document's text in pieces", "ALTER TABLE docs ADD COLUMN parts TEXT;"),
  2. append the same version to `MIGRATIONS` in postgres.py, in its dialect (both stores number
     their versions alike; tests/unit/test_schema_migrations.py holds them to it).

A step is SQL (any number of statements, each ended by `;`) or a function given the open
transaction's connection, for a step that must read before it writes (a backfill). Steps are
forward only and never edited once released: a database that ran one does not run it again,
so a fix is the next step. Keep a step short (it holds the schema lock, and on SQLite the write
lock, for its duration); a large rewrite of rows belongs to a background job, not a migration.

`status.py` reads a store's version without migrating it (for an operator's command);
`SqliteStore.schema_version()` and `PostgresStore.schema_version()` read it from a running store.
"""
