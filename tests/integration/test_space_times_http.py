"""Since when a space serves (GET /semantic/spaces `createdAt`, `activatedAt`): the configured
space of a tenant that never migrated has no row in the store, and was listed with both null; a
migration then recorded it as created at the migration's start. Now both are the tenant's oldest
document as it stands (it has served since then at least), read by an index at listing time and
kept from the migration's start on. Served by uvicorn on a real socket in this process, with an
injected clock, over SQLite and PostgreSQL; every answer is checked against /openapi.json."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.openapi_responses import OpenApiResponses
from services.wiring import Container, build
from shared.config import ApiKey, Settings
from tests.integration.distributed.conftest import wait_for
from tests.support.in_process import ManualClock, UvicornThread

T0 = 983_746_800.0  # 2001-03-04 23:00 UTC: not a time the wall clock could give
DAY = 86400.0
DOCS = [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"case {i} on wing flutter"} for i in range(6)]
KEYS = [ApiKey(key="k-a", tenant="ta", principals=["user:admin"], scopes=["read", "write", "admin"]),
        ApiKey(key="k-b", tenant="tb", principals=["user:admin"], scopes=["read", "write", "admin"])]


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class Served:
    def __init__(self, settings: Settings, clock: ManualClock):
        self.container: Container = build(settings, clock=clock)
        self.served = UvicornThread(self.container, KEYS)
        self.http = httpx.Client(base_url=self.served.base, timeout=60,
                                 event_hooks={"response": [OpenApiResponses(self.served.base).check]})

    def call(self, method: str, path: str, body: Any = None, key: str = "k-a") -> httpx.Response:
        return self.http.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})

    def spaces(self, key: str = "k-a") -> dict[str, dict[str, Any]]:
        r = self.call("GET", "/semantic/spaces", key=key)
        assert r.status_code == 200, r.text
        return {s["space"]: s for s in r.json()["spaces"]}

    def times(self, space: str, key: str = "k-a") -> tuple[str | None, str | None]:
        s = self.spaces(key)[space]
        return s["createdAt"], s["activatedAt"]

    def close(self) -> None:
        self.http.close()
        self.served.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Served, ManualClock]]:
    clock = ManualClock(T0)
    extra: dict[str, Any] = {"store": request.param}
    if request.param == "postgres":
        extra["postgres_url"] = request.getfixturevalue("postgres_url")
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, api_keys=KEYS,
                        scheduler_interval_seconds=3600.0, backfill_interval_seconds=0.2,
                        per_tenant_per_min=100_000, **extra)
    srv = Served(settings, clock)
    try:
        yield srv, clock
    finally:
        srv.close()


def test_the_configured_space_serves_since_the_tenants_oldest_document(
        served: tuple[Served, ManualClock]) -> None:
    srv, clock = served
    assert srv.times("core", "k-b") == (None, None)  # no document yet: nothing served
    assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": DOCS[:3]}).status_code == 200
    clock.t = T0 + 3600
    assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": DOCS[3:]}).status_code == 200
    clock.t = T0 + 2 * 3600
    assert srv.times("core") == (iso(T0), iso(T0))  # active from the start
    assert srv.container.store.tenant_spaces("ta") == []  # read, not recorded: VIBE_SPACE still rules
    assert srv.times("core", "k-b") == (None, None)  # another tenant's documents are not its own

    # a migration records the configured space with that time (it was the migration's start)
    clock.t = T0 + DAY
    r = srv.call("POST", "/semantic/spaces", {"space": "small", "model": "hash:v1@16"})
    assert r.status_code == 202, r.text
    assert srv.times("core") == (iso(T0), iso(T0))
    assert srv.times("small") == (iso(T0 + DAY), None)
    # recorded, it stands: a rewrite of the oldest documents no longer moves it
    clock.t = T0 + 2 * DAY
    edited = [{**d, "body": d["body"] + ", edited"} for d in DOCS[:3]]
    assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": edited}).status_code == 200
    assert srv.times("core") == (iso(T0), iso(T0))

    def settled() -> bool:
        s = srv.spaces()["small"]
        return s["coverage"]["ready"] == len(DOCS) and (s.get("migration") or {}).get("state", "done") == "done"

    wait_for(settled, 30, "the migration to small")
    clock.t = T0 + 3 * DAY
    assert srv.call("POST", "/semantic/spaces/small/activate").status_code == 200
    listed = srv.spaces()
    assert (listed["core"]["state"], listed["core"]["createdAt"], listed["core"]["activatedAt"],
            listed["core"]["retiredAt"]) == ("retired", iso(T0), iso(T0), iso(T0 + 3 * DAY))
    assert srv.times("small") == (iso(T0 + DAY), iso(T0 + 3 * DAY))


def test_a_tenant_that_rewrote_everything_serves_since_its_oldest_current_document(
        served: tuple[Served, ManualClock]) -> None:
    """Before a migration records it, the time is what the documents tell now: their first
    versions are not kept, so a rewrite of every document moves it (at least since then)."""
    srv, clock = served
    assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": DOCS}).status_code == 200
    clock.t = T0 + DAY
    assert srv.call("POST", "/v1/collections/c/docs:bulk",
                    {"docs": [{**d, "body": d["body"] + ", edited"} for d in DOCS]}).status_code == 200
    assert srv.times("core") == (iso(T0 + DAY), iso(T0 + DAY))
