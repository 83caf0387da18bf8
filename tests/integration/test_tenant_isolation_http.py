"""One tenant cannot hurt another through spaces and payload indexes, over real HTTP (uvicorn):
an absurd model is refused before anything is built, two tenants both have `core@v2` with their
own models, a tenant's space never keeps VIBE_SPACE from starting, and a document with 5,000
numeric fields costs other tenants nothing. Another tenant's requests are checked for what they
answer (and that they answer within the client's 60 s), never for how fast."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from qdrant_edge import EdgeShard

from harness.server import Served, ids, served
from shared.adapters.facets import num_field
from shared.names import MAX_DOC_FIELDS
from tests.integration.distributed.conftest import wait_for

ENV = {"VIBE_EMBED_DIM": "32", "VIBE_BACKFILL_INTERVAL_SECONDS": "0.2", "VIBE_PER_TENANT_PER_MIN": "100000"}
A_DOCS = [{"_id": f"a{i}", "title": f"Glacier note {i}", "body": f"ice core sample {i} from the glacier"}
          for i in range(6)]
B_DOCS = [{"_id": f"b{i}", "title": f"Harbour note {i}", "body": f"ship cargo manifest {i} in the harbour"}
          for i in range(6)]


def spaces(app: Served, key: str) -> dict[str, dict[str, Any]]:
    r = app.call("GET", "/semantic/spaces", key)
    assert r.status_code == 200, r.text
    return {s["space"]: s for s in r.json()["spaces"]}


def b_still_answers(app: Served, doc_id: str) -> None:
    """Tenant b writes and reads, and gets its own documents (the client gives up after 60 s)."""
    r = app.put("k-admin-b", "r", doc_id, {"title": "Harbour crane", "body": "crane lifts cargo"})
    assert r.status_code in (200, 201)
    r = app.read("k-admin-b", collection="r", q="harbour cargo", semantic={"strategy": "hybrid"}, limit=20)
    assert r.status_code == 200, r.text
    got = ids(r.json()["results"])
    assert got and {i[0] for i in got} == {"b"} and doc_id in got


def test_an_absurd_or_unlisted_model_is_refused_and_other_tenants_keep_answering(tmp_path: Path) -> None:
    with served(tmp_path / "data", env=ENV) as app:
        assert app.bulk("k-admin-b", "r", B_DOCS).status_code == 200
        assert app.bulk("k-admin-a", "r", A_DOCS).status_code == 200
        for model in ("hash:v1@50000000", "hash:v1@8193", "hash:v1@8x"):
            r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "huge", "model": model})
            assert r.status_code == 400, (model, r.text)
            assert r.json()["error"]["code"] == "invalid_params"
        r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "huge", "model": "hash:", "dim": 50000000})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params"
        answers = []
        for folder in (str(tmp_path / "data"), str(tmp_path / "no-such-folder")):  # one exists, one does not
            r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "mine", "model": f"local:{folder}"})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
            answers.append(re.sub(r"'[^']*'", "<name>", r.json()["error"]["message"]))
        assert answers[0] == answers[1]  # the answer tells nothing of the server's disk
        assert set(spaces(app, "k-admin-a")) == {"core"}  # refused: nothing changed
        r = app.read("k-admin-a", collection="r", q="glacier ice", semantic={"strategy": "hybrid"})
        assert r.status_code == 200 and {i[0] for i in ids(r.json()["results"])} == {"a"}
        b_still_answers(app, "b-late")


def test_two_tenants_both_migrate_to_core_v2_with_their_own_models(tmp_path: Path) -> None:
    with served(tmp_path / "data", env=ENV) as app:
        assert app.bulk("k-admin-a", "r", A_DOCS).status_code == 200
        assert app.bulk("k-admin-b", "r", B_DOCS).status_code == 200
        for key, model, dim in (("k-admin-a", "hash:v1@8", 8), ("k-admin-b", "hash:v1@16", 16)):
            r = app.call("POST", "/semantic/spaces", key, {"space": "core@v2", "model": model})
            assert r.status_code == 202, r.text
            assert r.json()["dim"] == dim
        for key, n in (("k-admin-a", len(A_DOCS)), ("k-admin-b", len(B_DOCS))):
            wait_for(lambda key=key, n=n: spaces(app, key)["core@v2"]["coverage"]["ready"] == n, 60,  # type: ignore[misc]
                     f"{key}'s documents embedded into its core@v2")
            r = app.call("POST", "/semantic/spaces/core@v2/activate", key)
            assert r.status_code == 200, r.text
        assert spaces(app, "k-admin-a")["core@v2"]["model"] == "hash:v1@8"
        assert spaces(app, "k-admin-b")["core@v2"]["model"] == "hash:v1@16"
        for key, q, own, model in (("k-admin-a", "glacier ice core sample", "a", "hash:v1@8"),
                                   ("k-admin-b", "ship cargo manifest", "b", "hash:v1@16")):
            r = app.read(key, collection="r", q=q, semantic={"strategy": "semantic"}, limit=20)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["diagnostics"]["space"] == "core@v2" and body["diagnostics"]["model"] == model
            got = ids(body["results"])
            assert len(got) == 6 and {i[0] for i in got} == {own}, got  # its own vectors, all of them
        # a write after the cut-over is embedded with the writer's model and found by it alone
        r = app.put("k-admin-b", "r", "b-new", {"title": "Harbour pilot", "body": "ship pilot boards"})
        assert r.status_code in (200, 201)
        r = app.read("k-admin-b", collection="r", q="harbour pilot", semantic={"strategy": "hybrid"})
        assert r.status_code == 200
        assert app.wait_status("k-admin-b", "r", "b-new", "ready") == "ready"  # touched by its read: embedded
        r = app.read("k-admin-b", collection="r", q="harbour pilot ship", semantic={"strategy": "semantic"}, limit=50)
        assert r.status_code == 200 and "b-new" in ids(r.json()["results"])
        r = app.read("k-admin-a", collection="r", q="harbour pilot ship", semantic={"strategy": "semantic"}, limit=50)
        assert r.status_code == 200 and "b-new" not in ids(r.json()["results"])


def test_a_tenants_space_never_keeps_the_configured_space_from_starting(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with served(data, env=ENV) as app:
        assert app.bulk("k-admin-a", "r", A_DOCS).status_code == 200
        r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v3", "model": "hash:v1@8"})
        assert r.status_code == 202, r.text
    # the operator moves every tenant to a space of that name, with another model
    with served(data, env={**ENV, "VIBE_SPACE": "core@v3"}) as app:
        assert app.bulk("k-admin-b", "r", B_DOCS).status_code == 200
        b_still_answers(app, "b-late")
        assert app.call("GET", "/readyz", None).status_code == 200


def test_a_document_with_the_most_numeric_fields_costs_other_tenants_nothing(tmp_path: Path) -> None:
    """Every numeric field name used to become a payload index of the vector index every tenant
    shares, built inside the follower's upsert (5,000 fields: another tenant's write and read
    hung past 60 s). A document may now carry `MAX_DOC_FIELDS` fields (shared/names.py) and
    only declared fields get an index."""
    env = {**ENV, "VIBE_FILTERABLE_FIELDS": '["year"]'}
    with served(tmp_path / "data", env=env) as app:
        assert app.bulk("k-admin-b", "r", B_DOCS).status_code == 200
        # the collection declares one field of its own, besides the operator's `year`
        r = app.call("PUT", "/v1/collections/w/settings", "k-admin-a", {"filterableFields": ["n7"]})
        assert r.status_code == 200, r.text
        wide: dict[str, Any] = {f"n{i}": i for i in range(MAX_DOC_FIELDS - 3)}
        wide.update({"title": "Glacier survey", "body": "ice core sample survey of the glacier", "year": 2020})
        assert app.put("k-admin-a", "w", "wide", wide).status_code in (200, 201)
        r = app.read("k-admin-a", collection="w", q="glacier survey", semantic={"strategy": "hybrid"})
        assert r.status_code == 200, r.text
        assert app.wait_status("k-admin-a", "w", "wide", "ready") == "ready"
        b_still_answers(app, "b-late")
        # filters hold on declared and undeclared fields alike, inside the vector search
        for flt, want in (({"n321": {"gte": 321, "lte": 321}}, ["wide"]), ({"n321": {"gt": 321}}, []),
                          ({"year": {"gte": 2020}}, ["wide"]), ({"year": {"lt": 2020}}, [])):
            r = app.read("k-admin-a", collection="w", q="glacier survey", semantic={"strategy": "semantic"},
                         filter=flt)
            assert r.status_code == 200, r.text
            assert ids(r.json()["results"]) == want, flt
        b_still_answers(app, "b-later")
    shard = tmp_path / "data" / "vectors" / "core"
    indexed = EdgeShard.load(str(shard)).info().payload_schema
    assert {k for k in indexed if k.startswith("num.")} == {f"num.{num_field(f)}" for f in ("year", "n7")}
