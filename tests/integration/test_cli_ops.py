"""The CLI as an operator meets it: `--version`, one-line configuration errors (exit code 2, no
secret values), `serve --host/--port/--data-dir`, and `read` printing a served stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from harness.server import REPO, Served, end_process, free_port


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def test_version_is_the_installed_package_version() -> None:
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"vibe-semantic {version('vibe-semantic')}"


@pytest.mark.parametrize(("command", "env", "expected"), [
    ("serve", {"VIBE_PORT": "abc"}, "VIBE_PORT: Input should be a valid integer"),
    ("worker", {"VIBE_PROFILE": "cloud"}, "VIBE_PROFILE: Input should be 'embedded' or 'distributed' (got 'cloud')"),
    ("mcp", {"VIBE_LOCAL_MODELS": "[not json"}, "VIBE_LOCAL_MODELS: not valid JSON"),
    ("serve", {"SURR_INNER_VOICE_MIX": "lots"},
     "VIBE_INNER_VOICE_MIX or SURR_INNER_VOICE_MIX: Input should be a valid number, unable to parse string as a "
     "number (got 'lots')"),
])
def test_an_invalid_setting_is_one_line_and_exit_code_2(command: str, env: dict[str, str], expected: str) -> None:
    out = cli(command, env=env)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("configuration error: ") and expected in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_a_configuration_error_never_shows_a_secret_value() -> None:
    env = {"VIBE_API_KEYS": '[{"key": "s3cr3t-key-value"}]', "VIBE_TOKEN_SECRET": "short-s3cr3t",
           "VIBE_PORT": "abc"}
    out = cli("serve", env=env)
    assert out.returncode == 2
    line = out.stderr.strip()
    assert "VIBE_API_KEYS[0].tenant: Field required" in line and "VIBE_TOKEN_SECRET" in line and "'abc'" in line
    assert "s3cr3t" not in line and "\n" not in line
    broken_json = cli("serve", env={"VIBE_API_KEYS": '[{"key": "s3cr3t-key-value", '})
    assert broken_json.returncode == 2 and "VIBE_API_KEYS: not valid JSON" in broken_json.stderr
    assert "s3cr3t" not in broken_json.stderr


def test_serve_on_a_store_a_newer_release_migrated_stops_with_one_line(tmp_path: Path) -> None:
    import sqlite3

    from shared.adapters.schema import sqlite as sqlite_schema
    from shared.adapters.sqlite_store import SqliteStore

    data = tmp_path / "data"
    data.mkdir()
    SqliteStore(data / "vibe.sqlite3").close()
    conn = sqlite3.connect(data / "vibe.sqlite3")
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)", (sqlite_schema.LATEST + 1,))
    conn.commit()
    conn.close()
    out = cli("serve", "--data-dir", str(data), "--port", str(free_port()), env={"VIBE_EMBEDDER": "hash"})
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"store schema version {sqlite_schema.LATEST + 1} is newer than this build ({sqlite_schema.LATEST}); "
        "upgrade vibe-semantic")
    assert "Traceback" not in out.stderr


def test_dotenv_in_the_working_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("VIBE_PORT=from-dotenv\n")
    out = cli("serve", cwd=tmp_path, env={"PYTHONPATH": str(REPO)})
    assert out.returncode == 2 and "VIBE_PORT" in out.stderr and "from-dotenv" in out.stderr


def _wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve exited"
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not answer /healthz")


def test_serve_options_win_over_settings(tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "from-option"
    env = {**os.environ, "VIBE_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1", "VIBE_HOST": "256.0.0.1",
           "VIBE_PORT": "1", "VIBE_DATA_DIR": str(tmp_path / "from-env")}
    env.pop("VIBE_API_KEYS", None)
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(data)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc)
        assert (data / "dev-key.json").exists() and not (tmp_path / "from-env").exists()
    finally:
        end_process(proc)


def test_read_prints_the_lexical_ranking_and_the_documents(server: Served) -> None:
    for doc_id, title in (("wing-1", "swept wing flutter"), ("wing-2", "delta wing flutter at speed")):
        assert server.put("k-admin-a", "cliread", doc_id, {"title": title, "body": "flutter"}).status_code == 201
    out = cli("read", "wing flutter", "--collection", "cliread", "--strategy", "hybrid", "--url", server.base,
              "--key", "k-alice")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("lexical ranking (first answer): 2 result(s)"), out.stdout
    assert "cliread/wing-1" in out.stdout and "cliread/wing-2" in out.stdout
    assert out.stdout.strip().splitlines()[-3].startswith("done: 2 result(s)"), out.stdout


def test_read_json_gives_each_event_as_a_line_and_takes_the_key_from_the_environment(server: Served) -> None:
    assert server.put("k-admin-a", "clijson", "only", {"title": "a ruddervator", "body": "x"}).status_code == 201
    out = cli("read", "ruddervator", "-c", "clijson", "--url", server.base, "--json", env={"VIBE_API_KEY": "k-bob"})
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["event"] == "lexical" and events[-1]["event"] == "done"
    assert [h["id"] for h in events[0]["data"]["results"]] == ["only"]


def test_read_with_a_wrong_key_fails_with_the_servers_reason(server: Served) -> None:
    out = cli("read", "anything", "--url", server.base, "--key", "not-a-key")
    assert out.returncode == 1 and "401 unauthorized" in out.stderr and "not-a-key" not in out.stderr


def test_readyz_of_a_served_instance_matches_its_contract(server: Served) -> None:
    r = server.call("GET", "/readyz", None)  # the served client checks the answer against /openapi.json
    assert r.status_code == 200 and r.json()["ready"] is True and r.headers["x-request-id"]
