"""The touch policy's durable follow-up switch."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from shared.follow_up import FollowUpFlush, FollowUpRow, SwitchState


@runtime_checkable
class FollowUpStore(Protocol):
    """The touch policy's "auto" follow-up switch, durable and shared (services/planner/touch_switch.py
    `FollowUpSwitch` keeps its hot state in memory and merges into these rows): per (tenant,
    collection) the streamed first reads observed and their running disagreement. Both stores
    implement it with the same SQL (shared/adapters/touch_switch_sql.py)."""

    def follow_up_row(self, tenant: str, collection: str) -> FollowUpRow | None: ...

    def merge_follow_up(self, tenant: str, collection: str, flush: FollowUpFlush,
                        window: int) -> tuple[FollowUpRow | None, FollowUpRow]:
        """Merge one process's observations into the row in one transaction
        (shared.follow_up.merged): the row before (None: there was none) and after."""

    def follow_up_rows(self, tenant: str, after: str = "", limit: int = 100) -> list[FollowUpRow]:
        """The tenant's rows in collection-name order, those after `after`, at most `limit`."""

    def follow_up_counts(self, after: int, below: float) -> dict[SwitchState, int]:
        """Rows per switch state, every tenant together (the metric has no tenant labels)."""
