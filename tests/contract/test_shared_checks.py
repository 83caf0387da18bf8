"""The client-side contract checks in ../shared/checks, run against a served instance as an
outside client would. Skipped (with the reason) where that folder is not beside the repo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKS = REPO.parent / "shared" / "checks"


@pytest.mark.parametrize("name", ["contract", "tenant-stats"])
def test_shared_check(name: str) -> None:
    script = CHECKS / name
    if not script.exists():
        pytest.skip(f"{script} not present beside the repository")
    if not (REPO / ".venv" / "bin" / "vibe-semantic").exists():
        pytest.skip("the checks need .venv/bin/vibe-semantic: run `make setup`")
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
