"""Permission matrix: >= 10,000 randomized (principal x document x endpoint)
cases over every read path of the HTTP API and the MCP tools, with ACL changes, deletes and
re-creations interleaved, against an oracle of what each key may read (tests/security/matrix.py).
The readers include API-made keys and end-user tokens (one with a filter), made on the writing
process; revoked and expired ones must be refused on every path. Documents require none, one or
two certificates (`_certs`), and readers hold none, one, both or others: a reader sees a
document only with its ACL and every certificate it requires. The reads include global ones
(`any`, `global: true`), more-like-this over `semantic.nodes` (the source never its own result; a
source the reader may not read answers exactly as a missing one) and `{vector}` queries (an admin
of either tenant, or one of narrow reach, sees only what it may read; any other key: 403).

Two variants: one API process; and two API processes on one data dir, writes to one and reads
from the other once the write has returned. `VIBE_MATRIX_ROUNDS` (default 45) and
`VIBE_MATRIX_SEED` make runs longer or different. The figures are printed (`pytest -s`)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from harness.server import Served, served
from tests.security.matrix import ENV, KEYS, Matrix, Stats

ROUNDS = int(os.environ.get("VIBE_MATRIX_ROUNDS", "45"))
SEED = int(os.environ.get("VIBE_MATRIX_SEED", "20240612"))
MIN_CASES = 10_000 if ROUNDS >= 45 else 0


def _report(stats: Stats) -> None:
    print("\n" + stats.summary())
    for leak in stats.leaks[:25]:
        print("LEAK", leak)
    for err in stats.errors[:10]:
        print("SERVER ERROR", err)


def _run(writer: Served, reader: Served, variant: str) -> Stats:
    m = Matrix(writer, reader, variant, SEED)
    try:
        m.setup({"ta": 8, "tb": 4})
        stats = m.run(ROUNDS)
    finally:
        m.close()
    _report(stats)
    return stats


def test_permission_matrix_one_process(tmp_path: Path) -> None:
    with served(tmp_path / "data", env=ENV, keys=KEYS) as s:
        stats = _run(s, s, "one process")
    assert stats.cases >= MIN_CASES
    assert not stats.leaks, "\n".join(map(str, stats.leaks[:25]))
    assert not stats.errors, stats.errors[:10]


def test_permission_matrix_two_processes_one_data_dir(tmp_path: Path) -> None:
    """Writes go to one API process, reads (HTTP and MCP) to another on the same data dir,
    each read after the write it follows returned."""
    with served(tmp_path / "data", env=ENV, keys=KEYS) as w, served(tmp_path / "data", env=ENV, keys=KEYS) as r:
        stats = _run(w, r, "two processes, one data dir")
    assert stats.cases >= MIN_CASES
    assert not stats.leaks, "\n".join(map(str, stats.leaks[:25]))
    assert not stats.errors, stats.errors[:10]


def test_permission_matrix_two_processes_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    """The documented multi-process set-up: two API processes on one PostgreSQL store, each
    with its own embedded indexes following the store's change log. Writes to one, reads
    (HTTP and MCP) from the other once the write returned."""
    # separate data dirs: the replicas share the token secret as the distributed profile's must
    env = {**ENV, "VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
           "VIBE_TOKEN_SECRET": "matrix-token-secret-" + "x" * 32}
    with served(tmp_path / "a", env=env, keys=KEYS) as w, served(tmp_path / "b", env=env, keys=KEYS) as r:
        stats = _run(w, r, "two processes, PostgreSQL")
    assert stats.cases >= MIN_CASES
    assert not stats.leaks, "\n".join(map(str, stats.leaks[:25]))
    assert not stats.errors, stats.errors[:10]


def test_permission_matrix_two_processes_on_postgres_and_opensearch(tmp_path: Path, postgres_url: str,
                                                                   opensearch_url: str) -> None:
    """The distributed profile's store and keyword index: two API processes on one PostgreSQL
    store and one OpenSearch (ACL and certificates inside OpenSearch's queries), each with its
    own qdrant-edge vectors (no Qdrant server runs here). Writes to one, reads from the other."""
    prefix = f"vibe-matrix-{uuid.uuid4().hex[:10]}-"
    env = {**ENV, "VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
           "VIBE_TOKEN_SECRET": "matrix-token-secret-" + "x" * 32, "VIBE_LEXICAL": "opensearch",
           "VIBE_OPENSEARCH_URL": opensearch_url, "VIBE_OPENSEARCH_PREFIX": prefix,
           # each write is read at once from the other process: a refresh per write, not a wait
           "VIBE_OPENSEARCH_REFRESH": "true"}
    try:
        with served(tmp_path / "a", env=env, keys=KEYS) as w, served(tmp_path / "b", env=env, keys=KEYS) as r:
            stats = _run(w, r, "two processes, PostgreSQL + OpenSearch")
    finally:
        from opensearchpy import OpenSearch

        client = OpenSearch(hosts=[opensearch_url])
        client.indices.delete(index=prefix + "*", ignore_unavailable=True, allow_no_indices=True)
        client.indices.delete_index_template(name=prefix + "template", ignore=[404])
        client.close()
    assert stats.cases >= MIN_CASES
    assert not stats.leaks, "\n".join(map(str, stats.leaks[:25]))
    assert not stats.errors, stats.errors[:10]
