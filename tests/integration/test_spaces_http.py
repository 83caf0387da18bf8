"""Changing the model without downtime: a rolling, budgeted re-embed
into a new space while reads keep answering, progress in GET /semantic/spaces, writes during
the migration reach the new space, activation cuts over and retires the old space, dimension
mismatches are refused, and a restart in the middle resumes the migration."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from tests.integration.distributed.conftest import wait_for

BODY = " about flutter margins, gust loads and the certification of composite wings in transonic flight"
DOCS = [{"_id": f"d{i:02d}", "title": f"Report {i}", "body": f"case {i}" + BODY} for i in range(30)]


def spaces(app: Served, key: str = "k-admin-a") -> dict[str, dict[str, Any]]:
    return {s["space"]: s for s in app.call("GET", "/semantic/spaces", key).json()["spaces"]}


def _env(api: OpenAIProtocolServer, **extra: str) -> dict[str, str]:
    return {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
            "VIBE_BACKFILL_INTERVAL_SECONDS": "0.2", "VIBE_PER_TENANT_PER_MIN": "100000", **extra}


@pytest.fixture
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


class Reader(threading.Thread):
    """Reads throughout the migration and records every answer's status."""

    def __init__(self, app: Served):
        super().__init__(daemon=True)
        self.app, self.codes, self.spaces_seen = app, [], set()  # type: ignore[var-annotated]
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            r = self.app.read("k-admin-a", collection="r", q="flutter report", semantic={"strategy": "hybrid"})
            self.codes.append(r.status_code)
            if r.status_code == 200:
                self.spaces_seen.add(r.json()["diagnostics"]["space"])


def test_a_model_change_rolls_out_without_downtime(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    with served(tmp_path / "data", env=_env(api)) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        app.read("k-admin-a", collection="r", q="case 1 report", semantic={"strategy": "keyword"}, limit=5)
        reader = Reader(app)
        reader.start()
        try:
            r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v2", "model": "openai:test-embed-v2"})
            assert r.status_code == 202, r.text
            assert r.json()["state"] == "building" and r.json()["dim"] == 32 and r.json()["task"]["kind"] == "migrate"
            listed = spaces(app)
            assert listed["core"]["state"] == "active" and listed["core@v2"]["state"] == "building"
            app.put("k-admin-a", "r", "late", {"title": "Written during the migration", "body": "late" + BODY})
            wait_for(lambda: spaces(app)["core@v2"]["coverage"]["ready"] == len(DOCS) + 1
                     and spaces(app)["core@v2"]["migration"]["state"] == "done", 60,
                     "every document (touched or not) to be embedded into core@v2")
            assert spaces(app)["core@v2"]["migration"]["state"] == "done"
            assert spaces(app, "k-admin-b") == {"core": spaces(app, "k-admin-b")["core"]}  # other tenants untouched
            out = app.call("POST", "/semantic/spaces/core@v2/activate", "k-admin-a")
            assert out.status_code == 200, out.text
            body = out.json()
            assert {k: body[k] for k in ("space", "state", "retired", "droppedSidecars")} == {
                "space": "core@v2", "state": "active", "retired": "core", "droppedSidecars": 0}
            # the retired space's vectors went to the cold store (model rollback), not away
            assert body["reactivated"] is False and body["retiredToCold"] + body["retiredToMove"] > 0
            time.sleep(0.5)
        finally:
            reader.stop.set()
            reader.join(30)
        assert reader.codes and set(reader.codes) == {200}  # reads answered throughout
        assert reader.spaces_seen == {"core", "core@v2"}
        wait_for(lambda: spaces(app)["core"]["retiring"]["state"] == "done", 30,
                 "the retired space's vectors to move to the cold store in the background")
        listed = spaces(app)
        assert listed["core"]["state"] == "retired" and listed["core@v2"]["state"] == "active"
        assert listed["core"]["retiring"]["moved"] == listed["core"]["cold"]["vectors"] > 0
        st = app.call("GET", "/semantic/status?collection=r&_id=late", "k-admin-a").json()
        assert st["space"] == "core@v2" and st["status"] == "ready"
        res = app.read("k-admin-a", collection="r", q="flutter", semantic={"strategy": "semantic"}).json()
        assert res["results"] and res["diagnostics"]["model"] == "openai:test-embed-v2"
        assert res["diagnostics"]["space"] == "core@v2"
        # tenant b still reads its own space
        assert app.read("k-admin-b", collection="r", q="x").json()["diagnostics"]["space"] == "core"


def test_dimension_mismatch_and_unfinished_activation_are_refused(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    with served(tmp_path / "data", env=_env(api)) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        r = app.call("POST", "/semantic/spaces", "k-admin-b", {"space": "small", "model": "hash:v1@16"})
        assert r.status_code == 202 and r.json()["dim"] == 16
        # a space holds one model: the tenant's own space of that name (names are per tenant)
        r = app.call("POST", "/semantic/spaces", "k-admin-b", {"space": "small", "model": "hash:v1@8"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "dimension_mismatch"
        assert spaces(app, "k-admin-b")["small"]["dim"] == 16  # refused: nothing changed
        assert "core" in spaces(app) and "small" not in spaces(app)
        api.hang(3.0)  # the provider is slow: the migration cannot finish at once
        try:
            assert app.call("POST", "/semantic/spaces", "k-admin-a",
                            {"space": "v3", "model": "openai:test-embed-v3"}).status_code == 202
            r = app.call("POST", "/semantic/spaces/v3/activate", "k-admin-a")
            assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
            # the migration's jobs are lag too (only the active space's were counted: a stalled
            # migration showed `queued: 0` beside its jobs in /semantic/queueDepth)
            lag = app.call("GET", "/semantic/lag", "k-admin-a").json()
            assert lag["bySpace"]["v3"]["queued"] > 0 and lag["queued"] >= lag["bySpace"]["v3"]["queued"], lag
            assert set(lag["bySpace"]) == {"core", "v3"}
            assert app.call("GET", "/semantic/queueDepth", "k-admin-a").json()["queuedInStore"] > 0
            assert spaces(app)["core"]["state"] == "active"
        finally:
            api.clear()
        r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "other", "model": "openai:test-embed-v4"})
        assert r.status_code == 409  # one migration at a time
        bad = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "../x", "model": "m"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_params"
        assert app.call("POST", "/semantic/spaces/nope/activate", "k-admin-a").status_code == 404
        assert app.call("POST", "/semantic/spaces", "k-bob", {"space": "z", "model": "m"}).status_code == 403


def test_a_restart_in_the_middle_of_a_migration_resumes_it(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    env = _env(api, VIBE_BACKFILL_STEP_DOCS="5", VIBE_BACKFILL_INTERVAL_SECONDS="30")
    with served(tmp_path / "data", env=env) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        task = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v2", "model": "openai:test-embed-v2"}
                        ).json()["task"]
        assert task["examined"] == 5 and task["state"] == "running"  # one step, then the server stops
    with served(tmp_path / "data", env=_env(api, VIBE_BACKFILL_STEP_DOCS="5")) as again:
        wait_for(lambda: spaces(again)["core@v2"]["coverage"]["ready"] == len(DOCS)
                 and spaces(again)["core@v2"]["migration"]["state"] == "done", 60,
                 "the migration to resume after the restart and finish")
        mig = spaces(again)["core@v2"]["migration"]
        assert mig["id"] == task["id"] and mig["state"] == "done" and mig["examined"] == len(DOCS)


def test_a_building_space_counts_every_document_from_the_start(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    """The new space's coverage is over the tenant's documents, not over the rows the migration has
    reached so far (it creates them step by step): `total` is the tenant's size at once, what
    has no row yet counts as `none`, and activation counts them as still to embed."""
    env = _env(api, VIBE_BACKFILL_STEP_DOCS="5", VIBE_BACKFILL_INTERVAL_SECONDS="3600")
    with served(tmp_path / "data", env=env) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v2", "model": "openai:test-embed-v2"})
        assert r.status_code == 202, r.text
        cov = spaces(app)["core@v2"]["coverage"]
        assert cov["total"] == len(DOCS), cov
        assert sum(cov["states"].values()) == len(DOCS)
        assert cov["states"]["none"] >= len(DOCS) - 10, cov  # at most two steps of 5 have run
        assert cov["indexedPct"] == round(100.0 * cov["ready"] / len(DOCS), 2)
        refused = app.call("POST", "/semantic/spaces/core@v2/activate", "k-admin-a", {})
        assert refused.status_code == 409
        assert refused.json()["error"]["details"]["waiting"] >= len(DOCS) - 10, refused.text


def _doc_semantic(app: Served, doc: str) -> dict[str, Any]:
    r = app.call("GET", f"/v1/collections/r/docs/{doc}?include=semantic", "k-admin-a")
    assert r.status_code == 200, r.text
    return r.json()["__semantic"]  # type: ignore[no-any-return]


def test_a_forced_activation_leaves_the_rest_to_first_touches(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    """Activated with `force` after one step of 5, the new space had no row for the 25 documents
    the migration never reached: coverage said 5 of 5 (100%) and no touch ever embedded them.
    Now the cut-over gives every document a row, and a read embeds what it touches."""
    env = _env(api, VIBE_BACKFILL_STEP_DOCS="5", VIBE_BACKFILL_INTERVAL_SECONDS="3600")
    with served(tmp_path / "data", env=env) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        assert app.call("POST", "/semantic/spaces", "k-admin-a",
                        {"space": "core@v2", "model": "openai:test-embed-v2"}).status_code == 202
        out = app.call("POST", "/semantic/spaces/core@v2/activate", "k-admin-a", {"force": True})
        assert out.status_code == 200, out.text
        cov = app.call("GET", "/semantic/coverage?collection=r", "k-admin-a").json()
        assert cov["total"] == sum(cov["states"].values()) == len(DOCS), cov  # a row for every document
        assert cov["states"]["none"] >= len(DOCS) // 2, cov  # the migration stopped early
        assert _doc_semantic(app, "d29")["status"] == "none"  # the last in key order: never reached
        r = app.read("k-admin-a", collection="r", q="case 29 report", semantic={"strategy": "hybrid"}, limit=3)
        assert r.status_code == 200, r.text
        wait_for(lambda: _doc_semantic(app, "d29")["status"] == "ready", 30,
                 "a document the migration never reached to be embedded into the new space on its first touch")
        assert _doc_semantic(app, "d29")["space"] == "core@v2"


def test_a_migration_of_what_is_ready_pays_only_for_that(api: OpenAIProtocolServer, tmp_path: Path) -> None:
    """`scope: ready`: a lazy tenant's model change re-embeds what its reads made ready (and eager
    collections), not its whole corpus; what was never embedded waits for its first touch in the
    new space, and activation does not wait for it."""
    with served(tmp_path / "data", env=_env(api)) as app:
        assert app.bulk("k-admin-a", "r", DOCS).status_code == 200
        app.read("k-admin-a", collection="r", q="case 3 report", semantic={"strategy": "hybrid"}, limit=3)

        def held() -> int:
            return int(app.call("GET", "/semantic/coverage?collection=r", "k-admin-a").json()["states"]["ready"])

        wait_for(lambda: held() > 0, 30, "a read to embed what it touched")
        time.sleep(0.5)
        ready_before = held()
        assert 0 < ready_before < len(DOCS)
        bad = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v2", "model": "m", "scope": "some"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_params"
        assert "core@v2" not in spaces(app)  # refused: nothing changed
        inputs = api.inputs
        r = app.call("POST", "/semantic/spaces", "k-admin-a",
                     {"space": "core@v2", "model": "openai:test-embed-v2", "scope": "ready"})
        assert r.status_code == 202, r.text
        assert r.json()["scope"] == "ready"
        app.put("k-admin-a", "r", "late", {"title": "Written during the migration", "body": "late" + BODY})
        wait_for(lambda: spaces(app)["core@v2"]["toEmbed"] == 0
                 and spaces(app)["core@v2"]["migration"]["state"] == "done", 60, "the scoped migration to finish")
        v2 = spaces(app)["core@v2"]
        assert v2["scope"] == "ready" and v2["coverage"]["ready"] == ready_before, v2
        assert v2["coverage"]["total"] == len(DOCS) + 1
        # the provider saw what was ready, and one probe of the new model's dimension at the start
        assert api.inputs - inputs == ready_before + 1
        out = app.call("POST", "/semantic/spaces/core@v2/activate", "k-admin-a", {})
        assert out.status_code == 200, out.text  # nothing in its scope waits
        assert "scope" not in spaces(app)["core@v2"]
        usage = app.call("GET", "/semantic/usage", "k-admin-a").json()
        assert usage["model"] == "openai:test-embed-v2"  # the tenant's model now, not the configured one
        assert app.call("GET", "/semantic/usage", "k-admin-b").json()["model"] == "openai:test-embed"
        assert _doc_semantic(app, "d21")["status"] == "none"
        app.read("k-admin-a", collection="r", q="case 21 report", semantic={"strategy": "hybrid"}, limit=3)
        wait_for(lambda: _doc_semantic(app, "d21")["status"] == "ready", 30,
                 "a document outside the scope to be embedded into the new space on its first touch")
        assert _doc_semantic(app, "d21")["space"] == "core@v2"
