"""The "auto" follow-up switch over a real socket (services/api/routes_touch.py): streamed first
reads teach a collection's state, GET /semantic/touch shows it to the tenant's admins only, and
it lives in the store, so a restarted process and (tests/integration/distributed/
test_follow_up_postgres.py) another replica take it up."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harness.server import Served, served

VOCAB = ["wing", "flutter", "shock", "supersonic", "boundary", "layer", "heat", "transfer", "wave", "body", "nose",
         "cone", "flow", "jet", "plate", "drag"]
# each first read written at once, and a state after 3 of them (a TouchPolicy field, set in code
# by harness/tuned.py)
ENV = {"VIBE_TOUCH_FOLLOW_UP": "auto", "VIBE_TOUCH_AUTO_FLUSH_EVERY": "1"}
TOUCH = {"auto_after": 3}
QUERIES = ["wing flutter", "shock wave", "boundary layer", "heat transfer", "nose cone"]


def docs(seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"_id": f"d{i}", "body": " ".join(rnd.choices(VOCAB, k=rnd.randint(3, 12)))} for i in range(40)]


def first_reads(app: Served, key: str, collection: str, queries: list[str]) -> list[str | None]:
    """Streamed hybrid first reads, each to its end (its touch landed, its agreement counted): the
    follow-up state each one's touches were last planned with (diagnostics `followUp`)."""
    states = []
    for q in queries:
        events = app.stream(key, collection=collection, q=q, semantic={"strategy": "hybrid"}, limit=5)
        assert events[-1][0] == "done", events[-1]
        states.append(events[-1][1]["diagnostics"]["followUp"])
    return states


def view(app: Served, key: str, **params: Any) -> dict[str, Any]:
    r = app.call("GET", "/semantic/touch", key, params=params)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def metric(app: Served, name: str, label: str) -> float:
    for line in app.call("GET", "/metrics", None).text.splitlines():
        if line.startswith(f"{name}{{{label}}} "):
            return float(line.split()[-1])
    return 0.0


def test_first_reads_teach_a_state_the_tenants_admin_sees_and_a_restart_keeps(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with served(data, env=ENV, touch=TOUCH) as app:
        assert app.bulk("k-admin-a", "fu", docs(0)).status_code == 200
        assert app.bulk("k-admin-b", "other", docs(1)).status_code == 200
        empty = view(app, "k-admin-a")
        assert empty["collections"] == [] and empty["next"] is None
        assert (empty["followUp"], empty["after"], empty["below"], empty["flushEvery"]) == ("auto", 3, -0.05, 1)

        assert first_reads(app, "k-alice", "fu", QUERIES[:2]) == ["unknown", "unknown"]
        (row,) = view(app, "k-admin-a")["collections"]
        assert (row["collection"], row["state"], row["reads"]) == ("fu", "unknown", 2)
        third = first_reads(app, "k-alice", "fu", QUERIES[2:3])
        (row,) = view(app, "k-admin-a")["collections"]
        assert row["state"] in ("agree", "disagree") and row["reads"] == 3
        assert third == [row["state"]]  # its own observation decided its follow-up
        assert isinstance(row["mean"], float) and row["updatedAt"].endswith("Z")
        learned = row["state"]
        assert metric(app, "vibe_touch_follow_up_changes_total", f'to="{learned}"') == 1.0
        assert metric(app, "vibe_touch_follow_up_collections", f'state="{learned}"') == 1.0

        # another tenant's admin sees only its own collections; a key without `admin` is refused
        assert view(app, "k-admin-b")["collections"] == []
        first_reads(app, "k-admin-b", "other", QUERIES[:1])
        assert [(r["collection"], r["reads"]) for r in view(app, "k-admin-b")["collections"]] == [("other", 1)]
        assert [r["collection"] for r in view(app, "k-admin-a")["collections"]] == ["fu"]
        r = app.call("GET", "/semantic/touch", "k-alice")
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
        assert app.call("GET", "/semantic/touch", None).status_code == 401
        for bad in ({"limit": 0}, {"limit": 1001}, {"after": "../x"}):
            r = app.call("GET", "/semantic/touch", "k-admin-a", params=bad)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", (bad, r.text)

    with served(data, env=ENV, touch=TOUCH) as again:  # a restart takes the state up from the store
        (row,) = view(again, "k-admin-a")["collections"]
        assert (row["state"], row["reads"]) == (learned, 3)
        assert first_reads(again, "k-alice", "fu", QUERIES[3:4]) == [learned]  # planned with it
        (row,) = view(again, "k-admin-a")["collections"]
        assert (row["state"], row["reads"]) == (learned, 4)
        # it built on the stored row: no change of state to count (a process learning from zero
        # would still be "unknown" after one read)
        assert metric(again, "vibe_touch_follow_up_changes_total", f'to="{learned}"') == 0.0


def test_the_view_pages_by_collection_name(tmp_path: Path) -> None:
    with served(tmp_path / "data", env=ENV, touch=TOUCH) as app:
        for col in ("c3", "c1", "c2"):
            assert app.bulk("k-admin-a", col, docs(2)).status_code == 200
            first_reads(app, "k-alice", col, QUERIES[:1])
        page = view(app, "k-admin-a", limit=2)
        assert [r["collection"] for r in page["collections"]] == ["c1", "c2"] and page["next"] == "c2"
        page = view(app, "k-admin-a", limit=2, after=page["next"])
        assert [r["collection"] for r in page["collections"]] == ["c3"] and page["next"] is None
