"""The `/ui` search page: served by the API from the committed build, which
must be what the sources build to, with no-store and CSP headers and no key needed for its
files; and in headless Chromium (Debian's `chromium`, driven by playwright-core from Node)
against the app with the real all-MiniLM-L6-v2 model: the URL runs a query on load, typing a
paraphrase shows lexical results first, then the semantic re-ranking brings in a document that
shares no word with the query; explain, more like this and the admin tab work; stored markup
stays text; the key never appears in a request URL. Screenshots: tests/e2e/artifacts/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.locks import build_then_use
from harness.server import REPO, Served, served
from tests.sdk.conftest import ADMIN, BOB
from tests.support.paraphrase import PARAPHRASE_DOCS

SDK = REPO / "sdk" / "typescript"
UI_DIST = REPO / "services" / "api" / "ui" / "dist"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
NODE = shutil.which("node")
NPM = shutil.which("npm")
CHROMIUM = os.environ.get("VIBE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

needs_node = pytest.mark.skipif(NODE is None or NPM is None, reason="node/npm are not installed (the page is built "
                                "and driven with Node >= 20)")

DOCS = [
    *PARAPHRASE_DOCS,
    # a lexical hit of the paraphrase ("flat", "how"), with markup that must stay text
    {"_id": "flatpack", "title": "Flat-pack bookcase <img src=x onerror=window.__xss=1>",
     "body": "How to assemble the flat pack shelves: <script>window.__xss=2</script> screw the side panels first."},
]


def _npm(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NPM), *args], cwd=SDK, capture_output=True, text=True, timeout=timeout)


def _build_sdk() -> Path:
    if not (SDK / "node_modules" / ".package-lock.json").exists():
        r = _npm("ci", "--no-audit", "--no-fund")
        assert r.returncode == 0, r.stdout + r.stderr
    r = _npm("run", "build")  # dist/ of the SDK (the browser script polls the API with it)
    assert r.returncode == 0, r.stdout + r.stderr
    return SDK / "node_modules"


@pytest.fixture(scope="module")
def node_modules() -> Iterator[Path]:
    # tests/sdk/test_typescript_sdk.py rebuilds dist/ too, perhaps on another pytest-xdist worker:
    # it waits until this module is done with it, and this one for that one.
    with build_then_use(SDK / "dist", _build_sdk) as modules:
        yield modules


@needs_node
def test_committed_ui_build_is_current(node_modules: Path, tmp_path: Path) -> None:
    """The committed services/api/ui/dist is what the sources build to (so `make run` serves the
    current page without Node). Fix: `cd sdk/typescript && npm run build:ui`."""
    r = _npm("run", "typecheck")
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(NODE), "scripts/build_ui.mjs", str(tmp_path)], cwd=SDK, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in UI_DIST.iterdir())
    for name in built:
        assert (tmp_path / name).read_bytes() == (UI_DIST / name).read_bytes(), \
            f"services/api/ui/dist/{name} is stale: cd sdk/typescript && npm run build:ui"


def test_ui_files_served_without_key_with_strict_headers(server: Served) -> None:
    with httpx.Client(base_url=server.base, timeout=30) as http:
        page = http.get("/ui?collection=kb&q=x")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert 'data-phase="idle"' in page.text and "/ui/app.js" in page.text
        for r in (page, http.get("/ui/app.js"), http.get("/ui/style.css"), http.get("/ui/")):
            assert r.status_code == 200, r.text
            assert r.headers["cache-control"] == "no-store"
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
            assert r.headers["x-content-type-options"] == "nosniff"
        assert http.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
        for bad in ("/ui/nope.js", "/ui/..%2Fapp.py", "/ui/%2e%2e%2fapp.py", "/ui/index.html/x", "/ui/tsconfig.json"):
            r = http.get(bad)
            assert r.status_code == 404, (bad, r.status_code)
            if r.headers.get("content-type", "").startswith("application/json"):
                assert r.json()["error"]["code"] == "not_found"
        # the page is not an API operation
        assert not any(p.startswith("/ui") for p in http.get("/openapi.json").json()["paths"])


@needs_node
def test_search_page_shows_what_the_key_may_read(server: Served, node_modules: Path) -> None:
    """A reader's key: only the documents its principals may read, the admin tab refused; a key
    typed in after another: nothing the previous key was shown stays on the page; a `#key=` link
    opened in a tab that has a key asks before it replaces it (declined: the key stays)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does)")
    docs = [{"_id": "public", "title": "Quarterly report", "body": "Revenue grew in the quarterly report."},
            {"_id": "secret", "title": "Salaries", "body": "Quarterly report of salaries.", "_acl": ["user:admin"]}]
    assert server.bulk(ADMIN, "acl", docs).json()["accepted"] == 2
    env = dict(os.environ, VIBE_BASE_URL=server.base, VIBE_READER_KEY=BOB, VIBE_ADMIN_KEY=ADMIN,
               VIBE_CHROMIUM=CHROMIUM, VIBE_ARTIFACTS=str(ARTIFACTS), VIBE_SDK_DIR=str(SDK), NODE_OPTIONS="")
    r = subprocess.run([str(NODE), str(Path(__file__).with_name("ui_keys.mjs"))], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert r.stdout.count("ok - ") == 4


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("ui-model")) / "data", env={"VIBE_EMBEDDER": "local"}) as s:
        yield s


@pytest.mark.model
@needs_node
def test_search_page_in_headless_chromium(model_server: Served, node_modules: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does)")
    s = model_server
    answer = s.bulk(ADMIN, "kb", DOCS).json()
    assert answer["accepted"] == len(DOCS), answer
    manuals = [{"_id": f"m{i:02d}", "title": f"Gearbox manual {i}", "body": "gearbox oil change"} for i in range(25)]
    assert s.bulk(ADMIN, "manuals", manuals).json()["accepted"] == 25
    for old_shot in ARTIFACTS.glob("0*.png"):
        old_shot.unlink()
    env = dict(os.environ, VIBE_BASE_URL=s.base, VIBE_KEY=ADMIN, VIBE_CHROMIUM=CHROMIUM, VIBE_ARTIFACTS=str(ARTIFACTS),
               VIBE_SDK_DIR=str(SDK), NODE_OPTIONS="")
    r = subprocess.run([str(NODE), str(Path(__file__).with_name("ui_browser.mjs"))], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    report = json.loads((ARTIFACTS / "report.json").read_text())
    names = [step["name"] for step in report["steps"]]
    assert len(names) == 9 and report["problems"] == [], report
    shots = sorted(p.name for p in ARTIFACTS.glob("0*.png"))
    assert shots == ["01-loaded-from-url.png", "02-first-ranking.png", "03-semantic-reranked.png", "04-explain.png",
                     "05-more-like-this.png", "06-admin.png"], shots
    assert all((ARTIFACTS / n).stat().st_size > 5_000 for n in shots)
