"""The daily token cap and GET /semantic/usage over a simulated UTC midnight: the app is built
with an injected clock (`build(..., clock=)`, what `bench lifecycle` replays days with) and
served by uvicorn on a real socket in this process, over SQLite and PostgreSQL, with an
OpenAI-protocol server counting provider calls. The clock starts in 2001, so any timestamp
a store or route still took from the wall clock would put the usage on another day."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.openai_server import OpenAIProtocolServer
from services.wiring import Container, build
from shared.config import ApiKey, Settings
from tests.integration.distributed.conftest import wait_for
from tests.support.in_process import ManualClock, UvicornThread

MIDNIGHT = 983_750_400.0  # 2001-03-05 00:00 UTC
BODY = " on wing flutter, gust loads and the certification of composite structures in transonic flight"
DOCS = [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"case {i}" + BODY} for i in range(6)]
KEYS = [ApiKey(key="k-admin", tenant="ta", principals=["user:admin"], scopes=["read", "write", "admin"]),
        ApiKey(key="k-other", tenant="tb", principals=["user:admin"], scopes=["read", "write", "admin"])]


class InProcess:
    def __init__(self, settings: Settings, clock: ManualClock):
        self.container: Container = build(settings, clock=clock)
        self.served = UvicornThread(self.container, KEYS)
        self.client = httpx.Client(base_url=self.served.base, timeout=60,
                                   headers={"Authorization": "Bearer k-admin"})

    def read(self, q: str, strategy: str) -> dict[str, Any]:
        r = self.client.post("/v1/read", json={"collection": "c", "q": q, "semantic": {"strategy": strategy},
                                               "limit": 10}, headers={"Accept": "application/json"})
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def usage(self) -> dict[str, Any]:
        return self.client.get("/semantic/usage?collection=c").json()  # type: ignore[no-any-return]

    def settled(self) -> bool:
        states = self.client.get("/semantic/coverage?collection=c").json()["states"]
        return not states.get("queued", 0)

    def close(self) -> None:
        self.client.close()
        self.served.stop()


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


def _settings(store: str, api: OpenAIProtocolServer, tmp_path: Path, request: pytest.FixtureRequest,
              **more: Any) -> Settings:
    extra: dict[str, Any] = {"store": store, **more}
    if store == "postgres":
        extra["postgres_url"] = request.getfixturevalue("postgres_url")
    return Settings(data_dir=tmp_path / "data", embedder="openai", openai_base_url=api.base_url,
                    embed_model="test-embed", api_keys=KEYS,
                    scheduler_interval_seconds=3600.0, **extra)  # ticks are the test's own


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_daily_cap_and_usage_by_day_roll_over_at_simulated_midnight(
        store: str, api: OpenAIProtocolServer, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    clock = ManualClock(MIDNIGHT - 3600.0)  # 2001-03-04 23:00 UTC
    srv = InProcess(_settings(store, api, tmp_path, request, tenant_daily_tokens=60), clock)
    try:
        assert srv.client.post("/v1/collections/c/docs:bulk", json={"docs": DOCS}).status_code == 200
        srv.read("flutter report", "keyword")  # touches all six: two fit in the day's 60 tokens
        wait_for(srv.settled, 30, "the touched documents to be embedded or refused")
        day1 = srv.usage()
        assert day1["today"]["day"] == "2001-03-04" and 0 < day1["today"]["tokens"] <= 60
        assert [d["day"] for d in day1["days"]] == ["2001-03-04"] and day1["days"][0]["documents"] == 2
        calls = api.requests
        spent = srv.read("gust loads certification", "hybrid")["diagnostics"]["semantic"]
        assert (spent["state"], spent["reason"]) == ("degraded", "budget") and api.requests == calls

        clock.t = MIDNIGHT + 60.0  # 2001-03-05 00:01 UTC
        day2 = srv.usage()
        assert day2["today"] == {"day": "2001-03-05", "tokens": 0, "remaining": 60}
        assert srv.container.lifecycle.tick().requeued_budget == 4  # yesterday's refusals come back
        fresh = srv.read("gust loads certification", "hybrid")["diagnostics"]["semantic"]
        assert fresh["reason"] is None and api.requests > calls  # a new day: the query is embedded
        wait_for(srv.settled, 30, "today's touches to be embedded or refused")
        days = srv.usage()["days"]
        assert [d["day"] for d in days] == ["2001-03-05", "2001-03-04"]
        assert days[1] == day1["days"][0]  # yesterday's row is closed
        assert 0 < days[0]["tokens"] <= 60 and days[0]["calls"] >= 1
    finally:
        srv.close()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_documents_status_says_when_the_scheduler_will_evict_it(
        store: str, api: OpenAIProtocolServer, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """GET /semantic/status shows a document's lifecycle: its last use, decayed touches, pin and
    the time from which the scheduler moves its vector to the cold store; the tick evicts it
    then and not before, and an eager collection's documents have no such time."""
    t0 = MIDNIGHT - 3600.0
    clock = ManualClock(t0)
    srv = InProcess(_settings(store, api, tmp_path, request, evict_idle_seconds=1800.0), clock)
    c = srv.container

    def status(doc: str) -> dict[str, Any]:
        r = srv.client.get(f"/semantic/status?collection=c&_id={doc}")
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    try:
        assert srv.client.post("/v1/collections/c/docs:bulk", json={"docs": DOCS}).status_code == 200
        never = status("d0")
        assert never["status"] == "none" and never["lifecycle"] == {
            "eager": False, "lastUsedAt": None, "touches": 0.0, "pinnedUntil": None, "evictableAt": None}
        srv.read("flutter report", "keyword")  # touches all six
        wait_for(srv.settled, 30, "the touched documents to be embedded")
        assert c.planner.usage is not None and c.planner.usage.flush(c.store)
        clock.t = t0 + 600.0
        ready = status("d0")
        life = ready["lifecycle"]
        assert ready["status"] == "ready" and life["lastUsedAt"] == "2001-03-04T23:00:00.000Z"
        assert life["evictableAt"] == "2001-03-04T23:30:00.000Z"  # idle 1800 s after its last use
        assert 0 < life["touches"] <= 1 and life["pinnedUntil"] is None and life["eager"] is False

        clock.t = t0 + 1799.0
        assert c.lifecycle.tick().evicted == 0  # not yet
        clock.t = t0 + 1801.0
        assert c.lifecycle.tick().evicted == len(DOCS)
        sched = srv.client.get("/semantic/scheduler").json()
        assert sched["lastTickAt"] == "2001-03-04T23:30:01Z" and sched["intervalSeconds"] == 3600.0
        assert sched["lastChange"] == {"at": "2001-03-04T23:30:01Z", "evicted": len(DOCS)}
        assert sched["policy"]["evictIdleSeconds"] == 1800.0 and sched["policy"]["coldCodec"] == "float16"
        theirs = srv.client.get("/semantic/scheduler", headers={"Authorization": "Bearer k-other"}).json()
        assert theirs["lastTickAt"] == sched["lastTickAt"] and theirs["lastChange"] is None  # not tenant ta's
        cold = status("d0")
        assert cold["status"] == "cold" and cold["lifecycle"]["evictableAt"] is None
        assert cold["lifecycle"]["lastUsedAt"] == life["lastUsedAt"]

        assert srv.client.post("/semantic/promote", json={"collection": "c"}).status_code == 200
        wait_for(lambda: status("d1")["status"] == "ready", 30, "the promotion to bring d1 back")
        eager = status("d1")["lifecycle"]
        assert eager["eager"] is True and eager["evictableAt"] is None  # an eager collection is never evicted
    finally:
        srv.close()
