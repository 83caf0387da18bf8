"""The provider-call ledger's store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.ledger import LedgerRow, UsageDelta


@runtime_checkable
class ProviderLedger(Protocol):
    """The provider-call ledger (shared/ledger.py): rows per call, read back by tenant only."""

    def record(self, rows: Sequence[LedgerRow], usage: Sequence[UsageDelta]) -> None:
        """A call's rows and the usage totals they settle, in one transaction."""

    def ledger_page(self, tenant: str, collection: str | None, doc_id: str | None, since: float | None,
                    after: int, limit: int) -> list[LedgerRow]:
        """The tenant's rows with `seq` > `after` (and `at` >= `since`), oldest first."""

    def oldest_ledger_at(self, tenant: str) -> float | None: ...

    def prune_ledger(self, before: float, limit: int) -> int:
        """Up to `limit` rows older than `before` go (any tenant); returns how many."""
