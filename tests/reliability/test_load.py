"""Load: a mixed workload — JSON and SSE reads, single
PUTs, bulk writes, deletes, GETs, admin GETs — from several client threads for a bounded time,
against the embedded profile and against API + 2 Celery workers + beat + private Redis +
private PostgreSQL. Required: 0 errors (no 5xx, no transport error, no 429: the request rate
limit is off), nothing acknowledged lost (every acknowledged write readable afterwards with its
last acknowledged content, every acknowledged delete gone, keyword reads agree), every document
of the eager collection `ready`, every lazy one `none` or `ready` (its stated states), no
document text embedded twice, /semantic/mismatch 0. p50/p99 per route are printed
(`pytest -s`); the full-size run is bench/reliability.py."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from harness.redis_server import RedisServer
from harness.server import Served
from harness.stack import LOAD_KEYS, base_env, distributed
from harness.workload import (
    Ledger,
    RecordingProvider,
    WorkloadConfig,
    mismatch,
    run_workload,
    verify,
    wait_settled,
)

DURATION = 12.0
EAGER, LAZY = "eager", "lazy"


def promote(base: str) -> None:
    for key in LOAD_KEYS:
        r = httpx.post(f"{base}/semantic/promote", json={"collection": EAGER},
                       headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text


def check(base: str, ledger: Ledger, provider: RecordingProvider, queue_checks: bool, label: str) -> None:
    wait_settled(base, ledger, {EAGER}, timeout=60)
    dups = provider.duplicates()  # before verify: its semantic reads embed document texts as queries
    verdict = verify(base, ledger, {EAGER})
    print(f"\n[{label}] verdict: {verdict.summary()}")
    print(f"[{label}] provider: {provider.calls} calls, {sum(provider.doc_embeddings().values())} document texts, "
          f"{len(dups)} embedded twice")
    assert verdict.ok(), verdict.summary()
    assert verdict.checked > 50
    assert not dups, list(dups.items())[:5]
    for key, m in mismatch(base, LOAD_KEYS).items():
        assert m["missingVectors"] == 0, (key, m)
        if queue_checks:
            assert m["queuedWithoutJob"] == 0, (key, m)


def test_mixed_load_embedded(tmp_path: Path) -> None:
    with RecordingProvider(dim=64) as provider:
        app = Served(tmp_path / "data", env=base_env(provider, tmp_path / "data"))
        try:
            promote(app.base)
            cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=4, duration=DURATION,
                                 bulk_size=20, run="e")
            ledger, rec, _ = run_workload(app.base, cfg)
            print("\n[embedded]\n" + rec.table())
            assert rec.error_count() == 0, rec.errors[:10]
            check(app.base, ledger, provider, queue_checks=False, label="embedded")
            assert "Traceback" not in app.log(), app.log()[-3000:]
        finally:
            app.stop()


def test_mixed_load_distributed(tmp_path: Path, redis_srv: RedisServer, postgres_url: str) -> None:
    with RecordingProvider(dim=64) as provider, \
            distributed(tmp_path, provider, redis_srv, postgres_url, workers=2) as stack:
        base = stack.api.base
        promote(base)
        cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=4, duration=DURATION,
                             bulk_size=20, run="d")
        ledger, rec, _ = run_workload(base, cfg)
        print("\n[distributed]\n" + rec.table())
        assert rec.error_count() == 0, rec.errors[:10]
        check(base, ledger, provider, queue_checks=True, label="distributed")
        assert "Traceback" not in stack.api.log(), stack.api.log()[-3000:]


@pytest.fixture
def redis_srv(tmp_path: Path):  # type: ignore[no-untyped-def]
    srv = RedisServer(tmp_path / "redis").start()
    try:
        yield srv
    finally:
        srv.stop()
