"""A space's rows made ready for a cut-over: filled before a forced activation of a building
space (`fill_rows`), realigned with the documents before a retired space is made current again
(`realign_rows`), in short, paced transactions so other writers get in between."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from services.core.lifecycle.base import LifecycleBase

log = logging.getLogger("vibe.lifecycle")

# After this long of batches (`_in_batches`), this pause for other processes' writes.
BATCH_SECONDS = 0.1
BATCH_PAUSE = 0.15  # above the busy handler's longest poll interval (100 ms)


class Cutover(LifecycleBase):
    def fill_rows(self, tenant: str, space: str, batch: int = 5000) -> float:
        """Before a forced cut-over to `space`: a `none` row there for every document of the
        tenant that has none (documents the migration never reached; a touch never spends on a
        document without a row), a short transaction per `batch` documents. Returns the time
        from which the cut-over's own pass must still look (`switch_space(filled_since=)`):
        a write during the fill gives its document a row in a building space itself, so the
        pass is a safety net over recent writes, with a minute's slack for other hosts' clocks."""
        return self._in_batches(self.store.fill_space_rows, "space rows filled", tenant, space, batch)

    def realign_rows(self, tenant: str, space: str, batch: int = 5000) -> float:
        """Before a retired space is made current again (rollback): its rows brought up to date
        with the documents (`realign_space`), a short transaction per `batch` documents. Returns
        the time from which the cut-over must still realign (`switch_space(realigned_since=)`):
        a write meanwhile moves the space's rows onto its new content itself, but gives its
        document no row in a retired space, and an ACL change must reach the vector index."""
        return self._in_batches(self.store.realign_space_rows, "space rows realigned", tenant, space, batch)

    def _in_batches(self, step: Callable[[str, str, tuple[str, str] | None, int, float],
                                         tuple[int, tuple[str, str] | None]],
                    done: str, tenant: str, space: str, batch: int) -> float:
        """`step` batch after batch to the end, with a pause of `BATCH_PAUSE` after every
        `BATCH_SECONDS` of them. A writer of this process waits for one batch at most (the
        store's ticket lock lets it in between two); one of another process waits in SQLite's
        busy handler, which polls every 100 ms at most and misses most gaps between back-to-back
        batches (at 1M documents it waited up to 0.53 s unpaced, 0.18 s paced). PostgreSQL
        queues lock waiters; the pauses cost it little."""
        since = self.store.clock() - 60.0
        after: tuple[str, str] | None = None
        written, worked = 0, 0.0
        while True:
            started = time.monotonic()
            n, after = step(tenant, space, after, batch, self.store.clock())
            written += n
            if after is None:
                break
            worked += time.monotonic() - started
            if worked >= BATCH_SECONDS:
                time.sleep(BATCH_PAUSE)
                worked = 0.0
        log.info(done, extra={"tenant": tenant, "space": space, "rows": written})
        return since
