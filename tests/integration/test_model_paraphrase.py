"""With the real all-MiniLM-L6-v2: a paraphrase that shares no word with its document is
found semantically once an earlier query touched (and so embedded) that document, while
`keyword` cannot find it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import Served, ids, served
from tests.support.paraphrase import PARAPHRASE_DOCS, QUESTION

pytestmark = pytest.mark.model

DOCS = PARAPHRASE_DOCS


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("model")) / "data", env={"VIBE_EMBEDDER": "local"}) as s:
        yield s


def test_paraphrase_found_after_warming(model_server: Served) -> None:
    s = model_server
    assert s.bulk("k-admin-a", "kb", DOCS).json()["accepted"] == 4
    kw = s.read("k-admin-a", collection="kb", q=QUESTION, semantic={"strategy": "keyword"}).json()
    assert "tyre" not in ids(kw["results"])
    # an earlier, lexical query touches the repair note, which gets embedded in the background
    events = s.stream("k-admin-a", collection="kb", q="bike tyre patch", semantic={"strategy": "hybrid"})
    assert [e for e, _ in events][0] == "lexical" and events[-1][0] == "done"
    assert s.wait_status("k-admin-a", "kb", "tyre", "ready", timeout=60) == "ready"
    sem = s.read("k-admin-a", collection="kb", q=QUESTION, semantic={"strategy": "semantic"}).json()
    assert ids(sem["results"])[0] == "tyre", sem
    hybrid = s.read("k-admin-a", collection="kb", q=QUESTION, semantic={"strategy": "hybrid"}).json()
    top = {r["id"]: r for r in hybrid["results"][:2]}
    assert "tyre" in top and top["tyre"]["matchedBy"] == ["semantic"], hybrid["results"]
    assert hybrid["diagnostics"]["model"] == "local:all-MiniLM-L6-v2"
