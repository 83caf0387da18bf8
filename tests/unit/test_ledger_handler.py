"""The provider-call ledger at the embed handler and the retention sweep, on SQLite and
PostgreSQL (the `opener` fixture of the store contract): under a daily token cap the ledger
holds exactly what the cap counts; a failed call leaves rows with its outcome and no tokens and
gives its reservation back; a call a breaker refused (never sent) leaves none; the lifecycle
sweep prunes rows past the retention, a bounded batch at a time, and counts them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest

from services.core.handlers import EmbedHandler
from services.core.lifecycle import Lifecycle, LifecycleConfig
from services.core.lifecycle.sweeps import LEDGER_PAGES
from services.core.usage import OverBudget, UsageRecorder, embed_query_within_cap
from services.wiring import build_ledger
from shared.adapters.celery_queue import decode, encode
from shared.adapters.cold_files import FileColdStore
from shared.costs import utc_day
from shared.ledger import LedgerRow, reached_provider
from shared.metrics import METRICS
from shared.model import PUBLIC_PRINCIPAL, DocKey, EmbedJob, SemanticStatus, SidecarEntry, StoredDoc
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import EmbedderError, StoreOfRecord
from shared.text.passages import PassageConfig
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.support.counting import CountingEmbedder

NOW = 1_790_000_000.0
SPACE = "core"


class Refusing(CountingEmbedder):
    """Fails every call: as the provider's 500 (sent) or as an open breaker (never sent)."""

    def __init__(self, sent: bool):
        super().__init__()
        self.sent = sent

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.sent:
            e = EmbedderError("circuit open")
            e.reached_provider = False  # type: ignore[attr-defined]  # as the breaker marks its refusal
            raise e
        self.calls.append(len(texts))
        raise EmbedderError("provider answered 500")

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def _put(store: StoreOfRecord, n: int, tenant: str = "t") -> list[EmbedJob]:
    jobs = []
    for i in range(n):
        key = DocKey(tenant, "c", f"d{i}")
        body = f"document {i} on boundary layer transition over swept wings, measured in a tunnel"
        h = f"h{tenant}{i}"
        store.put_docs([StoredDoc(key, {"title": f"T{i}", "body": body}, [PUBLIC_PRINCIPAL], None, h, NOW)],
                       [SidecarEntry(key, SPACE, SemanticStatus.QUEUED, h, None, updated_at=NOW)])
        jobs.append(EmbedJob(key, SPACE, h, purpose="backfill"))
    return jobs


def _handler(store: StoreOfRecord, emb: CountingEmbedder, daily_tokens: int = 0) -> EmbedHandler:
    return EmbedHandler(store, emb, EligibilityPolicy([]), {}, max_attempts=3, daily_tokens=daily_tokens,
                        clock=lambda: NOW, calls=build_ledger(store))


def _rows(store: StoreOfRecord, tenant: str = "t") -> list[LedgerRow]:
    return build_ledger(store).ledger_page(tenant, None, None, None, 0, 1000)


def test_under_a_cap_the_ledger_holds_exactly_what_the_cap_counts(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    emb = CountingEmbedder()
    handler = _handler(store, emb, daily_tokens=70)  # room for a few documents of ~20 tokens, not all
    for job in _put(store, 8):
        handler.run([job])  # one call each
    rows = _rows(store)
    assert len(rows) == len(emb.calls) and 0 < len(rows) < 8  # the rest were refused with `budget`
    assert store.tokens_used("t", utc_day(NOW)) == sum(r.tokens for r in rows) <= 70
    assert {(r.purpose, r.fields, r.outcome, r.provider) for r in rows} == {
        ("backfill", ("title", "body"), "ok", "hash")}
    deferred = [k for k in (DocKey("t", "c", f"d{i}") for i in range(8))
                if (s := store.sidecar(k, SPACE)) is not None and s.reason == "budget"]
    assert len(deferred) == 8 - len(rows) and not {k.doc_id for k in deferred} & {r.doc_id for r in rows}
    store.close()


def test_a_batched_call_shares_its_tokens_and_its_id(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    emb = CountingEmbedder()
    _handler(store, emb).run(_put(store, 3) + _put(store, 2, tenant="u"))
    assert emb.calls == [5]
    mine, theirs = _rows(store), _rows(store, "u")
    # one id per tenant for the call: comparing ids tells no tenant whose documents rode along
    assert len(mine) == 3 and len(theirs) == 2
    assert len({r.call_id for r in mine}) == len({r.call_id for r in theirs}) == 1
    assert mine[0].call_id != theirs[0].call_id
    usage = store.usage_by_day("t", None, 1)[0]
    assert usage["calls"] == 1 and usage["documents"] == 3 and usage["tokens"] == sum(r.tokens for r in mine)
    store.close()


def test_a_failed_call_has_rows_with_its_outcome_and_gives_its_reservation_back(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    emb = Refusing(sent=True)
    _handler(store, emb, daily_tokens=10_000).run(_put(store, 2))
    rows = _rows(store)
    assert len(emb.calls) == 1 and len(rows) == 2 and len({r.call_id for r in rows}) == 1
    assert all(r.outcome == "embedder_unavailable" and r.tokens == 0 for r in rows)
    assert store.tokens_used("t", utc_day(NOW)) == 0
    store.close()


def test_a_call_never_sent_leaves_no_row(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    _handler(store, Refusing(sent=False), daily_tokens=10_000).run(_put(store, 2))
    assert _rows(store) == [] and store.tokens_used("t", utc_day(NOW)) == 0
    store.close()


def test_the_sweep_prunes_rows_past_the_retention_in_bounded_batches(opener: Opener, tmp_path: Path) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    ledger = build_ledger(store)
    day = 86400.0
    old = [LedgerRow("c", "t", "c", f"d{i}", ("body",), SPACE, "hash", "m", 1, "touch", NOW - 10 * day - i,
                     utc_day(NOW - 10 * day), "ok") for i in range(11)]
    ledger.record([*old, LedgerRow("c2", "t", "c", None, None, SPACE, "hash", "m", 1, "query", NOW - day,
                                   utc_day(NOW - day), "ok")], [])
    cfg = LifecycleConfig(SPACE, evict_batch=2, ledger_retention_seconds=5 * day)
    life = Lifecycle(cfg, store, FileColdStore(tmp_path / "cold", "float16"), None,  # type: ignore[arg-type]
                     clock=lambda: NOW, ledger=ledger)
    before = METRICS.ledger_rows_pruned._value.get()
    bound = 2 * LEDGER_PAGES
    assert life.prune_ledger(NOW) == bound  # a tick deletes a bounded number; the oldest first
    assert len(_rows(store)) == 12 - bound and ledger.oldest_ledger_at("t") == NOW - 10 * day - (11 - bound - 1)
    assert life.prune_ledger(NOW) == 11 - bound
    assert [(r.doc_id, r.purpose) for r in _rows(store)] == [(None, "query")]
    assert METRICS.ledger_rows_pruned._value.get() - before == 11
    assert ledger.oldest_ledger_at("t") == NOW - day
    store.close()


def test_the_purpose_travels_with_a_celery_job_and_older_messages_read_as_touch() -> None:
    job = EmbedJob(DocKey("t", "c", "d"), SPACE, "h", "bulk", 2, True, "migration")
    assert decode(encode(job)) == job
    assert decode(encode(job)[:8]).purpose == "touch" and decode(encode(job)[:7]).purpose == "touch"


def test_only_a_breakers_refusal_counts_as_never_sent() -> None:
    refused = EmbedderError("circuit open")
    refused.reached_provider = False  # type: ignore[attr-defined]
    wrapped = RuntimeError("postponed")
    wrapped.__cause__ = refused
    assert not reached_provider(refused) and not reached_provider(wrapped)
    assert reached_provider(EmbedderError("provider answered 500"))


def test_query_embeddings_are_ledgered_with_the_cap_reservation_settled(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    rec = UsageRecorder(60, 3600, clock=lambda: NOW, ledger=store, daily_tokens=25, calls=build_ledger(store))
    query = "boundary layer transition on swept wings"  # ~10 tokens estimated
    embed_query_within_cap(rec, CountingEmbedder(), "t", "c", query, space=SPACE, purpose="tool")
    with pytest.raises(EmbedderError):
        embed_query_within_cap(rec, Refusing(sent=True), "t", "c", query, space=SPACE)
    embed_query_within_cap(rec, CountingEmbedder(), "t", "c", query, space=SPACE)
    with pytest.raises(OverBudget):  # a third would pass the cap: refused before any call
        embed_query_within_cap(rec, CountingEmbedder(), "t", "c", query, space=SPACE)
    rows = _rows(store)
    assert [(r.purpose, r.outcome, r.doc_id, r.fields, r.space) for r in rows] == [
        ("tool", "ok", None, None, SPACE), ("query", "embedder_unavailable", None, None, SPACE),
        ("query", "ok", None, None, SPACE)]
    assert rows[1].tokens == 0 and rows[0].tokens == rows[2].tokens > 0
    assert store.tokens_used("t", utc_day(NOW)) == sum(r.tokens for r in rows) <= 25
    assert store.usage_by_day("t", None, 1)[0]["calls"] == 2  # the failed call was given back
    store.close()


def test_each_ledgered_call_is_one_request_of_at_most_the_batch_size(opener: Opener) -> None:  # noqa: F811
    store = cast(StoreOfRecord, opener())
    emb = CountingEmbedder()
    handler = EmbedHandler(store, emb, EligibilityPolicy([]), {}, max_attempts=3, clock=lambda: NOW,
                           calls=build_ledger(store), passages=PassageConfig(max_chars=60, overlap=0),
                           max_inputs=4)
    jobs = _put(store, 5)  # two or three passages each: one call of them all would be 10+ inputs
    handler.run(jobs)
    rows = _rows(store)
    assert sum(emb.calls) > 4 and all(n <= 4 for n in emb.calls)
    assert len({r.call_id for r in rows}) == len(emb.calls)  # one ledger call per request sent
    assert sorted(r.doc_id for r in rows) == sorted(j.key.doc_id for j in jobs)  # each document once
    assert store.tokens_used("t", utc_day(NOW)) == sum(r.tokens for r in rows)
    store.close()
