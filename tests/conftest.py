from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.opensearch_server import OpenSearchUnavailable, opensearch_node
from harness.postgres_server import PostgresServer, find_bindir, postgres_server
from harness.server import Served, served

# `make test` runs the suite on pytest-xdist workers with `--dist loadfile --no-loadscope-reorder`:
# a module's tests stay on one worker (its module-scoped servers start once). (Not loadgroup: with
# pytest 9.2 xdist's groups are silently ignored, pytest-dev/pytest-xdist#1386.) Modules that
# write the same files in the checkout take a lock (harness/locks.py). The slowest modules
# (minutes of subprocesses each) are handed out first, so none of them starts last and runs
# alone; a module missing from the list is only scheduled later, never skipped.
SLOW_FIRST = (
    "tests/integration/distributed/test_process_cluster.py",
    "tests/reliability/test_crashes.py",
    "tests/e2e/test_ui_browser.py",
    "tests/contract/test_lexical_contract.py",
    "tests/reliability/test_load.py",
    "tests/unit/test_onnx_embedder.py",
    "tests/security/test_permission_matrix.py",
    "tests/integration/distributed/test_lifecycle_beat.py",
    "tests/unit/test_change_log_compaction.py",
    "tests/security/test_schema_fuzz.py",
    "tests/contract/test_cold_store_contract.py",
    "tests/integration/test_spaces_http.py",
    "tests/integration/test_opensearch_profile.py",
)


# Each directory is one tier (markers declared in pyproject.toml, checked with --strict-markers);
# the longest directory prefix wins. `make check` selects the fast tiers by marker.
TIERS = (
    ("tests/integration/distributed/", "distributed"),
    ("tests/integration/", "integration"),
    ("tests/unit/", "unit"),
    ("tests/contract/", "contract"),
    ("tests/e2e/", "e2e"),
    ("tests/mcp/", "integration"),  # starts the MCP server over stdio and HTTP
    ("tests/sdk/", "integration"),  # the SDKs against a served app
    ("tests/security/", "integration"),  # a served app under the permission matrix and fuzzing
    ("tests/reliability/", "distributed"),  # Celery workers, Redis and crashes
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        tier = next((name for prefix, name in TIERS if path.startswith(prefix)), None)
        if tier is not None:
            item.add_marker(tier)
        if path in SLOW_FIRST:
            item.add_marker("slow")
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return  # a plain run keeps pytest's own order
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.nodeid.split("::", 1)[0], len(rank)), order[id(item)]))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One served instance (hash embedder) per test module."""
    with served(Path(tmp_path_factory.mktemp("srv")) / "data") as s:
        yield s


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One private PostgreSQL cluster for the whole run (startup costs ~2 s); tests take a fresh
    database each from `postgres_url`."""
    if find_bindir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb/postgres on PATH or in /usr/lib/postgresql/*/bin; "
                    "apt-get install -y postgresql)")
    with postgres_server() as srv:
        yield srv


_databases = itertools.count()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A fresh, empty database of the session's cluster: tests never see each other's rows."""
    return postgres.create_database(f"t{next(_databases)}")


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """A real OpenSearch for the whole run: the server VIBE_OPENSEARCH_URL names, or a private
    single-node one built from Maven Central (`deploy/opensearch-dev`, ~3 s to start). Without a
    JDK or Maven its tests skip, unless VIBE_REQUIRE_OPENSEARCH=1 (CI) makes that an error."""
    if url := os.environ.get("VIBE_OPENSEARCH_URL"):
        yield url
        return
    with contextlib.ExitStack() as stack:
        try:
            node = stack.enter_context(opensearch_node())
        except OpenSearchUnavailable as exc:
            if os.environ.get("VIBE_REQUIRE_OPENSEARCH") == "1":
                raise
            pytest.skip(f"no OpenSearch node: {exc}")
        yield node.url
