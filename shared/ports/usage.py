"""Usage statistics (queries, decayed touches, pins) and provider usage with its daily cap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.model import CollectionUsage, DocKey, UsageBatch


@runtime_checkable
class UsageStore(Protocol):
    """Usage statistics: what reads record (the usage recorder) and what promotion and pinning read back."""

    def record_usage(self, batch: UsageBatch, now: float, bucket_seconds: float, half_life: float) -> None: ...

    def collection_usage(self, since: float) -> list[CollectionUsage]:
        """Per collection: queries and hits in buckets newer than `since`, and the last query."""

    def prune_usage(self, before: float) -> int: ...

    def hot_docs(self, now: float, touches: float, half_life: float, limit: int,
                 refresh_before: float | None = None) -> list[DocKey]:
        """Documents whose decayed touches or co-occurrence reach `touches` and whose pin ends
        before `refresh_before` (default `now`: not pinned)."""

    def hot_docs_page(self, now: float, touches: float, half_life: float, after: DocKey | None, limit: int,
                      refresh_before: float | None = None) -> tuple[list[DocKey], DocKey | None]:
        """`hot_docs` among the next `limit` usage rows in key order after `after` (None: from
        the first), and the last key examined (None once the end is reached)."""
        ...

    def pin_docs(self, keys: Sequence[DocKey], until: float) -> int: ...

    def doc_usage(self, key: DocKey) -> dict[str, float | None] | None: ...

    def changes_pending(self, seq: int, tenant: str) -> int:
        """The tenant's change-log entries after `seq` (GET /semantic/lag: no other tenant's rows)."""

    def pinned_count(self, tenant: str, now: float) -> int:
        """Documents of the tenant kept embedded by a pin (GET /semantic/promotions)."""


@runtime_checkable
class ProviderUsage(Protocol):
    """Provider usage per tenant and day, and the daily token cap charged against it."""

    def charge_tokens(
        self, tenant: str, day: str, by_collection: dict[str, tuple[int, int]], calls: int, cap: int
    ) -> bool:
        """Add (documents, tokens) per collection for the day unless that would pass `cap`
        (0 = no cap); all or nothing. Returns whether it was charged."""

    def tokens_used(self, tenant: str, day: str) -> int: ...

    def usage_by_day(self, tenant: str, collection: str | None, days: int) -> list[dict[str, object]]: ...
