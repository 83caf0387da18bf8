"""The CLI as a user runs it: `ingest` through the bulk API with a progress bar,
`reindex-follower`, `--help`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.server import REPO, Served


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def test_ingest_jsonl(server: Served, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    lines = [json.dumps({"_id": f"j{i}", "title": f"Doc {i}", "body": "ingested body text"}) for i in range(2500)]
    path.write_text("\n".join(lines) + "\n\n")
    out = cli("ingest", str(path), "--collection", "jsonl", "--url", server.base, "--key", "k-admin-a",
              "--batch", "1000")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary == {"accepted": 2500, "rejected": 0, "errors": []}
    bar = out.stdout + out.stderr
    assert "2500/2500" in bar and re.search(r"\b[\d,]+ docs/s", bar), bar
    assert not re.search(r"\d\.\d+ docs/s", bar), bar  # a rate, not a raw float
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


def test_reindex_follower_resets_only_shared_indexes_and_only_under_the_lease(tmp_path: Path) -> None:
    from services.wiring import follower_name
    from shared.adapters.sqlite_store import SqliteStore
    from shared.config import Settings

    env = {"VIBE_DATA_DIR": str(tmp_path), "VIBE_STORE": "sqlite", "VIBE_LEXICAL": "embedded"}
    out = cli("reindex-follower", "lexical", env=env)
    assert out.returncode == 2 and "embedded" in out.stderr
    qdrant = {"VIBE_VECTORS": "qdrant", "VIBE_QDRANT_URL": "http://127.0.0.1:9"}  # never reached: lease busy
    name = follower_name(Settings(vectors="qdrant", qdrant_url=qdrant["VIBE_QDRANT_URL"]), "vectors")
    assert name is not None
    store = SqliteStore(tmp_path / "vibe.sqlite3")
    store.advance_follower_position(name, 5)
    with store.follower_lease(name) as held:  # a replica is applying
        out = cli("reindex-follower", "vectors", "--wait", "0.3", env={**env, **qdrant})
    assert held and out.returncode == 1 and "another process kept the lease" in out.stderr
    assert store.follower_position(name) == 5
    out = cli("reindex-follower", "vectors", env={**env, **qdrant})  # an empty log: nothing to send
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"index": "vectors", "applied": 0, "seq": 0}
    assert store.follower_position(name) == 0
    store.close()
