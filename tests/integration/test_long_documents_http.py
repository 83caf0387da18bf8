"""A long document through the REST API: embedded as passages, found by a section near its end,
and the hit names that section (field, offsets, heading path) in the JSON answer and in the
stream's events; every answer is checked against /openapi.json by the served app's hook."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import Served, served

SECTIONS = [
    ("Overview", "this handbook describes the maintenance of the regional rail fleet and its depots"),
    ("Brake inspection", "brake pads discs calipers wear limits torque checks every service interval"),
    ("Door systems", "door actuators sensors interlocks obstruction detection and manual release"),
    ("Pantograph upkeep", "pantograph carbon strips contact force overhead catenary arcing inspection"),
    ("Wheel reprofiling", "wheelset lathe flange thickness tread hollow wear reprofiling tolerance"),
]


def handbook() -> str:
    return "\n\n".join(f"## {h}\n\n{(words + '. ') * 6}" for h, words in SECTIONS)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_PASSAGE_CHARS": "400"}
    with served(Path(tmp_path_factory.mktemp("longdocs")) / "data", env=env) as s:
        body = handbook()
        assert len(body) > 4 * 400  # several passages
        assert s.put("k-alice", "manuals", "fleet", {"title": "Fleet handbook", "body": body}).status_code == 201
        memo = {"title": "Canteen memo", "body": "the canteen lunch menu changes every week: soups, salads "
                "and a warm dish of the day for the depot staff"}
        assert s.put("k-alice", "manuals", "memo", memo).status_code == 201
        for q in ("wheelset", "canteen lunch menu"):  # the touches
            s.read("k-alice", collection="manuals", q=q, semantic={"strategy": "hybrid"})
        assert s.wait_status("k-alice", "manuals", "fleet", "ready") == "ready"
        assert s.wait_status("k-alice", "manuals", "memo", "ready") == "ready"
        yield s


def test_a_late_section_is_found_and_named_in_the_json_answer(app: Served) -> None:
    heading, words = SECTIONS[-1]
    r = app.read("k-alice", collection="manuals", q=words, semantic={"strategy": "semantic"}, limit=2)
    assert r.status_code == 200
    top = r.json()["results"][0]
    assert top["id"] == "fleet" and top["matchedBy"] == ["semantic"]
    where = top["passage"]
    assert where["field"] == "body" and where["headings"] == [heading]
    body = handbook()
    assert words.split()[0] in body[where["start"]:where["end"]]


def test_a_short_document_carries_no_passage_and_the_stream_names_it_too(app: Served) -> None:
    events = app.stream("k-alice", collection="manuals", q="pantograph carbon strips catenary",
                        semantic={"strategy": "hybrid"})
    done = dict(events)["done"]
    by_id = {r["id"]: r for r in done["results"]}
    assert by_id["fleet"]["passage"]["headings"] == ["Pantograph upkeep"]
    r = app.read("k-alice", collection="manuals", q="canteen lunch menu", semantic={"strategy": "semantic"}, limit=2)
    memo = r.json()["results"][0]
    assert memo["id"] == "memo" and memo["matchedBy"] == ["semantic"] and "passage" not in memo
