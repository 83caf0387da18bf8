"""`vibe-semantic keys create|list|revoke` on the store of record, beside a running API process
on the same data dir; `serve` in the distributed profile without VIBE_TOKEN_SECRET."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.server import served
from tests.integration.test_cli import cli


def test_keys_cli_creates_lists_and_revokes_keys_a_running_server_honours(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"VIBE_DATA_DIR": str(data), "VIBE_PROFILE": "embedded"}
    with served(data) as s:
        out = cli("keys", "create", "--tenant", "ta", "--name", "cli bot", "-p", "user:alice", "-s", "read",
                  "-s", "write", env=env)
        assert out.returncode == 0, out.stderr
        made = json.loads(out.stdout.strip().splitlines()[-1])
        assert made["key"].startswith("vsk_") and made["scopes"] == ["read", "write"] and made["tenant"] == "ta"
        assert s.put(made["key"], "c", "d1", {"title": "from a CLI key"}).status_code == 201
        listed = [m for m in (s.call("GET", "/v1/keys", "k-admin-a").json()["keys"]) if m["id"] == made["id"]]
        assert listed and listed[0]["name"] == "cli bot"
        out = cli("keys", "list", "--tenant", "ta", env=env)
        assert out.returncode == 0 and made["id"] in out.stdout and made["key"] not in out.stdout
        assert made["id"] not in cli("keys", "list", "--tenant", "tb", env=env).stdout
        assert cli("keys", "revoke", made["id"], "--tenant", "tb", env=env).returncode == 1  # not that tenant's
        out = cli("keys", "revoke", made["id"], "--tenant", "ta", env=env)
        assert out.returncode == 0, out.stderr
        time.sleep(1.2)  # VIBE_KEY_REFRESH_SECONDS (0.5) bounds how long the server may still accept it
        r = s.call("GET", "/v1/collections/c/docs/d1", made["key"])
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert cli("keys", "create", "--tenant", "ta", "--name", "x", "-s", "root", env=env).returncode != 0


def test_distributed_serve_refuses_to_start_without_a_token_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VIBE_TOKEN_SECRET"}
    env.update({"VIBE_PROFILE": "distributed", "VIBE_DATA_DIR": str(tmp_path), "VIBE_EMBEDDER": "hash"})
    out = cli("serve", env=env)
    assert out.returncode == 2 and "VIBE_TOKEN_SECRET must be set" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
