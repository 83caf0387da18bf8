"""Explain records' store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.explain_record import ExplainRecord


@runtime_checkable
class ExplainStore(Protocol):
    """Explain records (shared/explain_record.py), shared by every replica until they expire."""

    def put_explains(self, records: Sequence[ExplainRecord], per_tenant: int) -> None:
        """One ranking's records in one write; a tenant past `per_tenant` rows loses its oldest."""

    def get_explain(self, explain_id: str, now: float) -> ExplainRecord | None:
        """The record, unless unknown or expired at `now` (callers check tenant and caller)."""

    def prune_explains(self, now: float, limit: int) -> int:
        """Up to `limit` records expired at `now` go (any tenant); returns how many."""

    def count_explains(self) -> int: ...
