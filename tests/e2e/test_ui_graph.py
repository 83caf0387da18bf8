"""The `/ui` page with a read's `graph`: in headless Chromium (driven by playwright-core from
Node), a hit lists its neighbours by edges to the depth picked (from the URL or the picker), a
neighbour the key may not read is never shown, and a neighbour's explain panel shows the edge
path with each predicate and direction."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import REPO, Served, served
from tests.e2e.test_ui_browser import ARTIFACTS, CHROMIUM, NODE, SDK, needs_node
from tests.e2e.test_ui_browser import node_modules as node_modules  # noqa: F401 - the shared fixture
from tests.sdk.conftest import ADMIN, BOB

DOCS = {
    "graphs": [{"_id": "g1", "title": "Aardvark burrows", "body": "aardvark burrows in the savanna"},
               {"_id": "g2", "title": "Termite mounds", "body": "termite mounds feed them"},
               {"_id": "gx", "title": "hidden draft", "body": "not for bob", "_acl": ["user:admin"]}],
    "notes": [{"_id": "g3", "title": "Field notes", "body": "seen at dusk"}],
}
EDGES = [{"_id": "x1", "from": "graphs/g1", "to": "graphs/g2", "predicate": "cites", "weight": 0.9},
         {"_id": "x2", "from": "notes/g3", "to": "graphs/g2", "predicate": "replyTo"},
         {"_id": "x3", "from": "graphs/g1", "to": "graphs/gx", "predicate": "cites"}]  # an end bob cannot read


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("ui-graph")) / "data") as s:
        for collection, docs in (*DOCS.items(), ("semantic.edges", EDGES)):
            assert s.bulk(ADMIN, collection, docs).json()["accepted"] == len(docs)
        yield s


@needs_node
def test_neighbours_and_their_edge_path_in_the_page(server: Served, node_modules: Path) -> None:  # noqa: F811
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does)")
    env = dict(os.environ, VIBE_BASE_URL=server.base, VIBE_READER_KEY=BOB, VIBE_CHROMIUM=CHROMIUM,
               VIBE_ARTIFACTS=str(ARTIFACTS), VIBE_SDK_DIR=str(SDK), NODE_OPTIONS="")
    r = subprocess.run([str(NODE), str(Path(__file__).with_name("ui_graph.mjs"))], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert r.stdout.count("ok - ") == 3
