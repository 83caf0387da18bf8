"""Where embedding jobs go, and the token bucket that bounds embeds triggered by reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from shared.model import DocKey, EmbedJob


@runtime_checkable
class JobQueue(Protocol):
    """Where embedding jobs go. `depth()` feeds /semantic/queueDepth and /metrics."""

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        """Enqueue jobs not already pending; returns how many were newly enqueued."""

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        """Jobs by lane; with `tenant`, only that tenant's (admin endpoints never show
        another tenant's activity)."""

    def on_done(self, callback: Callable[[list[DocKey]], None]) -> None:
        """Register a callback run after jobs complete (keys that changed state)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Budget(Protocol):
    """Per-tenant token bucket for embeds triggered by reads."""

    def take(self, tenant: str, wanted: int) -> int:
        """Take up to `wanted` tokens; returns how many were granted."""

    def available(self, tenant: str) -> int: ...

    def reachable(self) -> bool:
        """False while the budget's store cannot be asked (Redis away): a refusal then means
        "unknown", not "spent"."""
