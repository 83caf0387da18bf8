"""PostgresStore under concurrency, on a private PostgreSQL server: what SQLite gets for free
from its single writer (BEGIN IMMEDIATE) PostgreSQL must get from locks. The shared contract
(test_store_contract.py) runs against it too."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

import shared.adapters.postgres_store as postgres_store
from shared.adapters.postgres_store import PostgresStore, _log
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc

S = SemanticStatus


@pytest.fixture
def stores(postgres_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database: two processes' pools (API and a worker, say)."""
    a, b = PostgresStore(postgres_url, pool_size=3), PostgresStore(postgres_url, pool_size=3)
    yield a, b
    a.close()
    b.close()


def put(store: PostgresStore, doc_id: str, status: SemanticStatus = S.NONE) -> DocKey:
    k = DocKey("t", "c", doc_id)
    store.put_docs([StoredDoc(k, {"title": doc_id}, [PUBLIC_PRINCIPAL], None, "h", 1.0)],
                   [SidecarEntry(k, "core", status, "h", updated_at=1.0)])
    return k


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def wait_blocked_or_done(url: str, t: threading.Thread, timeout: float = 10) -> None:
    """Until the thread finished or some backend waits on a lock (deterministic interleaving:
    no sleeps guessing how long a commit takes)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if not t.is_alive():
                return
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND datname = current_database()").fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the other writer neither finished nor waited on a lock")


def test_a_follower_never_skips_a_change_that_commits_late(stores: tuple[PostgresStore, PostgresStore],
                                                          postgres_url: str) -> None:
    """T1 appends to the change log (lower seq) and stays open; T2 writes a document
    meanwhile. Without the change-log lock T2 would take the higher seq and commit first, a
    follower reading in between would move past T1's seq and never see it."""
    api, worker = stores
    late = DocKey("t", "c", "late")
    with api._tx() as conn:  # T1: the same log append every writer makes, not yet committed
        _log(conn, [(late, "doc", None)])
        t2, _ = in_thread(lambda: put(worker, "early"))
        wait_blocked_or_done(postgres_url, t2)
        seen = api.changes_since(0)  # a follower polls while T1 is still open
    t2.join(10)
    assert not t2.is_alive()
    position = seen[-1].seq if seen else 0
    followed = seen + api.changes_since(position)
    assert [c.key.doc_id for c in followed] == ["late", "early"]
    assert [c.seq for c in followed] == sorted(c.seq for c in followed)


def test_status_compare_and_set_has_one_winner_across_connections(stores: tuple[PostgresStore, PostgresStore],
                                                                   postgres_url: str) -> None:
    """Two workers race `none → queued` for the same document: the second waits for the
    first's row lock and then sees `queued`, so only one of them moves (and enqueues) it."""
    api, worker = stores
    k = put(api, "a", S.NONE)
    with api._tx() as conn:
        assert api._set_status(conn, [k], "core", S.QUEUED, None, [S.NONE]) == [k]
        t2, out = in_thread(lambda: worker.set_status([k], "core", S.QUEUED, only_from=[S.NONE]))
        wait_blocked_or_done(postgres_url, t2)
        assert t2.is_alive()  # waiting on the row, not reading a stale `none`
    t2.join(10)
    assert out == [[]]
    assert worker.sidecar(k, "core").status == S.QUEUED  # type: ignore[union-attr]


def test_concurrent_writers_in_opposite_key_orders_do_not_deadlock(stores: tuple[PostgresStore, PostgresStore]
                                                                   ) -> None:
    """Reads touch the same cold documents in different rank orders: row locks are taken in
    key order, so the writers queue instead of one being aborted as a deadlock victim."""
    api, worker = stores
    keys = [put(api, f"d{i:02d}") for i in range(40)]
    errors: list[BaseException] = []

    def flip(store: PostgresStore, order: list[DocKey], rounds: int = 15) -> None:
        try:
            for i in range(rounds):
                store.set_status(order, "core", S.QUEUED if i % 2 else S.NONE)
                store.put_docs([StoredDoc(k, {"i": i}, ["*"], None, "h", 1.0) for k in order],
                               [SidecarEntry(k, "core", S.NONE, "h", updated_at=1.0) for k in order])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=flip, args=(api, keys)),
               threading.Thread(target=flip, args=(worker, keys[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    seqs = [c.seq for c in api.changes_since(0, limit=10_000)]
    assert len(seqs) == 40 + 2 * 15 * 40 and seqs == sorted(seqs)


def test_deleting_two_documents_of_one_content_at_once_removes_their_vector(
        stores: tuple[PostgresStore, PostgresStore], postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under READ COMMITTED each delete's NOT EXISTS would still see the other's uncommitted
    document and both would keep the vector: the embedding of deleted content outlives it."""
    api, worker = stores
    p, q = put(api, "p", S.QUEUED), put(api, "q", S.QUEUED)
    api.commit_vectors([(SidecarEntry(k, "core", S.QUEUED, "h"), [1.0, 0.0]) for k in (p, q)], "m")
    p_inside, release = threading.Event(), threading.Event()

    def gated_log(conn: psycopg.Connection, rows: list[tuple[DocKey, str, str | None]]) -> None:
        if rows and rows[0][0] == p:  # p's delete is mid-transaction, its vector decision made
            p_inside.set()
            release.wait(10)
        _log(conn, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(postgres_store, "_log", gated_log)
    t1, _ = in_thread(lambda: api.delete_doc(p))
    assert p_inside.wait(10)
    t2, _ = in_thread(lambda: worker.delete_doc(q))
    wait_blocked_or_done(postgres_url, t2)
    release.set()
    t1.join(10)
    t2.join(10)
    assert not t1.is_alive() and not t2.is_alive()
    assert api.get_docs([p, q]) == {}
    assert api.vector_for_hash("t", "h", "core") is None and api.vector_count("t", "core") == 0


def test_start_against_an_unreachable_server_fails_fast() -> None:
    from psycopg_pool import PoolTimeout

    with pytest.raises(PoolTimeout):
        PostgresStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1", connect_timeout=0.5)
