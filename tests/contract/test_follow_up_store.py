"""FollowUpStore contract (shared/adapters/touch_switch_sql.py): the "auto" follow-up switch's
rows, against SQLite and PostgreSQL alike, with the `opener`/`store` fixtures of the
DocumentStore contract."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from shared.follow_up import FollowUpFlush
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener, store  # noqa: F401 - fixtures


@pytest.fixture
def fu(store: StoreOfRecord) -> StoreOfRecord:  # noqa: F811 - the imported fixture
    assert isinstance(store, StoreOfRecord)
    return store


def test_a_first_flush_makes_the_row_and_keeps_the_flushing_state_exactly(fu: StoreOfRecord) -> None:
    assert fu.follow_up_row("t", "c") is None
    before, row = fu.merge_follow_up("t", "c", FollowUpFlush(0, 0.0, 3, -0.123456789012345, 3, -0.37), 100)
    assert before is None
    assert (row.tenant, row.collection, row.reads, row.mean) == ("t", "c", 3, -0.123456789012345)
    stored = fu.follow_up_row("t", "c")
    assert stored is not None and (stored.reads, stored.mean) == (3, -0.123456789012345)  # bit for bit
    assert stored.updated_at > 0


def test_a_flush_from_an_older_row_merges_onto_the_newer_one(fu: StoreOfRecord) -> None:
    fu.merge_follow_up("t", "c", FollowUpFlush(0, 0.0, 4, 1.0, 4, 4.0), 100)
    # another process, which saw no row, flushes two reads of -1.0 each
    before, row = fu.merge_follow_up("t", "c", FollowUpFlush(0, 0.0, 2, -1.0, 2, -2.0), 100)
    assert before is not None and (before.reads, before.mean) == (4, 1.0)
    assert row.reads == 6 and row.mean == pytest.approx((4 * 1.0 - 2.0) / 6)
    stored = fu.follow_up_row("t", "c")
    assert stored is not None and (stored.reads, stored.mean) == (row.reads, row.mean)


def test_rows_are_per_tenant_in_collection_order_and_paged(fu: StoreOfRecord) -> None:
    for col in ("b", "a", "d", "c"):
        fu.merge_follow_up("t1", col, FollowUpFlush(0, 0.0, 1, 0.5, 1, 0.5), 100)
    fu.merge_follow_up("t2", "a", FollowUpFlush(0, 0.0, 1, 0.5, 1, 0.5), 100)
    assert [r.collection for r in fu.follow_up_rows("t1", "", 3)] == ["a", "b", "c"]
    assert [r.collection for r in fu.follow_up_rows("t1", "c", 3)] == ["d"]
    assert [(r.tenant, r.collection) for r in fu.follow_up_rows("t2")] == [("t2", "a")]
    assert fu.follow_up_rows("t3") == []


def test_counts_split_rows_by_state_over_every_tenant(fu: StoreOfRecord) -> None:
    assert fu.follow_up_counts(5, -0.05) == {"unknown": 0, "agree": 0, "disagree": 0}
    fu.merge_follow_up("t1", "few", FollowUpFlush(0, 0.0, 4, -1.0, 4, -4.0), 100)
    fu.merge_follow_up("t1", "agree", FollowUpFlush(0, 0.0, 5, -1.0, 5, -5.0), 100)
    fu.merge_follow_up("t2", "edge", FollowUpFlush(0, 0.0, 5, -0.05, 5, -0.25), 100)  # at the threshold
    assert fu.follow_up_counts(5, -0.05) == {"unknown": 1, "agree": 1, "disagree": 1}
    assert fu.follow_up_counts(4, -2.0) == {"unknown": 0, "agree": 0, "disagree": 3}


@pytest.fixture
def two(opener: Opener) -> Iterator[tuple[StoreOfRecord, StoreOfRecord]]:  # noqa: F811
    """Two instances on one database, as two processes have."""
    a, b = opener(), opener()
    assert isinstance(a, StoreOfRecord) and isinstance(b, StoreOfRecord)
    yield a, b
    a.close()
    b.close()


def test_concurrent_flushes_from_two_instances_all_count(two: tuple[StoreOfRecord, StoreOfRecord]) -> None:
    """Each flush is one transaction on the locked row: no read is lost to a race."""
    errors: list[BaseException] = []

    def flushes(st: StoreOfRecord, value: float) -> None:
        try:
            for _ in range(25):
                st.merge_follow_up("t", "c", FollowUpFlush(-1, 0.0, 0, 0.0, 2, 2 * value), 1000)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=flushes, args=(st, v)) for st, v in zip(two, (1.0, -1.0), strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    row = two[0].follow_up_row("t", "c")
    assert row is not None and row.reads == 100 and row.mean == pytest.approx(0.0, abs=1e-9)
