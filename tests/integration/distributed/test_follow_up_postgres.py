"""Two API processes on one PostgreSQL (each with its own data dir and indexes): the "auto"
follow-up state one learns from its streamed first reads is the other's too (it reads the row
on its first ask and builds on it instead of learning from zero), and both admin views show the
reads of both."""

from __future__ import annotations

from pathlib import Path

from harness.server import served
from tests.integration.test_follow_up_switch_http import ENV, QUERIES, TOUCH, docs, first_reads, metric, view


def test_a_state_learned_through_one_replica_is_used_by_the_other(postgres_url: str, tmp_path: Path) -> None:
    pg = {**ENV, "VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
          "VIBE_COLD_DIR": str(tmp_path / "cold-volume"), "VIBE_TOUCH_AUTO_REFRESH_SECONDS": "0"}
    with (served(tmp_path / "a" / "data", env=pg, touch=TOUCH) as a,
          served(tmp_path / "b" / "data", env=pg, touch=TOUCH) as b):
        assert a.bulk("k-admin-a", "fu", docs(0)).status_code == 200
        first_reads(a, "k-alice", "fu", QUERIES[:3])  # A learns a state
        (row,) = view(b, "k-admin-a")["collections"]  # B's view: the store's row
        learned = row["state"]
        assert learned in ("agree", "disagree") and row["reads"] == 3
        assert metric(a, "vibe_touch_follow_up_changes_total", f'to="{learned}"') == 1.0
        assert metric(b, "vibe_touch_follow_up_collections", f'state="{learned}"') == 1.0

        # one first read through B: planned with A's state (from zero it would be "unknown")
        assert first_reads(b, "k-alice", "fu", QUERIES[3:4]) == [learned]
        # B decided and counted on A's state: one more read on the same row, no change of state (a
        # replica learning from zero would be "unknown" after one read, and would count a change later)
        for app in (a, b):
            (row,) = view(app, "k-admin-a")["collections"]
            assert (row["state"], row["reads"]) == (learned, 4)
        assert metric(b, "vibe_touch_follow_up_changes_total", f'to="{learned}"') == 0.0
        assert view(b, "k-admin-b")["collections"] == []  # still the key's tenant only
