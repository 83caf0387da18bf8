"""Usage statistics from the read path (the lifecycle scheduler's inputs): which collections are queried and hit,
which documents queries touch and show. A read only adds to an in-memory batch (no store write
on the read path); `flush()` writes the batch in one transaction, from a timer thread in every
API process (services/worker/scheduler.py), so all replicas' statistics meet in the store."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.costs import billed_tokens, estimate_tokens, utc_day
from shared.ledger import OK, LedgerRow, UsageDelta, new_call_id, outcome_of, provider_and_model, reached_provider
from shared.metrics import METRICS
from shared.model import DocKey, UsageBatch
from shared.ports import Embedder, ProviderLedger, ProviderUsage, UsageStore

log = logging.getLogger("vibe.usage")
MAX_PENDING_DOCS = 200_000  # a batch never grows without bound while the store is away


@dataclass
class QueryCharge:
    """One query embedding's provider usage: reserved in the ledger (a capped tenant) or counted
    in the batch."""

    tenant: str
    collection: str
    tokens: int
    day: str
    reserved: bool = False


class OverBudget(Exception):
    """The tenant's daily token cap (VIBE_TENANT_DAILY_TOKENS) is spent: the query was not sent
    to the provider. A read or a tool answers without its semantic leg; it never fails
    for it."""


def embed_query_within_cap(usage: UsageRecorder | None, emb: Embedder, tenant: str, collection: str,
                           text: str, space: str = "", purpose: str = "query") -> list[float]:
    """One query embedding under the daily cap and usage ledger, for every path that embeds a
    query (the read path with purpose `query`, MCP tools with `tool`): reserved before the
    provider call, given back if it fails; with a provider-call ledger, settled with its ledger
    row. Raises OverBudget (no call made) or what the embedder raises."""
    charge = usage.reserve_query_embedding(tenant, collection, text) if usage is not None else None
    if usage is not None and charge is None:
        raise OverBudget(tenant)
    at = usage.clock() if usage is not None else 0.0
    try:
        with billed_tokens() as billed:
            vec = emb.embed_query(text)
    except BaseException as e:
        if usage is not None and charge is not None and usage.calls is not None:
            usage.settle_query(charge, QueryCall(emb.model_id, space, purpose, at), None, e)
        elif usage is not None:
            usage.release(charge)
        raise
    if usage is not None and charge is not None and usage.calls is not None:
        usage.settle_query(charge, QueryCall(emb.model_id, space, purpose, at), sum(billed) if billed else None)
    elif usage is not None and charge is not None and billed:
        usage.rebill(charge, sum(billed))
    return vec


@dataclass(frozen=True)
class QueryCall:
    """What the ledger row of a query embedding names besides its charge."""

    model_id: str
    space: str
    purpose: str
    at: float


class UsageRecorder:
    def __init__(self, bucket_seconds: float, half_life: float, clock: Callable[[], float] = time.time,
                 ledger: ProviderUsage | None = None, daily_tokens: int = 0, calls: ProviderLedger | None = None):
        self.bucket_seconds = bucket_seconds
        self.half_life = half_life
        self.clock = clock
        self.ledger = ledger  # the store's provider_usage rows (the daily cap's ledger)
        self.daily_tokens = daily_tokens  # VIBE_TENANT_DAILY_TOKENS; 0 = no cap
        # The provider-call ledger: with it an uncapped query is counted when its row is written
        # (one store write after the provider call), not in the next flush, so usage and the
        # ledger agree.
        self.calls = calls
        self._batch = UsageBatch()
        self._lock = threading.Lock()
        self.dropped = 0

    def record(self, tenant: str, collections: Sequence[str], hits: dict[str, int], touched: Sequence[DocKey],
               page: Sequence[DocKey]) -> None:
        """One query: `collections` it counts for, its page hits per collection, the documents
        it could embed (`touched`) and the documents it showed (`page`)."""
        now = self.clock()
        with self._lock:
            b = self._batch
            if len(b.touches) + len(b.used) > MAX_PENDING_DOCS:
                self.dropped += 1
                return
            for c in collections:
                key = (tenant, c)
                b.queries[key] = b.queries.get(key, 0) + 1
                b.hits[key] = b.hits.get(key, 0) + hits.get(c, 0)
                b.last_query[key] = now
            for k in touched:
                b.touches[k] = b.touches.get(k, 0) + 1
            for k in page:
                b.used[k] = now
            if len(page) > 1:
                b.pages.append(tuple(page))

    def reserve_query_embedding(self, tenant: str, collection: str, text: str) -> QueryCharge | None:
        """Before a query embedding's provider call (caps apply to every path that calls a
        provider). Under a daily cap its tokens are reserved in the store under the same
        per-tenant-day lock as documents' (every replica and worker counts them), and None means
        the cap is spent: the caller skips the provider and answers lexically (a read never fails
        for cost). Without a cap it is only counted, in the next flush (no store write on a read).
        Give the charge back with `release` when the call fails."""
        charge = QueryCharge(tenant, collection, estimate_tokens(text), utc_day(self.clock()))
        # Counted when granted (a call that then fails sent its tokens too); before, the metric
        # counted documents only while /semantic/usage counted queries as well.
        granted = self._granted(tenant, collection, charge)
        if granted is not None:
            METRICS.provider_tokens.labels(kind="queries").inc(granted.tokens)
        return granted

    def _granted(self, tenant: str, collection: str, charge: QueryCharge) -> QueryCharge | None:
        if self.daily_tokens and self.ledger is not None:
            try:
                ok = self.ledger.charge_tokens(tenant, charge.day, {collection: (0, charge.tokens)}, 1,
                                               self.daily_tokens)
            except Exception:  # noqa: BLE001 - the ledger is away: count it in the batch, never fail the read
                log.warning("query token reservation failed; counted in the next flush", exc_info=True)
            else:
                if not ok:
                    METRICS.budget_denied.labels(budget="daily_tokens").inc()
                    return None
                charge.reserved = True
                return charge
        if self.calls is None:
            self._count(tenant, collection, 1, charge.tokens)
        return charge

    def settle_query(self, charge: QueryCharge, call: QueryCall, billed: int | None,
                     error: BaseException | None = None) -> None:
        """After a query's provider call: its ledger row and the usage it settles, in one store
        transaction. A success counts what the provider billed (the estimate when it reported
        nothing); a failure gives a reservation back and, when the call went out, leaves a row
        with its outcome and no tokens. Without the store, an uncapped success is counted in the
        next flush as before (its row is lost, and said in the log)."""
        assert self.calls is not None
        tokens = 0 if error is not None else (billed if billed is not None else charge.tokens)
        calls = int(error is None) - int(charge.reserved)
        delta = tokens - (charge.tokens if charge.reserved else 0)
        usage = [UsageDelta(charge.tenant, charge.day, charge.collection, calls, 0, delta)]
        rows = []
        if error is None or reached_provider(error):
            provider, model = provider_and_model(call.model_id)
            rows = [LedgerRow(new_call_id(), charge.tenant, charge.collection, None, None, call.space, provider, model,
                              tokens, call.purpose, call.at, utc_day(call.at),
                              OK if error is None else outcome_of(error))]
        try:
            self.calls.record(rows, usage)
        except Exception:  # noqa: BLE001 - the ledger is away: never fail the read for it
            log.warning("provider ledger write failed; the query's row is lost", exc_info=True)
            if error is None and not charge.reserved:
                self._count(charge.tenant, charge.collection, 1, tokens)

    def rebill(self, charge: QueryCharge, billed: int) -> None:
        """The provider reported what it billed for the query: the charge becomes that figure
        (reserved in the ledger under a cap, else in the next flush), not the estimate."""
        delta = billed - charge.tokens
        if not delta:
            return
        charge.tokens = billed
        if not charge.reserved:
            self._count(charge.tenant, charge.collection, 0, delta)
            return
        assert self.ledger is not None
        try:
            self.ledger.charge_tokens(charge.tenant, charge.day, {charge.collection: (0, delta)}, 0, 0)
        except Exception:  # noqa: BLE001 - the estimate stays counted
            log.warning("query token correction failed", exc_info=True)

    def release(self, charge: QueryCharge | None) -> None:
        """A query embedding that failed gives its charge back (as a failed document batch does)."""
        if charge is None:
            return
        if not charge.reserved:
            self._count(charge.tenant, charge.collection, -1, -charge.tokens)
            return
        assert self.ledger is not None
        try:
            self.ledger.charge_tokens(charge.tenant, charge.day, {charge.collection: (0, -charge.tokens)}, -1, 0)
        except Exception:  # noqa: BLE001 - a lost refund only over-counts a report
            log.warning("query token refund failed", exc_info=True)

    def _count(self, tenant: str, collection: str, calls: int, tokens: int) -> None:
        with self._lock:
            row = self._batch.provider.setdefault((tenant, collection), [0, 0])
            row[0] += calls
            row[1] += tokens
            if row == [0, 0]:  # a failed call given back: no empty usage row
                del self._batch.provider[(tenant, collection)]

    def take(self) -> UsageBatch:
        with self._lock:
            batch, self._batch = self._batch, UsageBatch()
        return batch

    def flush(self, store: UsageStore) -> bool:
        """Write what was recorded; on a store error the batch is merged back for the next try."""
        batch = self.take()
        if not batch:
            return True
        try:
            store.record_usage(batch, self.clock(), self.bucket_seconds, self.half_life)
            return True
        except Exception:  # noqa: BLE001 - statistics must never break the service
            log.warning("usage flush failed; kept for the next flush", exc_info=True)
            self._merge(batch)
            return False

    def _merge(self, batch: UsageBatch) -> None:
        with self._lock:
            b = self._batch
            for src, dst in ((batch.queries, b.queries), (batch.hits, b.hits), (batch.touches, b.touches)):
                for k, n in src.items():
                    dst[k] = dst.get(k, 0) + n  # type: ignore[index, arg-type]
            for k2, t in batch.last_query.items():
                b.last_query[k2] = max(t, b.last_query.get(k2, t))
            for k3, t in batch.used.items():
                b.used[k3] = max(t, b.used.get(k3, t))
            b.pages = batch.pages[-1000:] + b.pages
            for k4, (calls, tokens) in batch.provider.items():
                row = b.provider.setdefault(k4, [0, 0])
                row[0] += calls
                row[1] += tokens
