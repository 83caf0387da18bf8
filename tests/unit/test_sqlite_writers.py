"""The embedded store's writers take turns (shared/threads.py `TicketLock`, `SqliteStore._tx`).

On SQLite's busy handler alone, a thread that committed back to back kept another thread's
write waiting for as long as it went on (bench/sqlite_writers.py: 4 s, the whole run)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.threads import TicketLock


def _wait_until(cond: object, what: str) -> None:
    for _ in range(2000):
        if callable(cond) and cond():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def _doc(i: int) -> StoredDoc:
    return StoredDoc(DocKey("t", "c", f"d{i}"), {"title": "x"}, [PUBLIC_PRINCIPAL], None, f"h{i}", 1.0)


def test_waiters_get_the_lock_in_the_order_they_came() -> None:
    lock = TicketLock()
    assert lock.acquire()
    order: list[int] = []

    def waiter(n: int) -> None:
        assert lock.acquire()
        order.append(n)
        lock.release()

    threads = []
    for n in range(6):
        t = threading.Thread(target=waiter, args=(n,))
        t.start()
        _wait_until(lambda n=n: lock._next == n + 2, f"waiter {n} in the queue")  # type: ignore[misc]
        threads.append(t)
    lock.release()
    for t in threads:
        t.join(10)
    assert order == list(range(6))


def test_a_waiter_that_times_out_gives_up_its_turn_and_the_queue_goes_on() -> None:
    lock = TicketLock()
    assert lock.acquire()
    assert not lock.acquire(timeout=0.05)  # the holder keeps it: this waiter gives up
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(timeout=10)))
    t.start()
    _wait_until(lambda: lock._next == 3, "the next waiter in the queue")
    lock.release()  # skips the ticket given up
    t.join(10)
    assert got == [True] and lock.held() is False
    lock.release()
    assert lock.acquire(timeout=0)  # free again


def test_a_thread_that_commits_back_to_back_does_not_keep_another_threads_write_out(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    cap = 3000  # the committer stops by itself after this many transactions
    done = threading.Event()
    commits = [0]

    def committer() -> None:
        while commits[0] < cap and not done.is_set():
            with store._tx() as c:
                c.execute("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 20000) "
                          "SELECT count(*) FROM r").fetchone()
            commits[0] += 1

    t = threading.Thread(target=committer)
    t.start()
    try:
        _wait_until(lambda: commits[0] >= 5, "the committer going")
        for i in range(10):
            store.put_docs([_doc(i)], [])
        at_end = commits[0]
    finally:
        done.set()
        t.join(60)
    # the ten writes went in while the committer was still at it, not after it stopped
    assert at_end < cap, at_end
    assert len(store.get_docs([DocKey("t", "c", f"d{i}") for i in range(10)])) == 10
    store.close()


def test_a_nested_transaction_is_refused_not_a_deadlock(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    with store._tx(), pytest.raises(sqlite3.OperationalError, match="within a transaction"), store._tx():
        pass
    store.put_docs([_doc(1)], [])  # the lock was given back
    store.close()


def test_two_store_objects_on_one_file_share_the_turn(tmp_path: Path) -> None:
    a, b = SqliteStore(tmp_path / "db.sqlite"), SqliteStore(tmp_path / "." / "db.sqlite")
    assert a._writers is b._writers
    assert SqliteStore(tmp_path / "other.sqlite")._writers is not a._writers


def test_a_forked_child_does_not_wait_for_a_turn_its_parent_holds(tmp_path: Path) -> None:
    """A prefork worker pool forks whatever the parent's threads are doing: a turn held by a
    parent thread would never be given back in the child, whose every write would then wait
    out the busy timeout and fail."""
    import os

    import shared.adapters.sqlite_store as sqlite_store

    path = tmp_path / "db.sqlite"
    store = SqliteStore(path)
    assert store._writers.acquire()  # a parent thread's turn, held across the fork
    pid = os.fork()
    if pid == 0:  # the child: its exit code says what happened, nothing else may run here
        try:
            sqlite_store.BUSY_TIMEOUT_SECONDS = 2  # fail fast without the fix
            SqliteStore(path).put_docs([_doc(1)], [])
            os._exit(0)
        except BaseException:
            os._exit(1)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0, "the child's write waited for the parent's turn"
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
    finally:
        store._writers.release()
    assert DocKey("t", "c", "d1") in store.get_docs([DocKey("t", "c", "d1")])
