"""The benchmarks' results layout: a run writes timestamped raw files and overwrites `<name>.json`,
and the report reads each benchmark's `<name>.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import perf_report, report


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(perf_report, "RESULTS", tmp_path)
    return tmp_path


def test_a_run_writes_its_raw_files_and_overwrites_the_newest(results: Path) -> None:
    first = report.write({"name": "latency", "run": 1}, "# one\n")
    (results / first.name).rename(results / "latency-20000101-000000.json")
    second = report.write({"name": "latency", "run": 2}, "# two\n")
    assert perf_report.STAMPED.search(second.stem)
    assert second.with_suffix(".md").read_text() == "# two\n"
    assert json.loads((results / "latency.json").read_text())["run"] == 2
    path, doc = perf_report.newest("latency") or (None, None)
    assert path == results / "latency.json" and doc == {"name": "latency", "run": 2}


def test_the_report_falls_back_to_the_newest_timestamped_run(results: Path) -> None:
    for stamp, run in (("20261124-194420", 1), ("20261128-045305", 2)):
        (results / f"peers-cisi+98540-{stamp}.json").write_text(json.dumps({"run": run}))
    (results / "peers-cisi.json").write_text(json.dumps({"run": 0}))  # no distractors: not a peers-*+* result
    found = perf_report.newest("peers-*+*")
    assert found is not None and found[0].name == "peers-cisi+98540-20261128-045305.json"
    assert perf_report.newest("perf-scale") is None
