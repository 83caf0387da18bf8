"""Crashes: kill -9 the API during a bulk load and during a
follower batch, kill -9 a Celery worker mid-batch, stop Redis and PostgreSQL for ~10 s while
writes and reads go on. After restart: nothing acknowledged is lost, the indexes agree with the
store (/semantic/mismatch missingVectors == 0, a keyword read finds every document the store
holds, a semantic read finds a sample of `ready` ones), every document of the eager collection
reaches `ready`, and no document text is embedded twice except the batch in flight at a kill.

A write whose answer never came is *unsure*: the document may hold it or the state before it,
never anything else (harness/workload.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import httpx

from harness.celery_worker import start_worker
from harness.redis_server import RedisServer
from harness.server import Served
from harness.stack import LOAD_KEYS, base_env, distributed, haltable_postgres
from harness.workload import (
    Ledger,
    RecordingProvider,
    WorkloadConfig,
    doc_text,
    mismatch,
    run_workload,
    verify,
    wait_settled,
)
from tests.integration.distributed.conftest import wait_for

EAGER, LAZY = "eager", "lazy"
KEY = "k-admin-a"


def kill9(app: Served) -> None:
    os.killpg(app.proc.pid, signal.SIGKILL)
    app.proc.wait(10)
    app.client.close()


def promote(base: str, keys: list[str] = LOAD_KEYS) -> None:
    for key in keys:
        r = httpx.post(f"{base}/semantic/promote", json={"collection": EAGER},
                       headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text


class Bulker(threading.Thread):
    """Bulk writes of `size` new documents, one after the other, until stopped or the server
    goes away; every item is recorded in the ledger before it is sent."""

    def __init__(self, base: str, ledger: Ledger, run: str, collection: str, size: int = 100):
        super().__init__(daemon=True)
        self.base, self.ledger, self.run_id, self.collection, self.size = base, ledger, run, collection, size
        self.stop_ev = threading.Event()
        self.acked_batches = 0
        self.failure: str | None = None

    def run(self) -> None:
        import random
        rng = random.Random(self.run_id)
        n = 0
        with httpx.Client(base_url=self.base, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as http:
            while not self.stop_ev.is_set():
                docs = []
                for _ in range(self.size):
                    doc_id = f"{self.run_id}n{n}"
                    n += 1
                    body = doc_text(doc_id, 1, rng)
                    self.ledger.attempt(doc_id, self.collection, KEY, 1, body)
                    docs.append({"_id": doc_id, **body})
                try:
                    r = http.post(f"/v1/collections/{self.collection}/docs:bulk", json={"docs": docs})
                except httpx.HTTPError as e:
                    self.failure = f"{type(e).__name__}"
                    return  # the server was killed: these stay unsure
                assert r.status_code == 200 and r.json()["accepted"] == self.size, r.text[:300]
                for d in docs:
                    self.ledger.ack(d["_id"], 1)
                self.acked_batches += 1


def settle_and_verify(base: str, ledger: Ledger, provider: RecordingProvider, label: str, allowed_dups: int,
                      keys: list[str] = LOAD_KEYS, queue_checks: bool = False, timeout: float = 90) -> None:
    wait_settled(base, ledger, {EAGER}, timeout=timeout)
    dups = provider.duplicates()
    verdict = verify(base, ledger, {EAGER})
    print(f"\n[{label}] verdict: {verdict.summary()}")
    print(f"[{label}] provider: {provider.calls} calls, {sum(provider.doc_embeddings().values())} document texts, "
          f"{len(dups)} embedded more than once (allowed: {allowed_dups})")
    assert verdict.ok(), verdict.summary()
    assert sum(n - 1 for n in dups.values()) <= allowed_dups, list(dups.items())[:5]
    for key, m in mismatch(base, keys).items():
        print(f"[{label}] mismatch {key}: {m}")
        assert m["missingVectors"] == 0, (key, m)
        if queue_checks:
            assert m["queuedWithoutJob"] == 0, (key, m)


def test_kill9_api_during_bulk_load(tmp_path: Path) -> None:
    """Two writers bulk-load 100-document batches into an eager and a lazy collection; the API
    is killed with SIGKILL mid-way and restarted on the same data dir."""
    data = tmp_path / "data"
    ledger = Ledger()
    with RecordingProvider(dim=64) as provider:
        env = base_env(provider, data)
        app = Served(data, env=env)
        promote(app.base, [KEY])
        writers = [Bulker(app.base, ledger, "ka", EAGER), Bulker(app.base, ledger, "kb", LAZY)]
        for w in writers:
            w.start()
        wait_for(lambda: sum(w.acked_batches for w in writers) >= 6, 60, "six acknowledged batches")
        kill9(app)
        for w in writers:
            w.join(30)
        acked = sum(1 for e in ledger.entries.values() if e.acked == 1)
        unsure = sum(1 for e in ledger.entries.values() if e.unsure)
        print(f"\n[kill -9 during bulk] acknowledged {acked} documents, {unsure} unsure at the kill "
              f"({[w.failure for w in writers]})")
        calls_at_kill = provider.calls
        again = Served(data, env=env)
        try:
            # in flight at the kill: at most one provider batch of 20 per embedding thread
            settle_and_verify(again.base, ledger, provider, "kill -9 during bulk", allowed_dups=2 * 20, keys=[KEY])
            print(f"[kill -9 during bulk] provider calls before the kill {calls_at_kill}, after {provider.calls}")
            assert "Traceback" not in again.log(), again.log()[-3000:]
        finally:
            again.stop()


def test_kill9_api_during_follower_batches(tmp_path: Path) -> None:
    """Two API processes on one data dir (index slots 0 and 1). A big bulk is acknowledged by
    A; B is killed while its follower applies that batch on its first read; then A is killed
    while a second big bulk is in its request (store committed or not, index being applied).
    Both restart on the same data dir and must agree with the store."""
    data = tmp_path / "data"
    ledger = Ledger()
    import random
    rng = random.Random(5)
    with RecordingProvider(dim=64) as provider:
        env = base_env(provider, data)
        a, b = Served(data, env=env), Served(data, env=env)
        promote(a.base, [KEY])

        def batch(prefix: str, coll: str, n: int) -> list[dict[str, object]]:
            out = []
            for i in range(n):
                body = doc_text(f"{prefix}n{i}", 1, rng)
                ledger.attempt(f"{prefix}n{i}", coll, KEY, 1, body)
                out.append({"_id": f"{prefix}n{i}", **body})
            return out

        first = batch("fa", LAZY, N_FOLLOW)
        r = a.bulk(KEY, LAZY, first)
        assert r.status_code == 200 and r.json()["accepted"] == N_FOLLOW
        for d in first:
            ledger.ack(str(d["_id"]), 1)
        # B has not read since: its first read syncs N_FOLLOW changes into its own index slot.
        reader = threading.Thread(target=lambda: _swallow(lambda: b.read(KEY, collection=LAZY, q="wing")),
                                  daemon=True)
        reader.start()
        time.sleep(0.3)
        kill9(b)
        reader.join(30)
        slot = data / "index-slots" / "1" / "index.seq"
        print(f"\n[follower] B killed at position {slot.read_text() if slot.exists() else 'none'} "
              f"(A at {(data / 'index.seq').read_text()}; {N_FOLLOW} changes to apply)")

        second = batch("fb", EAGER, N_FOLLOW)
        writer = threading.Thread(target=lambda: _swallow(lambda: a.bulk(KEY, EAGER, second)), daemon=True)
        writer.start()
        time.sleep(0.5)
        kill9(a)
        writer.join(30)

        a2 = Served(data, env=env)
        b2 = Served(data, env=env)
        try:
            for app, label in ((a2, "follower: A restarted"), (b2, "follower: B restarted")):
                settle_and_verify(app.base, ledger, provider, label, allowed_dups=2 * 20, keys=[KEY])
            assert "Traceback" not in a2.log() + b2.log()
        finally:
            b2.stop()
            a2.stop()


N_FOLLOW = 1000


def _swallow(f: object) -> None:
    with contextlib.suppress(httpx.HTTPError):
        f()  # type: ignore[operator]


BATCH = 20


def test_kill9_worker_mid_batch_postgres(tmp_path: Path, redis_srv: RedisServer, postgres_url: str) -> None:
    """The distributed profile on PostgreSQL with two workers: one worker's process group is
    killed while it embeds, under a running mixed load; a replacement starts. Every document
    reaches its state, nothing is lost, and only the killed worker's in-flight batch is
    embedded twice (redelivered after the visibility timeout)."""
    with RecordingProvider(dim=64) as provider, \
            distributed(tmp_path, provider, redis_srv, postgres_url, workers=2) as stack:
        base = stack.api.base
        promote(base)
        provider.hang(0.05)  # each batch is in flight a while, so the kill lands inside one
        ledger = Ledger()
        cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=3, duration=8, run="w",
                             bulk_size=40, mix={"bulk": 4, "put": 10, "read_json": 10, "delete": 2, "get": 4})
        done = threading.Event()
        result: dict[str, object] = {}

        def load() -> None:
            result["out"] = run_workload(base, cfg, ledger)
            done.set()

        threading.Thread(target=load, daemon=True).start()
        wait_for(lambda: provider.calls >= 8, 60, "the workers to be busy")
        stack.workers[0].kill9()
        killed_at = provider.calls
        stack.workers.append(start_worker(stack.worker_env, stack.log_dir))
        assert done.wait(120)
        provider.clear()
        _ledger, rec, _clients = result["out"]  # type: ignore[misc]
        print(f"\n[worker kill -9] load during the kill:\n{rec.table()}\nprovider calls at the kill: {killed_at}")
        assert rec.error_count() == 0, rec.errors[:10]
        # one batch (20 texts) of the killed worker may be embedded again after redelivery
        settle_and_verify(base, ledger, provider, "worker kill -9", allowed_dups=BATCH, queue_checks=True)


def test_redis_and_postgres_stopped_for_ten_seconds(tmp_path: Path, redis_srv: RedisServer) -> None:
    """A mixed load runs for ~22 s; Redis and PostgreSQL are both down from 5 s to 15 s (Redis
    comes back empty, PostgreSQL with its data). During the outage a request may be refused
    with a JSON error (5xx), never hang past the client's timeout or cut the connection; an
    acknowledged write is never lost, and afterwards the state converges (eager `ready`,
    queuedWithoutJob 0)."""
    with haltable_postgres() as pg, RecordingProvider(dim=64) as provider, \
            distributed(tmp_path, provider, redis_srv, pg.create_database("outage"), workers=2) as stack:
        base = stack.api.base
        promote(base)
        ledger = Ledger()
        cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=4, duration=22, run="o",
                             bulk_size=20, tolerate_outage=True, timeout=30)
        done = threading.Event()
        result: dict[str, object] = {}

        def load() -> None:
            result["out"] = run_workload(base, cfg, ledger)
            done.set()

        threading.Thread(target=load, daemon=True).start()
        time.sleep(5)
        redis_srv.stop()
        pg.halt()
        time.sleep(10)
        pg.resume()
        redis_srv.start()
        assert done.wait(180)
        _ledger, rec, clients = result["out"]  # type: ignore[misc]
        refused = sum((c.refused for c in clients), start=__import__("collections").Counter())
        print(f"\n[outage] load:\n{rec.table()}\nrefused during the outage: {dict(refused)}")
        assert stack.api.proc.poll() is None, "the API died"
        assert rec.error_count() == 0, rec.errors[:10]  # no 4xx, no wrong content
        transport = {k: n for k, n in refused.items() if k.endswith("transport")}
        assert not transport, f"cut or hung connections, not a clean refusal: {transport}"
        settle_and_verify(base, ledger, provider, "outage", allowed_dups=BATCH * 2, queue_checks=True, timeout=120)
