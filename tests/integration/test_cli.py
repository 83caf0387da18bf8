"""The CLI as a user runs it: `ingest` through the bulk API with a progress bar, `--help`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.server import REPO, Served


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_ingest_jsonl(server: Served, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    lines = [json.dumps({"_id": f"j{i}", "title": f"Doc {i}", "body": "ingested body text"}) for i in range(2500)]
    path.write_text("\n".join(lines) + "\n\n")
    out = cli("ingest", str(path), "--collection", "jsonl", "--url", server.base, "--key", "k-admin-a",
              "--batch", "1000")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary == {"accepted": 2500, "rejected": 0, "errors": []}
    cov = server.call("GET", "/semantic/coverage?collection=jsonl", "k-admin-a").json()
    assert cov["total"] == 2500


def test_ingest_reports_rejected_documents(server: Served, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"_id": "ok", "title": "fine"}) + "\n" + json.dumps({"title": "no id"}) + "\n")
    out = cli("ingest", str(path), "--collection", "jsonl2", "--url", server.base, "--key", "k-admin-a")
    assert out.returncode == 1
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["accepted"] == 1 and summary["rejected"] == 1


def test_help_lists_commands() -> None:
    out = cli("--help")
    assert out.returncode == 0 and "serve" in out.stdout and "ingest" in out.stdout
