"""The provider-call ledger: one row per provider call per document (its embedded fields
named, never their text), so an operator can answer "which fields of which document went to
which provider, when, and what came of it". A query embedding has no document: its row names
the collection only.

The daily caps and GET /semantic/usage count exactly what the ledger holds: a call's rows and
its settlement of the tenant's usage totals (the daily cap's ledger, `provider_usage`) are
written in one transaction (`ProviderLedger.record`). A reservation made before a call is
settled by that transaction, so once no call is in flight the totals are the ledger's sums."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

Purpose = Literal["touch", "eager", "backfill", "migration", "query", "tool", "rerank"]
PURPOSES: Final[tuple[str, ...]] = ("touch", "eager", "backfill", "migration", "query", "tool", "rerank")
OK: Final = "ok"


@dataclass(frozen=True)
class LedgerRow:
    """One document's part of one provider call (`doc_id`/`fields` None for a query). `tokens`
    is its share of what the call billed (0 for a failed call, which is not charged); rows of one
    batched call share `call_id`. `seq` is the store's order (0 before it is written)."""

    call_id: str
    tenant: str
    collection: str
    doc_id: str | None
    fields: tuple[str, ...] | None
    space: str
    provider: str
    model: str
    tokens: int
    purpose: str
    at: float
    day: str
    outcome: str = OK
    seq: int = 0


@dataclass(frozen=True)
class UsageDelta:
    """A change of one tenant-day-collection usage total, written with the rows it accounts for."""

    tenant: str
    day: str
    collection: str
    calls: int
    docs: int
    tokens: int


def new_call_id() -> str:
    return uuid.uuid4().hex


def tenant_call_id(call_id: str, tenant: str) -> str:
    """The id a tenant's rows of one call carry. A batch may hold several tenants' documents; each
    tenant gets its own id for it, so comparing ids tells no tenant whose documents rode along."""
    return hashlib.blake2b(f"{call_id}\x1f{tenant}".encode(), digest_size=16).hexdigest()


def provider_and_model(model_id: str) -> tuple[str, str]:
    """`openai:text-embedding-3-small` → ("openai", "text-embedding-3-small"); every embedder's
    model id names its provider before the first colon."""
    provider, sep, model = model_id.partition(":")
    return (provider, model) if sep else (model_id, model_id)


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and what it chains, a few deep (the job layer wraps an embedder's error at most twice)."""
    out: list[BaseException] = []
    seen: BaseException | None = e
    while seen is not None and len(out) < 4:
        out.append(seen)
        seen = seen.__cause__
    return out


def outcome_of(e: BaseException) -> str:
    """A failed call's stable code: what the provider answered, never its message."""
    chain = _chain(e)
    statuses = [s for x in chain if isinstance(s := getattr(x, "status_code", None), int)]
    if 429 in statuses or any(type(x).__name__ == "RateLimited" for x in chain):
        return "rate_limited"
    if any(400 <= s < 500 for s in statuses):
        return "provider_refused"
    return "embedder_unavailable"


def reached_provider(e: BaseException) -> bool:
    """Whether a failed call went out at all: a breaker that refused it (marked by
    `reached_provider = False` on the exception or one it chains) sent nothing, so the ledger
    gets no row for it."""
    return all(getattr(x, "reached_provider", True) is not False for x in _chain(e))


def shares(total: int, weights: Sequence[int]) -> list[int]:
    """`total` shared out over `weights` in whole tokens that add up to it exactly (largest
    remainders), so a batched call's rows sum to what the call billed."""
    if not weights:
        return []
    whole = sum(weights)
    if whole <= 0:
        base = [total // len(weights)] * len(weights)
        for i in range(total - sum(base)):
            base[i] += 1
        return base
    exact = [total * w / whole for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out
