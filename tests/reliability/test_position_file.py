"""A kill -9 (or a power cut) while the embedded follower saves its position: `FilePosition.save`
(shared/indexing.py) is `path.write_text(str(seq))`, which truncates the file and then writes it,
with no temporary file and rename. A process killed between the two leaves DATA_DIR/index.seq
empty; the window is microseconds wide, so this test leaves the file as such a kill would,
instead of racing for it. Required: the server starts again and every document is found
(falling back to a replay of the log from 0 is safe: applying a change twice is idempotent).
Today the server exits at start-up (`ValueError: invalid literal for int() with base 10: ''`).

The same non-atomic write also shows without any crash: a reader of the file between the
truncate and the write sees it empty. bench/reliability.py (embedded, 60 s) got one 500 from
GET /semantic/lag that way (routes_admin._lag -> IndexFollower.seq -> FilePosition.load), so
the bounded load test (test_load.py) can fail on it too. Fix: write a temp file in the same
dir and os.replace() it (and treat an unreadable position as 0)."""

from __future__ import annotations

from pathlib import Path

from harness.server import Served, ids


def test_an_empty_position_file_left_by_a_kill_is_survived(tmp_path: Path) -> None:
    data = tmp_path / "data"
    app = Served(data, env={"VIBE_EMBED_DIM": "32"})
    docs = [{"_id": f"d{i}", "title": f"note {i}", "body": f"gusty crosswind landing {i}"} for i in range(20)]
    assert app.bulk("k-admin-a", "notes", docs).json()["accepted"] == 20
    app.stop()
    (data / "index.seq").write_text("")  # what a kill between truncate and write leaves

    again = Served(data, env={"VIBE_EMBED_DIM": "32"})
    try:
        r = again.read("k-admin-a", collection="notes", q="crosswind", semantic={"strategy": "keyword"}, limit=50)
        assert r.status_code == 200, r.text
        assert sorted(ids(r.json()["results"])) == sorted(d["_id"] for d in docs)
    finally:
        again.stop()
