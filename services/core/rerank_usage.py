"""A read's reranker call as a provider call: bounded per tenant, charged and written to the
provider-call ledger as a query embedding is (services/core/usage.py).

Two bounds apply before anything is sent: the tenant's reranker calls per minute in this process
(VIBE_READ_RERANK_PER_MINUTE), and the tenant's daily token cap (VIBE_TENANT_DAILY_TOKENS), which
every provider call shares. Either one spent: no call is made and the read keeps its fused order
(a read never fails for cost). A call that went out leaves one ledger row per document sent
(purpose `rerank`, its id and collection, never its text) and settles the tenant's usage in the
same transaction."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from services.core.usage import QueryCharge, UsageRecorder
from shared.agent_ports import Reranker, RerankError
from shared.costs import estimate_tokens, utc_day
from shared.ledger import OK, LedgerRow, UsageDelta, new_call_id, provider_and_model, shares
from shared.metrics import METRICS
from shared.model import DocKey

log = logging.getLogger("vibe.usage")
WINDOW_SECONDS = 60.0
MAX_TENANTS = 10_000  # the per-tenant windows are bounded: tenants come and go


class RerankBudget:
    """Each tenant's reranker calls in the last minute, in this process (0: no bound)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, tenant: str) -> bool:
        """One call for the tenant, if its minute has room."""
        if not self.per_minute:
            return True
        now = self.clock()
        with self._lock:
            calls = self._calls.get(tenant)
            if calls is None:
                if len(self._calls) >= MAX_TENANTS:
                    self._calls = {t: q for t, q in self._calls.items() if q and q[-1] > now - WINDOW_SECONDS}
                calls = self._calls[tenant] = deque()
            while calls and calls[0] <= now - WINDOW_SECONDS:
                calls.popleft()
            if len(calls) >= self.per_minute:
                return False
            calls.append(now)
            return True


class RerankOverBudget(Exception):
    """The tenant's reranker calls are spent (per minute, or the daily token cap): none was sent."""


def rerank_within_budget(usage: UsageRecorder | None, budget: RerankBudget | None, reranker: Reranker,
                         tenant: str, collection: str, space: str, query: str, keys: Sequence[DocKey],
                         texts: Sequence[str]) -> list[float]:
    """The reranker's scores of `texts` (the documents `keys`) for `query`, after both bounds;
    raises RerankOverBudget (nothing sent) or RerankError (the call failed)."""
    if budget is not None and not budget.take(tenant):
        METRICS.budget_denied.labels(budget="rerank_per_minute").inc()
        raise RerankOverBudget(tenant)
    weights = [estimate_tokens(query) + estimate_tokens(t) for t in texts]
    charge = None
    if usage is not None:
        # a cross-encoder reads the query beside every passage: that is what it bills
        charge = usage.reserve_query_embedding(tenant, collection, " ".join([query] * len(texts) + list(texts)))
        if charge is None:
            raise RerankOverBudget(tenant)
    at = usage.clock() if usage is not None else 0.0
    try:
        scores = reranker.rerank(query, list(texts))
    except RerankError as e:
        if usage is not None and charge is not None:
            _settle(usage, charge, reranker, tenant, space, keys, weights, at, e)
        raise
    if usage is not None and charge is not None:
        _settle(usage, charge, reranker, tenant, space, keys, weights, at, None)
    return scores


def _settle(usage: UsageRecorder, charge: QueryCharge, reranker: Reranker, tenant: str, space: str,
            keys: Sequence[DocKey], weights: list[int], at: float, error: RerankError | None) -> None:
    """The call's ledger rows and the usage they settle; without the provider-call ledger, a
    failure gives the charge back and a success stays counted in the next flush."""
    if usage.calls is None:
        if error is not None:
            usage.release(charge)
        return
    tokens = 0 if error is not None else charge.tokens
    calls = int(error is None) - int(charge.reserved)
    delta = tokens - (charge.tokens if charge.reserved else 0)
    provider, model = provider_and_model(reranker.model_id)
    call_id, day = new_call_id(), utc_day(at)
    outcome = OK if error is None else ("timeout" if "Timeout" in str(error) else "provider_failed")
    rows = [LedgerRow(call_id, tenant, k.collection, k.doc_id, None, space, provider, model, share, "rerank", at, day,
                      outcome) for k, share in zip(keys, shares(tokens, weights), strict=True)]
    try:
        usage.calls.record(rows, [UsageDelta(tenant, charge.day, charge.collection, calls, 0, delta)])
    except Exception:  # noqa: BLE001 - the ledger is away: never fail the read for it
        log.warning("provider ledger write failed; the rerank rows are lost",
                    exc_info=True)
