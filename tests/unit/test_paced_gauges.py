"""The scheduler's coverage and size gauges read whole tables: a tick publishes them only once
`GAUGE_SHARE` of the real time since the last pass allows, so a large store does not spend a
tick's seconds on figures a dashboard samples anyway. The tick's decisions still run every time."""

from __future__ import annotations

from pathlib import Path

from services.core.lifecycle.scheduler import GAUGE_SHARE
from services.wiring import build
from shared.config import Settings


def test_a_slow_gauge_pass_is_next_run_after_its_share_of_time(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False))
    life = c.lifecycle
    now = [1000.0]
    life.monotonic = lambda: now[0]
    passes: list[float] = []
    counted = c.store.coverage_all

    def slow_coverage(space: str) -> dict[str, int]:
        passes.append(now[0])
        now[0] += 1.0  # this pass takes a second
        return counted(space)

    c.store.coverage_all = slow_coverage  # type: ignore[method-assign]
    try:
        for _ in range(3):
            life.tick()
            now[0] += 5.0
        assert passes == [1000.0]  # one pass, then 1 / GAUGE_SHARE seconds of rest
        assert life.tick().failed == []
        now[0] = 1000.0 + 1.0 / GAUGE_SHARE
        life.tick()
        assert len(passes) == 2
    finally:
        c.stop()
