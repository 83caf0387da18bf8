"""VIBE_TOUCH_FOLLOW_UP over a real socket: a query's first streamed read touches once more when
its first touch's vectors have landed (services/planner/flow.py `backfill`), and says so with `warming`."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from harness.server import served

VOCAB = ["wing", "flutter", "shock", "supersonic", "boundary", "layer", "heat", "transfer", "wave", "body", "nose",
         "cone", "flow", "jet", "plate", "drag"]
# A shallow touch whose every repeat with a changed page digs (TouchPolicy fields, set in code by
# harness/tuned.py): what a follow-up does shows at once.
SHALLOW = {"min_depth": 2, "depth_factor": 0.2, "dig_step": 4, "stable_zone": 1.0, "unstable_least": 1, "reach_best": 0}


def _read_twice(tmp_path: Path, follow: bool) -> tuple[list[list[str]], list[int]]:
    """The events of two streamed reads of one query, and the documents ready after each."""
    rnd = random.Random(0)
    docs: list[dict[str, Any]] = [{"_id": f"a{i}", "body": " ".join(rnd.choices(VOCAB, k=rnd.randint(3, 12)))}
                                  for i in range(40)]
    docs += [{"_id": f"s{i}", "body": "wing flutter shock secret", "_acl": ["user:admin"]} for i in range(10)]
    with served(tmp_path / ("on" if follow else "off"), env={"VIBE_TOUCH_FOLLOW_UP": "1" if follow else "0"},
                touch=SHALLOW) as app:
        assert app.bulk("k-admin-a", "fu", docs).status_code == 200
        names, ready = [], []
        for _ in range(2):
            events = app.stream("k-alice", collection="fu", q="wing flutter shock", semantic={"strategy": "hybrid"},
                                limit=3)
            names.append([e for e, _ in events])
            assert events[-1][1]["diagnostics"]["semantic"]["pending"] == 0
            assert not any(r["id"].startswith("s") for _, data in events for r in data.get("results", []))
            ready.append(int(app.call("GET", "/semantic/coverage?collection=fu", "k-admin-a").json()["ready"]))
        secret = {app.status("k-admin-a", "fu", f"s{i}") for i in range(10)}
        assert secret <= {"none", None}, secret  # nothing alice may not read was embedded
    return names, ready


@pytest.mark.parametrize("follow", [False, True])
def test_a_first_streamed_read_follows_up_once(tmp_path: Path, follow: bool) -> None:
    """Without it the second read (a repeat whose page changed) digs; with it the first read does
    that dig itself, announced by a `warming` of its own, and the second has nothing to do."""
    (first, second), ready = _read_twice(tmp_path, follow)
    assert first[0] == "lexical" and first[-1] == "done" and second[-1] == "done"
    assert ready == ([5, 5] if follow else [3, 5]), ready
    assert "warming" in first
    assert ("warming" in second) is not follow, second
