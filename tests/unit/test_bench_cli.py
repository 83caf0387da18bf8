"""The benchmarks' entry point: `python -m bench` runs bench/cli.py's commands, and the product's
`vibe-semantic` command line neither offers nor imports them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("quality", "rerank", "lazy", "peers", "latency", "scale", "lexical-legs", "throughput",
            "noisy-tenant", "perf-report", "lifecycle")


def test_python_m_bench_lists_the_maintained_benchmarks() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "python -m bench" in proc.stdout
    for command in COMMANDS:
        assert command in proc.stdout


def test_the_product_cli_has_no_bench_group() -> None:
    from services.cli import app

    result = CliRunner().invoke(app, ["bench", "--help"])
    assert result.exit_code != 0


def test_the_product_cli_imports_nothing_from_bench() -> None:
    code = "import sys, services.cli; print(sorted(m for m in sys.modules if m == 'bench' or m.startswith('bench.')))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
