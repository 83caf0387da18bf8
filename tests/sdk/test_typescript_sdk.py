"""The TypeScript SDK (sdk/typescript, npm package `vibe-semantic-client`) against the real served
app: `node --test` runs sdk/typescript/test/*.test.mjs with the base URL and keys in its
environment (events in order, typed errors, retries on a 429 served by a stand-in, bulk
progress, admin). Also: the committed OpenAPI snapshot the SDK's types are generated from is
the app's current OpenAPI, and the committed types are what openapi-typescript makes of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.locks import build_then_use
from harness.server import REPO, Served
from tests.sdk.conftest import ADMIN, BOB, OTHER_ADMIN

SDK = REPO / "sdk" / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")
needs_node = pytest.mark.skipif(NODE is None or NPM is None,
                                reason="node/npm are not installed (Node >= 20 runs the SDK tests)")


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=SDK, capture_output=True, text=True, timeout=timeout, env=env)


def _build_sdk() -> Path:
    if not (SDK / "node_modules" / ".package-lock.json").exists():
        r = _run([str(NPM), "ci", "--no-audit", "--no-fund"], 600)
        assert r.returncode == 0, r.stdout + r.stderr
    r = _run([str(NPM), "run", "build"], 300)
    assert r.returncode == 0, r.stdout + r.stderr
    return SDK / "dist"


@pytest.fixture(scope="module")
def sdk_built() -> Iterator[Path]:
    """node_modules (npm ci, when missing) and a fresh dist/ (tsc): the tests run the build. Kept
    from tests/e2e/test_ui_browser.py's rebuild (another pytest-xdist worker's) while in use."""
    with build_then_use(SDK / "dist", _build_sdk) as dist:
        yield dist


def test_openapi_snapshot_is_current() -> None:
    """`npm run snapshot` output equals the committed sdk/typescript/openapi.json: the API's
    shape changed without the SDK's types being regenerated if this fails (run
    `cd sdk/typescript && npm run snapshot && npm run gen`)."""
    r = subprocess.run([sys.executable, str(SDK / "scripts" / "export_openapi.py")], capture_output=True,
                       text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads((SDK / "openapi.json").read_text()), \
        "sdk/typescript/openapi.json is stale: cd sdk/typescript && npm run snapshot && npm run gen"


@needs_node
def test_generated_types_are_current(tmp_path: Path, sdk_built: Path) -> None:
    out = tmp_path / "schema.ts"
    r = _run([str(SDK / "node_modules" / ".bin" / "openapi-typescript"), "openapi.json", "-o", str(out)], 300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.read_text() == (SDK / "src" / "schema.ts").read_text(), \
        "sdk/typescript/src/schema.ts is not what `npm run gen` makes of openapi.json: run it"


@needs_node
def test_typescript_sdk_against_served_app(server: Served, sdk_built: Path) -> None:
    env = dict(os.environ, VIBE_BASE_URL=server.base, VIBE_ADMIN_KEY=ADMIN, VIBE_READER_KEY=BOB,
               VIBE_OTHER_KEY=OTHER_ADMIN, NODE_OPTIONS="")
    r = _run([str(NODE), "--test", "--test-reporter=spec", "test/"], 600, env=env)
    report = r.stdout + r.stderr
    print(report)  # the Node runner's report, for -s / failure output
    assert r.returncode == 0, report[-8000:]
    assert "# fail 0" in report or "fail 0" in report, report[-4000:]
