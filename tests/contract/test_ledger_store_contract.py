"""ProviderLedger contract (shared/adapters/ledger_sql.py) against SQLite and PostgreSQL alike,
with the `opener`/`store` fixtures of the DocumentStore contract: rows and the usage totals
they settle land together, pages are per tenant and filtered, retention prunes by age."""

from __future__ import annotations

import pytest

from services.wiring import build_ledger
from shared.ledger import LedgerRow, UsageDelta, shares
from shared.ports import ProviderLedger, StoreOfRecord
from tests.contract.test_store_contract import Opener, opener, store  # noqa: F401 - fixtures


@pytest.fixture
def ledger(store: StoreOfRecord) -> ProviderLedger:  # noqa: F811 - the imported fixture
    return build_ledger(store)


def _row(tenant: str, doc: str | None, at: float, tokens: int = 5, call: str = "c1", collection: str = "c",
         outcome: str = "ok") -> LedgerRow:
    return LedgerRow(call, tenant, collection, doc, None if doc is None else ("title", "body"), "core", "openai",
                     "m", tokens, "touch" if doc else "query", at, "2026-11-28", outcome)


def test_rows_and_usage_are_written_together_and_read_back_per_tenant(ledger: ProviderLedger,
                                                                      store: StoreOfRecord) -> None:  # noqa: F811
    rows = [_row("a", "d1", 100.0, 3), _row("a", "d2", 101.0, 4), _row("b", "d1", 102.0, 9, call="c2")]
    ledger.record(rows, [UsageDelta("a", "2026-11-28", "c", 1, 2, 7), UsageDelta("b", "2026-11-28", "c", 1, 1, 9)])
    got = ledger.ledger_page("a", None, None, None, 0, 100)
    assert [(r.doc_id, r.tokens, r.fields, r.call_id) for r in got] == [
        ("d1", 3, ("title", "body"), "c1"), ("d2", 4, ("title", "body"), "c1")]
    assert got[0].seq < got[1].seq
    assert [r.doc_id for r in ledger.ledger_page("b", None, None, None, 0, 100)] == ["d1"]
    # the usage totals the cap counts are the rows' sums
    assert store.tokens_used("a", "2026-11-28") == sum(r.tokens for r in got)
    assert store.usage_by_day("b", None, 5)[0] == {"day": "2026-11-28", "calls": 1, "documents": 1, "tokens": 9}


def test_filters_cursor_and_a_query_row_without_a_document(ledger: ProviderLedger) -> None:
    ledger.record([_row("a", "d1", 100.0), _row("a", None, 200.0), _row("a", "d1", 300.0, collection="other"),
                   _row("a", "d2", 400.0, outcome="rate_limited", tokens=0)], [])
    assert [r.at for r in ledger.ledger_page("a", "c", None, None, 0, 100)] == [100.0, 200.0, 400.0]
    assert [r.at for r in ledger.ledger_page("a", "c", "d1", None, 0, 100)] == [100.0]
    query = ledger.ledger_page("a", None, None, 150.0, 0, 1)
    assert len(query) == 1 and query[0].doc_id is None and query[0].fields is None
    rest = ledger.ledger_page("a", None, None, 150.0, query[0].seq, 100)
    assert [(r.at, r.outcome) for r in rest] == [(300.0, "ok"), (400.0, "rate_limited")]
    assert ledger.ledger_page("b", None, None, None, 0, 100) == []


def test_retention_prunes_old_rows_in_bounded_steps(ledger: ProviderLedger) -> None:
    ledger.record([_row("a", f"d{i}", float(i)) for i in range(5)] + [_row("b", "x", 50.0)], [])
    assert ledger.oldest_ledger_at("a") == 0.0
    assert ledger.prune_ledger(3.0, 2) == 2
    assert ledger.prune_ledger(3.0, 2) == 1
    assert ledger.prune_ledger(3.0, 2) == 0
    assert ledger.oldest_ledger_at("a") == 3.0 and ledger.oldest_ledger_at("b") == 50.0
    assert ledger.oldest_ledger_at("nobody") is None


def test_a_second_opening_sees_the_rows(ledger: ProviderLedger, opener: Opener) -> None:  # noqa: F811
    ledger.record([_row("a", "d1", 1.0)], [])
    again = opener()
    try:
        found = build_ledger(again).ledger_page("a", None, None, None, 0, 10)  # type: ignore[arg-type]
        assert [r.doc_id for r in found] == ["d1"]
    finally:
        again.close()


@pytest.mark.parametrize(("total", "weights"), [(10, [1, 1, 1]), (7, [5, 0, 2]), (3, [0, 0]), (0, [4, 4]),
                                                (101, [33, 33, 34])])
def test_shares_add_up_to_the_billed_total(total: int, weights: list[int]) -> None:
    got = shares(total, weights)
    assert sum(got) == total and len(got) == len(weights) and all(g >= 0 for g in got)
