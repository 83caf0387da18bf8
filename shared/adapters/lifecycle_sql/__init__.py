"""The `LifecycleStore` half of both stores of record, written once, one module per concern.

SQLite and PostgreSQL share this SQL: `?` placeholders (turned into `%s` for psycopg),
`INSERT ... ON CONFLICT ... DO UPDATE` (both dialects), `DOUBLE PRECISION` (SQLite reads it as
REAL) and no dialect functions except the power of two used for decay (`_POW2`: PostgreSQL's
`power`, a function the SQLite adapter registers on its connections). Each store supplies its
transactions, reads, change-log append and row locking (the hooks of `base.SqlBase`); every
statement here runs inside them, so a lifecycle decision is one transaction too.
The tables and indexes, and why each index exists, are in shared/adapters/schema/.

Decay without a read-modify-write: a document's `touches` are stored as of `decayed_at`; an
upsert scales the stored value to the new time and adds, in one statement, so two API processes
flushing at once both count.

The concerns: `usage` (statistics, pins, provider usage), `runs` (scheduler ticks, sweep
cursors, dead letters), `promotion` (collection modes, backfill tasks), `eviction` (the cold
store's bookkeeping), `sweeps` (the scheduler's paged clean-ups), `rows` (sidecar rows aligned
with the documents), `reports` (counts for admin views and metrics), `spaces` (tenant space
records) and `cutover` (switching spaces, filling and realigning their rows).
"""

from __future__ import annotations

from shared.adapters.lifecycle_sql.base import CURSOR_SEP, SqlBase
from shared.adapters.lifecycle_sql.cutover import CutoverSql
from shared.adapters.lifecycle_sql.eviction import EvictionSql
from shared.adapters.lifecycle_sql.promotion import PromotionSql
from shared.adapters.lifecycle_sql.reports import ReportsSql
from shared.adapters.lifecycle_sql.rows import SidecarRowsSql
from shared.adapters.lifecycle_sql.runs import RunsSql
from shared.adapters.lifecycle_sql.sweeps import SweepsSql
from shared.adapters.lifecycle_sql.usage import UsageSql

__all__ = ["CURSOR_SEP", "LifecycleSql", "SqlBase"]


class LifecycleSql(UsageSql, RunsSql, PromotionSql, EvictionSql, SweepsSql, SidecarRowsSql, ReportsSql, CutoverSql):
    """Mixin: every lifecycle concern; the store class provides the hooks (`SqlBase`)."""
