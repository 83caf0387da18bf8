"""The migration runner both stores of record share: a version table and an ordered list of
forward steps, each applied in its own transaction under the store's schema lock.

The version is read first without the lock, so the usual start (nothing to do) takes no write
lock at all; only a store behind the code takes it, once per step, and reads the version again
under it: of several processes starting at once the first applies the step and the others find
it applied, so each step runs exactly once. A store ahead of the code is refused, never served:
this build's SQL may no longer match what a newer one changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from shared.metrics import METRICS

log = logging.getLogger("vibe.store")

# One row per applied step: the current version is the highest, and the rows are the store's
# history for whoever wonders when a step ran. The same text is valid in both dialects.
VERSION_TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations(version INTEGER PRIMARY KEY, why TEXT NOT NULL, "
                 "applied_at DOUBLE PRECISION NOT NULL)")


@dataclass(frozen=True)
class Migration:
    """One forward step: `step` is SQL (any number of statements) or a function given the
    connection of the open transaction, for a step that has to read before it writes."""

    version: int
    why: str  # one line, kept in the version table
    step: str | Callable[[Any], None]


class SchemaTooNew(RuntimeError):
    """The store was migrated by a newer build than this one."""

    def __init__(self, found: int, latest: int):
        super().__init__(f"store schema version {found} is newer than this build ({latest}); upgrade vibe-semantic")
        self.found, self.latest = found, latest


@dataclass(frozen=True)
class Migrated:
    """Where a start left the store: its version and the steps this start applied."""

    version: int
    applied: tuple[int, ...]

    def line(self) -> str:
        if not self.applied:
            done = "no migration applied"
        elif len(self.applied) == 1:
            done = f"applied migration {self.applied[0]}"
        else:
            done = f"applied migrations {self.applied[0]}..{self.applied[-1]}"
        return f"store schema at version {self.version} ({done})"


class Dialect(Protocol):
    """What differs between SQLite and PostgreSQL: placeholders, how the version table is found,
    the schema lock, and how a script of several statements runs inside a transaction."""

    placeholder: str

    def version(self, conn: Any) -> int:
        """The highest applied step; 0 before the version table exists."""
        ...

    def locked(self) -> AbstractContextManager[Any]:
        """A transaction holding the schema lock, yielding its connection."""
        ...

    def script(self, conn: Any, sql: str) -> None: ...


def scalar(row: Any) -> Any:
    """The first column of a row, whatever the connection's row factory (dict or sequence)."""
    return next(iter(row.values())) if isinstance(row, Mapping) else row[0]


def latest(migrations: Sequence[Migration]) -> int:
    """The version the steps lead to, once checked to be numbered 1, 2, ... in order: the runner
    finds the next step by its position, so a gap or a duplicate would apply the wrong one."""
    found = [m.version for m in migrations]
    if found != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..n in order, found {found}")
    return len(found)


def _known(version: int, newest: int) -> int:
    if version > newest:
        raise SchemaTooNew(version, newest)
    return version


def _apply(dialect: Dialect, conn: Any, m: Migration, clock: Callable[[], float]) -> None:
    if isinstance(m.step, str):
        dialect.script(conn, m.step)
    else:
        m.step(conn)
    ph = dialect.placeholder
    conn.execute(f"INSERT INTO schema_migrations(version, why, applied_at) VALUES ({ph}, {ph}, {ph})",
                 (m.version, m.why, clock()))


def migrate(dialect: Dialect, conn: Any, migrations: Sequence[Migration],
            clock: Callable[[], float] = time.time) -> Migrated:
    """Bring the store on `conn` to the last of `migrations` (`conn` reads the version outside
    the lock; `dialect.locked()` opens each step's transaction) and log where it stands."""
    newest = latest(migrations)
    applied: list[int] = []
    version = _known(dialect.version(conn), newest)
    while version < newest:
        with dialect.locked() as tx:
            tx.execute(VERSION_TABLE)
            version = _known(dialect.version(tx), newest)  # another process may have moved it on
            if version < newest:
                step = migrations[version]
                _apply(dialect, tx, step, clock)
                applied.append(step.version)
                version = step.version
    done = Migrated(version, tuple(applied))
    log.info(done.line(), extra={"schema_version": version, "applied_migrations": list(applied)})
    METRICS.store_schema_version.set(version)
    return done
