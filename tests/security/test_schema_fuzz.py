"""Schema fuzzing: schemathesis against the served app's /openapi.json, every
route and method, with a valid admin key. Bounded for `make test`; set VIBE_FUZZ_EXAMPLES
(examples per operation and phase; default 15) higher for bench/reliability runs, e.g.
`VIBE_FUZZ_EXAMPLES=1000 pytest tests/security/test_schema_fuzz.py`.

Runs the schemathesis CLI (`st run`) as a user would, against uvicorn on a real socket.
Its report (with a `curl` line per failure, the exact request) is printed by the test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.rerank_server import RerankServer
from harness.server import Served, served

EXAMPLES = int(os.environ.get("VIBE_FUZZ_EXAMPLES", "15"))
SEED = os.environ.get("VIBE_FUZZ_SEED", "12")
ST = Path(sys.executable).with_name("st")
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not ST.exists() and shutil.which("st") is None:
        pytest.fail("schemathesis is not installed (pip install -e '.[dev]')")
    # A reranker is configured (the local stand-in), so `rerank: true`, valid by the schema, is
    # served; without one the server refuses it with 400 naming the setting (test_read_rerank.py).
    with RerankServer() as reranker, served(Path(tmp_path_factory.mktemp("fuzz")) / "data",
                                            env={"VIBE_RERANK_URL": reranker.url}) as s:
        yield s


def _st(app: Served, *args: str) -> tuple[int, str]:
    cmd = [str(ST) if ST.exists() else "st", "--config-file", str(CONFIG), "run", f"{app.base}/openapi.json",
           "-H", "Authorization: Bearer k-admin-a", "--max-examples", str(EXAMPLES), "--seed", SEED,
           "--no-color", "--continue-on-failure", "--no-shrink", "--request-timeout", "60",
           "--generation-database", "none", "--warnings", "off", *args]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    out = r.stdout + r.stderr
    m = re.search(r"(\d+) generated", out)
    print(f"\nschemathesis {' '.join(args)}: {m.group(1) if m else '?'} cases, exit {r.returncode}")
    if r.returncode:
        print(out[-20000:])
    return r.returncode, out


def test_no_operation_answers_5xx(app: Served) -> None:
    """Every operation, positive and negative data, NUL bytes allowed: never a 5xx."""
    rc, out = _st(app, "--checks", "not_a_server_error")
    assert rc == 0, out[-5000:]
    assert "Operations:" in out and " 0 selected" not in out
    assert "unhandled error" not in app.log(), app.log()[-4000:]  # app.py logs every 500 so


def test_documents_api_answers_within_its_declared_schema(app: Served) -> None:
    """The documents routes (services/api/routes_docs.py) declare their request bodies,
    responses and errors: schema-valid requests are accepted, invalid ones refused with a
    declared 4xx, and every answer matches its declared status, content type and body."""
    rc, out = _st(app, "--checks", "all", "--exclude-checks", "unsupported_method",
                  "--include-path-regex", "^/v1/collections/", "--generation-allow-x00", "false")
    assert rc == 0, out[-5000:]


def test_every_operation_answers_within_its_declared_schema(app: Served) -> None:
    """Every route and method (services/api/schemas.py declares their request bodies,
    responses, errors and the bearer scheme): schema-valid requests are accepted, invalid ones
    refused with a declared 4xx, and every answer matches its declared status, content type,
    headers and body; an undeclared method answers 405 with `Allow`."""
    rc, out = _st(app, "--checks", "all", "--generation-allow-x00", "false",
                  "--exclude-operation-id", "post_space_semantic_spaces_post")
    assert rc == 0, out[-5000:]
    assert " 0 selected" not in out


def test_starting_a_space_answers_within_its_declared_schema_but_may_refuse_a_model(app: Served) -> None:
    """POST /semantic/spaces under every check but one: whether a schema-valid model name can
    be used depends on the operator (VIBE_LOCAL_MODELS, the configured provider), which no
    static schema can say, so a model the server cannot use is refused with 400 `invalid_params`
    (asserted below) rather than accepted."""
    rc, out = _st(app, "--checks", "all", "--exclude-checks", "positive_data_acceptance",
                  "--generation-allow-x00", "false", "--include-operation-id", "post_space_semantic_spaces_post")
    assert rc == 0, out[-5000:]
    assert " 1 selected" in out or "1/" in out, out[-2000:]
    # tenant tb: the fuzzer has spent tenant ta's rate
    r = app.client.post("/semantic/spaces", json={"space": "fuzz-model", "model": "local:not-listed"},
                        headers={"Authorization": "Bearer k-admin-b"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text


def test_a_space_dimension_written_as_an_integral_float_is_accepted(app: Served) -> None:
    r = app.client.post("/semantic/spaces", json={"space": "fuzz-dim", "model": "hash:v1@8", "dim": 8.0},
                        headers={"Authorization": "Bearer k-admin-b"})  # ta's rate is the fuzzer's
    assert r.status_code == 202, r.text
