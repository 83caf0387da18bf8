"""Model rollback: a space retired at activation keeps its vectors in
the cold store, and an operator re-activates it. Served by uvicorn on a real socket in this
process (the app is built with an injected clock, `build(settings, clock=)`), over SQLite and
PostgreSQL, with an OpenAI-protocol server that records every text it embeds.

The tenant starts on the hash model (`core`), migrates to `openai:test-embed` (`v2`), activates
it, rolls back to `core` and then forward to `v2` again: every step after the first migration
restores vectors from the cold store, so the provider sees no document text except the one
edited in between. A document deleted or an ACL revoked while its space was retired never
resurfaces; pruning removes cold files no document uses and, after the retention, the retired
space's files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.openapi_responses import OpenApiResponses
from services.wiring import Container, build
from shared.adapters.cold_packed import PackedColdStore
from shared.config import ApiKey, Settings
from shared.model import DocKey, SpaceInfo
from tests.integration.distributed.conftest import wait_for
from tests.support.in_process import ManualClock, UvicornThread

T0 = 983_746_800.0  # 2001-03-04 23:00 UTC: a stamp taken from the wall clock would show
DAY = 86400.0
MARK = "gust loads and the certification of composite structures"  # in every document, in no query
BODY = f" on wing flutter, {MARK} in transonic flight"
DOCS = [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"case {i}" + BODY} for i in range(8)]
SECRET = {"_id": "secret", "title": "Flutter secret", "body": "secret" + BODY, "_acl": ["user:bob", "user:admin"]}
ALL = [*DOCS, SECRET]
KEYS = [ApiKey(key="k-admin", tenant="ta", principals=["user:admin"], scopes=["read", "write", "admin"]),
        ApiKey(key="k-bob", tenant="ta", principals=["user:bob"], scopes=["read"])]


class InProcess:
    def __init__(self, settings: Settings, clock: ManualClock, scheduler_thread: bool = True):
        self.container: Container = build(settings, clock=clock)
        self.container.scheduler_thread = scheduler_thread  # False: the test runs every step itself
        self.served = UvicornThread(self.container, KEYS)
        base = self.served.base
        # every answer is checked against /openapi.json (the contract extension is declared)
        self.http = httpx.Client(base_url=base, timeout=60,
                                 event_hooks={"response": [OpenApiResponses(base).check]})

    def call(self, method: str, path: str, body: Any = None, key: str = "k-admin") -> httpx.Response:
        return self.http.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})

    def read(self, q: str, strategy: str, key: str = "k-admin") -> dict[str, Any]:
        r = self.http.post("/v1/read", json={"collection": "c", "q": q, "semantic": {"strategy": strategy},
                                             "limit": 20},
                           headers={"Authorization": f"Bearer {key}", "Accept": "application/json"})
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def metric(self, series: str) -> float:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def spaces(self) -> dict[str, dict[str, Any]]:
        return {s["space"]: s for s in self.call("GET", "/semantic/spaces").json()["spaces"]}

    def settled(self, space: str, ready: int) -> bool:
        s = self.spaces()[space]
        task = s.get("migration") or {}
        return s["coverage"]["ready"] == ready and not s["coverage"]["states"].get("queued", 0) \
            and task.get("state", "done") == "done"

    def close(self) -> None:
        self.http.close()
        self.served.stop()


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


def _doc_texts(api: OpenAIProtocolServer, since: int) -> list[str]:
    return [t for t in api.texts[since:] if MARK in t]


def _cold(srv: InProcess, space: str) -> set[str]:
    """The content hashes the cold store holds for tenant `ta`'s `space`."""
    cold = srv.container.handler.cold
    assert isinstance(cold, PackedColdStore)
    return cold.held("ta", space)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_retired_space_comes_back_from_the_cold_store(
        store: str, api: OpenAIProtocolServer, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    clock = ManualClock(T0)
    extra: dict[str, Any] = {"store": store}
    if store == "postgres":
        extra["postgres_url"] = request.getfixturevalue("postgres_url")
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=48, openai_base_url=api.base_url,
                        api_keys=KEYS, scheduler_interval_seconds=3600.0,  # ticks are the test's own
                        backfill_interval_seconds=0.2, per_tenant_per_min=100_000, **extra)
    srv = InProcess(settings, clock)
    try:
        # -- on the hash model (core): every document embedded ------------------------------
        assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": ALL}).status_code == 200
        srv.read("flutter report", "keyword")  # touches them all
        wait_for(lambda: srv.settled("core", len(ALL)), 30, "core to embed every document")

        # -- migrate to the provider's model (v2) and activate it ---------------------------
        r = srv.call("POST", "/semantic/spaces", {"space": "v2", "model": "openai:test-embed"})
        assert r.status_code == 202, r.text
        wait_for(lambda: srv.settled("v2", len(ALL)), 30, "the migration to v2")
        assert len(_doc_texts(api, 0)) >= len(ALL)  # the migration embedded every document once
        out = srv.call("POST", "/semantic/spaces/v2/activate")
        assert out.status_code == 200, out.text
        body = out.json()
        assert body["retired"] == "core" and body["reactivated"] is False and body["droppedSidecars"] == 0
        # the cut-over is immediate; the retired space's vectors move to the cold store afterwards
        assert body["retiredToCold"] + body["retiredToMove"] == len(ALL)
        wait_for(lambda: srv.spaces()["core"]["retiring"] == {"toMove": 0, "moved": len(ALL), "state": "done"},
                 30, "core's vectors to move to the cold store in the background")
        listed = srv.spaces()
        assert listed["core"]["state"] == "retired" and listed["core"]["cold"]["vectors"] == len(ALL)
        assert listed["core"]["cold"]["bytes"] > 0 and listed["core"]["retiredAt"] == "2001-03-04T23:00:00Z"
        assert listed["core"]["retentionUntil"] == "2001-03-11T23:00:00Z"  # 7 days by default
        assert len(_cold(srv, "core")) == len(ALL)
        bob = srv.read("flutter secret", "semantic", key="k-bob")
        assert "secret" in {h["id"] for h in bob["results"]}  # bob may read it, for now

        # -- roll back to core: its vectors come back from the cold store ---------------------
        clock.t += 3600
        out = srv.call("POST", "/semantic/spaces/core/activate")
        assert out.status_code == 200, out.text
        body = out.json()
        assert body["reactivated"] is True and body["retired"] == "v2"
        assert body["retiredToCold"] + body["retiredToMove"] == len(ALL)
        assert body["rehydration"]["fromCold"] == len(ALL) and body["rehydration"]["toEmbed"] == 0
        assert body["rehydration"]["task"]["kind"] == "rehydrate"
        wait_for(lambda: srv.settled("core", len(ALL)), 30, "core to rehydrate")
        res = srv.read("flutter report", "hybrid")
        assert res["diagnostics"]["space"] == "core" and res["diagnostics"]["model"] == "hash:v1@48"
        assert any("semantic" in h["matchedBy"] for h in res["results"])
        wait_for(lambda: srv.spaces()["v2"]["retiring"]["state"] == "done", 30, "v2's vectors to move")
        assert srv.spaces()["v2"]["cold"]["vectors"] == len(ALL)

        # -- while v2 is retired: an edit, a delete, a revocation -----------------------------
        edited = {"_id": "d1", "title": "Flutter report 1", "body": "rewritten: aileron buzz and" + BODY}
        assert srv.call("PUT", "/v1/collections/c/docs/d1", edited).status_code == 200
        gone = srv.container.store.get_doc(DocKey("ta", "c", "d2"))
        assert gone is not None
        gone_file = gone.content_hash
        assert gone_file in _cold(srv, "v2")
        assert srv.call("DELETE", "/v1/collections/c/docs/d2").status_code == 200
        revoked = {k: v for k, v in SECRET.items() if k != "_id"}
        assert srv.call("PUT", "/v1/collections/c/docs/secret", {**revoked, "_acl": ["user:admin"]}).status_code == 200
        # a document written meanwhile, never touched: c is lazy, so the rollback leaves it lazy too
        note = {"_id": "n1", "title": "Harbour notes", "body": "a new note about harbour cranes"}
        assert srv.call("PUT", "/v1/collections/c/docs/n1", note).status_code == 201

        # -- forward to v2 again: no provider call for unchanged content ---------------------
        clock.t += 3600
        before = len(api.texts)
        out = srv.call("POST", "/semantic/spaces/v2/activate")
        assert out.status_code == 200, out.text
        rehydration = out.json()["rehydration"]
        assert rehydration["fromCold"] == len(ALL) - 2 and rehydration["toEmbed"] == 1  # d1 edited, d2 gone
        wait_for(lambda: srv.settled("v2", len(ALL) - 1), 30, "v2 to rehydrate and embed the edited document")
        sent = _doc_texts(api, before)
        assert len(sent) == 1 and "aileron buzz" in sent[0]  # only the edited document went to the provider
        lazy = srv.container.store.sidecar(DocKey("ta", "c", "n1"), "v2")
        assert lazy is not None and lazy.status.value == "none"  # embedded on its first touch
        res = srv.read("flutter report", "hybrid")
        assert res["diagnostics"]["space"] == "v2" and res["diagnostics"]["model"] == "openai:test-embed"
        found = {h["id"] for h in res["results"] if "semantic" in h["matchedBy"]}
        assert found >= {"d0", "d3", "secret"} and "d2" not in {h["id"] for h in res["results"]}
        assert "d1" in {h["id"] for h in srv.read("aileron buzz", "semantic")["results"]}
        for strategy in ("semantic", "hybrid"):  # never through the rehydrated vector's old ACL
            assert "secret" not in {h["id"] for h in srv.read("flutter secret", strategy, key="k-bob")["results"]}
            assert "d2" not in {h["id"] for h in srv.read("case 2 flutter report", strategy)["results"]}
        assert len(_doc_texts(api, before)) == 1

        # -- pruning: cold files no document uses go, a retired space's files stay ------------
        core_files = _cold(srv, "core")
        assert srv.container.lifecycle.tick().pruned_cold >= 1
        assert gone_file not in _cold(srv, "v2")  # the deleted document's vector
        kept = _cold(srv, "core")
        assert kept and kept <= core_files and len(kept) == srv.spaces()["core"]["cold"]["vectors"]
        assert len(kept) >= len(ALL) - 2  # every document of core that still has its content

        # -- retention: the retired space's files go after VIBE_RETIRED_SPACE_RETENTION_SECONDS -
        until = srv.spaces()["core"]["retentionUntil"]
        assert until == "2001-03-12T01:00:00Z"  # retired at the second switch
        clock.t = T0 + 2 * 3600 + 7 * DAY - 60
        assert srv.container.lifecycle.tick().retired_expired == []
        assert _cold(srv, "core") == kept
        clock.t = T0 + 2 * 3600 + 7 * DAY + 1
        pruned = srv.metric('vibe_vectors_pruned_total{store="retired"}')
        assert srv.container.lifecycle.tick().retired_expired == ["ta/core"]
        assert srv.metric('vibe_vectors_pruned_total{store="retired"}') - pruned == len(kept)
        assert _cold(srv, "core") == set()
        assert set(srv.spaces()) == {"v2"}
        res = srv.read("flutter report", "semantic")
        assert res["diagnostics"]["space"] == "v2" and {h["id"] for h in res["results"]} >= {"d0", "d3"}
        assert srv.call("POST", "/semantic/spaces/core/activate").status_code == 404  # gone, not resurrected
    finally:
        srv.close()


def test_a_re_activation_is_refused_on_a_dimension_mismatch_or_during_a_migration(
        api: OpenAIProtocolServer, tmp_path: Path) -> None:
    clock = ManualClock(T0)
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=48, openai_base_url=api.base_url,
                        api_keys=KEYS, scheduler_interval_seconds=3600.0, backfill_interval_seconds=0.2,
                        per_tenant_per_min=100_000)
    srv = InProcess(settings, clock)
    try:
        assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": DOCS}).status_code == 200
        assert srv.call("POST", "/semantic/spaces", {"space": "small", "model": "hash:v1@16"}).status_code == 202
        wait_for(lambda: srv.settled("small", len(DOCS)), 30, "the migration to small")
        assert srv.call("POST", "/semantic/spaces/small/activate").status_code == 200
        assert srv.call("POST", "/semantic/spaces", {"space": "v3", "model": "hash:v1@24"}).status_code == 202
        r = srv.call("POST", "/semantic/spaces/core/activate")  # a migration is in progress
        assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
        # a retired space whose recorded dimension is not what its model gives: refused, never compared
        core = srv.container.store.tenant_spaces("ta")[0]
        assert core.space == "core" and core.state == "retired"
        srv.container.store.put_tenant_space(SpaceInfo("ta", "core", core.model_id, 16, "retired", core.created_at,
                                                       core.activated_at, core.retired_at))
        assert srv.call("POST", "/semantic/spaces/v3/activate", {"force": True}).status_code == 200
        r = srv.call("POST", "/semantic/spaces/core/activate")
        assert r.status_code == 409 and r.json()["error"]["code"] == "dimension_mismatch", r.text
        listed = srv.spaces()
        assert (listed["v3"]["state"], listed["core"]["state"], listed["small"]["state"]) == \
            ("active", "retired", "retired")
        r = srv.call("POST", "/semantic/spaces/small/activate")  # the other retired space comes back
        assert r.status_code == 200 and r.json()["reactivated"] is True and r.json()["retired"] == "v3"
    finally:
        srv.close()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_space_claimed_for_expiry_is_not_re_activated(store: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """A retired space past its retention that the expiry has claimed (`expiring`) answers 409
    `conflict` to its activation, and nothing changes: the listing is the same before and after
    and reads answer from the active space. Through HTTP alone `expiring` is never seen (a tick
    claims and removes the space at once), so the test makes the claim in the store and stops
    there, as a scheduler that crashed between the claim and the removal leaves it."""
    clock = ManualClock(T0)
    extra: dict[str, Any] = {"store": store}
    if store == "postgres":
        extra["postgres_url"] = request.getfixturevalue("postgres_url")
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=48, api_keys=KEYS,
                        scheduler_enabled=False,  # ticks are the test's own
                        per_tenant_per_min=100_000, **extra)
    srv = InProcess(settings, clock)
    try:
        assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": DOCS}).status_code == 200
        srv.read("flutter report", "keyword")  # touches them all
        wait_for(lambda: srv.settled("core", len(DOCS)), 30, "core to embed every document")
        assert srv.call("POST", "/semantic/spaces", {"space": "v2", "model": "hash:v1@32"}).status_code == 202
        wait_for(lambda: srv.settled("v2", len(DOCS)), 30, "the migration to v2")
        assert srv.call("POST", "/semantic/spaces/v2/activate").status_code == 200

        clock.t += settings.retired_space_retention_seconds + 1
        assert srv.container.store.claim_expiry("ta", "core", clock.t - settings.retired_space_retention_seconds)
        before = srv.spaces()
        assert before["core"]["state"] == "retired" and before["core"]["expiring"] is True
        assert before["v2"]["state"] == "active"

        r = srv.call("POST", "/semantic/spaces/core/activate")
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "conflict"
        # the route's own refusal, naming the reason (not the store's generic "look again")
        assert "past its retention and being removed" in error["message"], error
        assert srv.spaces() == before
        res = srv.read("flutter report", "semantic")
        assert res["diagnostics"]["space"] == "v2" and res["diagnostics"]["model"] == "hash:v1@32"
        assert {h["id"] for h in res["results"]} >= {"d0", "d3"}

        # the removal the claim started resumes at the next tick; the space is gone, not resurrected
        assert srv.container.lifecycle.tick().retired_expired == ["ta/core"]
        assert set(srv.spaces()) == {"v2"}
        assert srv.call("POST", "/semantic/spaces/core/activate").status_code == 404
    finally:
        srv.close()


class RefusingProvider(OpenAIProtocolServer):
    """Answers 500 to a batch with a text containing `refuse` (queries pass)."""

    refuse: str | None = None

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.refuse and any(self.refuse in t for t in texts):
            return 500, {"error": {"message": "refused by the test"}}, {}
        return super()._answer(body)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_activation_answers_at_once_and_the_old_space_moves_to_the_cold_store_in_batches(
        store: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with RefusingProvider(dim=32) as api:
        _activation_and_background_move(store, api, tmp_path, request)


def _activation_and_background_move(store: str, api: RefusingProvider, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    """The cut-over is immediate (nothing moved in the request); GET /semantic/spaces and the
    metrics show the background move batch by batch (here the test drives the backfill
    cadence's step, `run_backfills`, which the scheduler thread runs when woken); reads answer
    from the new active space throughout and never from a vector of the retired one."""
    clock = ManualClock(T0)
    extra: dict[str, Any] = {"store": store}
    if store == "postgres":
        extra["postgres_url"] = request.getfixturevalue("postgres_url")
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=48, openai_base_url=api.base_url,
                        api_keys=KEYS, scheduler_enabled=False, evict_batch=3, per_tenant_per_min=100_000,
                        job_backoff_seconds=0.1, job_backoff_max_seconds=0.5, job_max_attempts=1000, **extra)
    srv = InProcess(settings, clock, scheduler_thread=False)
    try:
        assert srv.call("POST", "/v1/collections/c/docs:bulk", {"docs": ALL}).status_code == 200
        srv.read("flutter report", "keyword")
        wait_for(lambda: srv.settled("core", len(ALL)), 30, "core to embed every document")
        assert srv.call("POST", "/semantic/spaces", {"space": "v2", "model": "openai:test-embed"}).status_code == 202
        wait_for(lambda: srv.settled("v2", len(ALL)), 30, "the migration to v2")
        # z: ready in core (the hash model), but the provider refuses it for v2 for now
        api.refuse = "mooring masts"
        z = {"_id": "z", "title": "Zeppelin hangar", "body": "zeppelin mooring masts and hangar doors"}
        assert srv.call("PUT", "/v1/collections/c/docs/z", z).status_code == 201
        srv.read("zeppelin hangar", "keyword")  # touches z in core
        wait_for(lambda: srv.spaces()["core"]["coverage"]["ready"] == len(ALL) + 1, 30, "z to embed in core")

        out = srv.call("POST", "/semantic/spaces/v2/activate", {"force": True})
        assert out.status_code == 200, out.text
        body = out.json()
        assert (body["retired"], body["retiredToCold"], body["retiredToMove"]) == ("core", 0, len(ALL) + 1)
        assert srv.spaces()["core"]["retiring"] == {"toMove": len(ALL) + 1, "moved": 0, "state": "moving"}
        moved = srv.metric("vibe_retired_vectors_moved_total")

        def semantic_hits(q: str) -> set[str]:
            res = srv.read(q, "semantic")
            assert res["diagnostics"]["space"] == "v2" and res["diagnostics"]["model"] == "openai:test-embed"
            return {h["id"] for h in res["results"] if "semantic" in h["matchedBy"]}

        left = len(ALL) + 1
        while left:
            # z's only vector is in the retired space (still there until its batch): never a hit
            assert "z" not in semantic_hits("zeppelin hangar") and semantic_hits("flutter report") >= {"d0", "d3"}
            srv.container.lifecycle.run_backfills()  # one batch
            left = max(0, left - 3)
            assert srv.spaces()["core"]["retiring"] == {"toMove": left, "moved": len(ALL) + 1 - left,
                                                        "state": "moving" if left else "done"}
        assert srv.metric("vibe_retired_vectors_moved_total") - moved == len(ALL) + 1
        assert srv.metric("vibe_retired_vectors_remaining") == 0
        assert srv.spaces()["core"]["cold"]["vectors"] == len(ALL) + 1
        assert "z" not in semantic_hits("zeppelin hangar")

        api.refuse = None  # the provider answers again: z reaches v2 and only then is found
        assert srv.call("POST", "/semantic/reindex", {"space": "v2"}).status_code == 202
        wait_for(lambda: srv.spaces()["v2"]["coverage"]["ready"] == len(ALL) + 1, 30, "z to embed in v2")
        assert "z" in semantic_hits("zeppelin hangar")
    finally:
        srv.close()
