"""The distributed profile as processes (harness/cluster.py, what `make cluster` runs):
PostgreSQL, Redis, a real OpenSearch, two API replicas, two Celery workers and beat, with the
compose file's settings, driven as a client would. The shared contract checks against one
replica; a stream lexical → semantic; a revocation through one replica seen by the other at
once; then `kill -9` of a worker and of a replica and an OpenSearch restart under a write+read
load, after which nothing acknowledged is lost and every index (OpenSearch, each replica's
qdrant-edge index) holds exactly what the store of record holds, tenant by tenant."""

from __future__ import annotations

import collections
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from harness.cluster import Cluster, compose_differences
from harness.opensearch_server import OpenSearchUnavailable
from harness.postgres_server import find_bindir
from harness.server import KEYS, REPO, Served, ids
from harness.workload import Client, Ledger, Recorder, WorkloadConfig, verify, wait_settled
from tests.integration.distributed.conftest import stream_semantic_hit, wait_for

CHECKS = REPO.parent / "shared" / "checks"
# The load's own tenants, so the shared checks' tenants (ta, tb) see only their own documents.
LOAD_KEYS = ["k-load-c", "k-load-d"]
CLUSTER_KEYS = [*KEYS, *({"key": k, "tenant": k[-1:] + "t", "principals": ["user:load"],
                          "scopes": ["read", "write", "admin"]} for k in LOAD_KEYS)]
# The test's clock, on top of the compose settings: a killed worker's messages come back after
# 4 s (compose: an hour, the reconciler's 300 s before that), the reconciler looks every second.
TIMING = {"VIBE_EMBED_DIM": "64", "VIBE_CELERY_VISIBILITY_TIMEOUT": "4", "VIBE_CELERY_RESTORE_INTERVAL": "1",
          "VIBE_RECONCILE_INTERVAL_SECONDS": "1", "VIBE_RECONCILE_STUCK_SECONDS": "2",
          "VIBE_JOB_BACKOFF_SECONDS": "0.2", "VIBE_JOB_BACKOFF_MAX_SECONDS": "2",
          "VIBE_REDIS_DOWN_BACKOFF_SECONDS": "0.5", "VIBE_STREAM_WAIT_SECONDS": "20",
          "VIBE_PER_TENANT_PER_MIN": "1000000", "VIBE_PER_TENANT_REQUESTS_PER_SECOND": "0"}
EAGER, LAZY = "eager", "lazy"
SPACE = "core"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if find_bindir() is None or shutil.which("redis-server") is None:
        pytest.skip("needs PostgreSQL and redis-server (apt-get install -y postgresql redis-server)")
    # Not pytest's tmp dir: under root PostgreSQL runs as its own user, who cannot enter that 0700 tree.
    root = Path(tempfile.mkdtemp(prefix="vibe-cluster-"))
    root.chmod(0o755)
    # VIBE_EMBEDDER as a user's .env would give it (compose passes it through); the heap is smaller
    # than compose's 1 GB, which a test corpus does not need.
    c = Cluster(root, keys=CLUSTER_KEYS, variables={"VIBE_EMBEDDER": "hash"}, extra_env=TIMING, heap="512m")
    try:
        c.start()
    except OpenSearchUnavailable as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no OpenSearch node: {exc}")
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def _proc_env(pid: int) -> dict[str, str]:
    raw = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_processes_run_with_the_compose_settings(cluster: Cluster) -> None:
    """Every setting compose gives a service reaches its process, except the named local ones."""
    local = {"VIBE_DATA_DIR", "VIBE_COLD_DIR", "VIBE_POSTGRES_URL", "VIBE_REDIS_URL", "VIBE_OPENSEARCH_URL",
             "VIBE_QDRANT_URL", "VIBE_VECTORS"}
    expected = {"api": local | {"VIBE_HOST", "VIBE_PORT"}, "worker": local | {"VIBE_METRICS_PORT"},
                "scheduler": local}
    procs = {"api": cluster.apis[0].proc.pid, "worker": cluster.celery[0].proc.pid}
    assert cluster.beat is not None
    procs["scheduler"] = cluster.beat.proc.pid
    for role, pid in procs.items():
        differs = compose_differences(cluster, role)
        assert set(differs) == expected[role], (role, differs)
        for name in ("VIBE_POSTGRES_URL", "VIBE_REDIS_URL", "VIBE_OPENSEARCH_URL"):
            compose_url, local_url = differs[name]
            assert compose_url and local_url and _without_address(compose_url) == _without_address(local_url)
        running = _proc_env(pid)
        for name, value in cluster.compose_env(role).items():
            if name not in differs and name not in TIMING:
                assert running.get(name) == value, (role, name)
    assert _proc_env(procs["api"])["VIBE_PROFILE"] == "distributed"


def _without_address(url: str) -> str:
    scheme, rest = url.split("://", 1)
    creds, _, tail = rest.rpartition("@")
    return f"{scheme}://{creds}@{tail.split('/', 1)[1] if '/' in tail else ''}"


SHIM = """
import runpy, sys
lib, script, base = sys.argv[1:4]
sys.path.insert(0, lib)
import vibe

class Replica(vibe.Server):
    '''An API replica of the process cluster instead of a server of the check's own.'''
    def __init__(self, *args, **kwargs):
        self.base = base
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return None
    def tail(self, n=600):
        return "(see the replica's log)"

vibe.Server = Replica
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.parametrize("name", ["contract", "tenant-stats"])
def test_shared_check_against_a_replica(cluster: Cluster, name: str) -> None:
    script = CHECKS / name
    if not script.exists():
        pytest.skip(f"{script} not present beside the repository")
    proc = subprocess.run([sys.executable, "-c", SHIM, str(CHECKS / "lib"), str(script), cluster.apis[0].base],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


FILLER = " Reviewed by the structures group; see the appendix for the full load cases and test setup."
DOCS = [{"_id": "wing", "title": "Wing flutter report", "body": "flutter margin of the outer wing under load" + FILLER},
        {"_id": "gust", "title": "Gust alleviation", "body": "gust load alleviation on approach" + FILLER},
        {"_id": "gear", "title": "Landing gear", "body": "shimmy damper of the nose gear, load cases" + FILLER}]


def test_stream_on_one_replica_of_documents_written_through_the_other(cluster: Cluster) -> None:
    one, two = cluster.apis
    assert one.bulk("k-admin-a", "reports", DOCS).status_code == 200
    assert two.status("k-admin-a", "reports", "gust") == "none"  # lazy: nothing embedded on write
    stream_semantic_hit(two, "gust load alleviation", "gust")  # touched, embedded by a worker, streamed
    assert one.status("k-admin-a", "reports", "gust") == "ready"
    sem = one.read("k-admin-a", collection="reports", q="gust load alleviation", semantic={"strategy": "semantic"})
    assert ids(sem.json()["results"])[0] == "gust"  # replica 1's own vector index has it too


def _leg_ids(app: Served, key: str, strategy: str, q: str) -> list[str]:
    r = app.read(key, collection="revoke", q=q, semantic={"strategy": strategy})
    assert r.status_code == 200, r.text
    return ids(r.json()["results"])


def test_revocation_through_one_replica_is_seen_by_the_other_at_once(cluster: Cluster) -> None:
    one, two = cluster.apis
    assert one.call("POST", "/semantic/promote", "k-admin-a", {"collection": "revoke"}).status_code == 200
    doc = {"title": "Launch plan", "body": "launch window and the countdown checklist" + FILLER}
    readers = ["group:eng", "user:admin"]
    assert one.put("k-admin-a", "revoke", "plan", {**doc, "_acl": readers}).status_code in (200, 201)
    assert two.wait_status("k-admin-a", "revoke", "plan", "ready", timeout=30) == "ready"  # eager: a worker embeds it
    for strategy in ("keyword", "semantic", "hybrid"):
        assert _leg_ids(two, "k-alice", strategy, "launch countdown") == ["plan"], strategy

    # ACL change through replica 1; replica 2 is asked right after the write returned.
    assert one.put("k-admin-a", "revoke", "plan", {**doc, "_acl": ["user:admin"]}).status_code == 200
    for strategy in ("keyword", "semantic", "hybrid"):
        assert _leg_ids(two, "k-alice", strategy, "launch countdown") == [], strategy
    assert two.call("GET", "/v1/collections/revoke/docs/plan", "k-alice").status_code == 404
    assert _leg_ids(two, "k-admin-a", "semantic", "launch countdown") == ["plan"]

    assert one.call("DELETE", "/v1/collections/revoke/docs/plan", "k-admin-a").status_code == 200
    for strategy in ("keyword", "semantic", "hybrid"):
        assert _leg_ids(two, "k-admin-a", strategy, "launch countdown") == [], strategy
    assert two.call("GET", "/v1/collections/revoke/docs/plan", "k-admin-a").status_code == 404


# -- faults under load ----------------------------------------------------------------------------


class PatientClient(Client):
    """A load client that pauses after a refusal, as a real one would, instead of spinning on a
    refused connection while a replica is down (it would starve the restart of CPU)."""

    def _fail(self, route: str, what: str, transport: bool = False, status: int = 0) -> None:
        super()._fail(route, what, transport, status)
        if transport or status >= 500:
            time.sleep(0.2)


class Load:
    """Client threads of harness/workload.py on each replica (their own ids), every
    acknowledged write in one ledger; a 5xx or a cut connection during a fault is a refusal,
    the write stays unsure."""

    def __init__(self, cluster: Cluster) -> None:
        self.ledger, self.rec, self.stop_ev = Ledger(), Recorder(), threading.Event()
        mix = {"put": 6, "bulk": 4, "delete": 2, "get": 4, "read_json": 6, "read_sse": 2}
        self.clients: list[Client] = []
        for run, api in zip("ab", cluster.apis, strict=True):
            cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=2, duration=600, run=run,
                                 bulk_size=10, mix=mix, tolerate_outage=True, timeout=30)
            self.clients += [PatientClient(api.base, n, cfg, self.ledger, self.rec, self.stop_ev) for n in range(2)]

    def __enter__(self) -> Load:
        self.t0 = time.monotonic()
        for c in self.clients:
            c.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_ev.set()
        for c in self.clients:
            c.join(60)

    def acked(self) -> int:
        return sum(1 for e in list(self.ledger.entries.values()) if e.acked != "never")

    def wait_more(self, n: int, what: str) -> None:
        """Until `n` more documents have an acknowledged write (progress, not time)."""
        target = self.acked() + n
        wait_for(lambda: self.acked() >= target, 120, f"{n} more acknowledged writes {what}")
        print(f"[process cluster] {time.monotonic() - self.t0:.0f} s: {self.acked()} documents acknowledged {what}",
              flush=True)


def _store_ids(cluster: Cluster, tenant: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The store of record's documents of `tenant`, and those with a vector (`ready`)."""
    assert cluster.postgres is not None
    with psycopg.connect(cluster.postgres.url("vibe")) as conn:
        docs = conn.execute("SELECT collection, doc_id FROM docs WHERE tenant = %s", (tenant,)).fetchall()
        ready = conn.execute("SELECT collection, doc_id FROM sidecar WHERE tenant = %s AND space = %s "
                             "AND status = 'ready'", (tenant, SPACE)).fetchall()
    return {(c, d) for c, d in docs}, {(c, d) for c, d in ready}


def _positions(cluster: Cluster) -> dict[str, object]:
    """The shared followers' positions against the change log's head (for a failure's message)."""
    assert cluster.postgres is not None
    with psycopg.connect(cluster.postgres.url("vibe")) as conn:
        positions: dict[str, int] = dict(conn.execute("SELECT name, seq FROM follower_positions").fetchall())
        head = conn.execute("SELECT max(seq) FROM changes").fetchone()
    lags = [api.call("GET", "/semantic/lag", key).json()["indexFollowerLag"]
            for api in cluster.apis for key in LOAD_KEYS]
    return {"positions": positions, "head": head[0] if head else None, "replica lags": lags}


def _opensearch_ids(cluster: Cluster, tenant: str) -> set[tuple[str, str]]:
    assert cluster.opensearch is not None
    body = {"size": 10_000, "query": {"term": {"tenant": tenant}}, "_source": False,
            "docvalue_fields": ["collection", "doc_id"]}
    r = httpx.post(f"{cluster.opensearch.url}/vibe-lex-*/_search", json=body, timeout=30)
    r.raise_for_status()
    return {(h["fields"]["collection"][0], h["fields"]["doc_id"][0]) for h in r.json()["hits"]["hits"]}


def _vector_ids(api: Served, key: str, collection: str) -> set[tuple[str, str]]:
    """Everything a replica's vector index holds for the key's tenant in `collection`: a
    semantic read ranks the whole (ACL-filtered) collection by its vectors, read page by page."""
    out: set[tuple[str, str]] = set()
    body: dict[str, Any] = {"collection": collection, "q": "wing load", "limit": 200,
                            "semantic": {"strategy": "semantic", "k": 2000}}
    while True:
        r = api.read(key, **body)
        assert r.status_code == 200, r.text
        out |= {(collection, i) for i in ids(r.json()["results"])}
        if not r.json().get("nextCursor"):
            return out
        body["cursor"] = r.json()["nextCursor"]


def _tenant(key: str) -> str:
    return str(next(k["tenant"] for k in CLUSTER_KEYS if k["key"] == key))


def _index_disagreements(cluster: Cluster) -> dict[str, object]:
    """Per tenant: what OpenSearch and each replica's vector index hold beyond or short of the
    store (OpenSearch: every document; vectors: the `ready` ones), and each replica's lag and
    mismatch when not 0. Empty when converged."""
    out: dict[str, object] = {}
    for key in LOAD_KEYS:
        tenant = _tenant(key)
        for api in cluster.apis:  # a keyword read brings the shared lexical follower up to the log's head
            assert api.read(key, collection=EAGER, q="wing", semantic={"strategy": "keyword"}).status_code == 200
        docs, ready = _store_ids(cluster, tenant)
        lexical = _opensearch_ids(cluster, tenant)
        if lexical != docs:
            out[f"{tenant} opensearch"] = {"extra": sorted(lexical - docs)[:5], "missing": sorted(docs - lexical)[:5]}
        for n, api in enumerate(cluster.apis, 1):
            vectors = _vector_ids(api, key, EAGER) | _vector_ids(api, key, LAZY)
            if vectors != ready:
                out[f"{tenant} api{n} vectors"] = {"extra": sorted(vectors - ready)[:5],
                                                   "missing": sorted(ready - vectors)[:5]}
            # every change applied by this replica's followers, no job lost or waiting
            lag = api.call("GET", "/semantic/lag", key).json()
            mismatch = api.call("GET", "/semantic/mismatch", key).json()
            if lag["indexFollowerLag"] or lag["queued"] or mismatch["missingVectors"] or mismatch["queuedWithoutJob"]:
                out[f"{tenant} api{n} lag"] = {"lag": lag, "mismatch": mismatch}
    return out


@pytest.mark.timeout(600)  # about 2.5 min alone; more with the rest of the suite beside it
def test_kill9_worker_and_replica_and_opensearch_restart_under_load(cluster: Cluster) -> None:
    one = cluster.apis[0]
    for key in LOAD_KEYS:
        assert one.call("POST", "/semantic/promote", key, {"collection": EAGER}).status_code == 200
    with Load(cluster) as load:
        load.wait_more(30, "before the first fault")
        cluster.kill9_worker(1)  # its pool too: messages in flight come back after the visibility timeout
        load.wait_more(20, "with one worker")
        cluster.restart_worker(1)
        cluster.kill9_api(2)  # its clients' requests in flight are cut
        load.wait_more(20, "with one replica")
        cluster.restart_api(2)  # same data dir and port: its qdrant-edge index resumes from its position
        load.wait_more(20, "after the replica restart")
        assert cluster.opensearch is not None
        cluster.opensearch.stop()
        load.wait_more(1, "while OpenSearch is down")  # writes go on: the store of record has them
        cluster.opensearch.start()
        load.wait_more(10, "after the OpenSearch restart")
    print(f"\n[process cluster] load:\n{load.rec.table()}\nrefused: "
          f"{dict(sum((c.refused for c in load.clients), start=collections.Counter()))}")
    assert load.rec.error_count() == 0, load.rec.errors[:10]  # no 4xx, no wrong content, no lost read-your-write

    t0 = time.monotonic()
    for api in cluster.apis:
        # lazy documents may stay `stale` (edited after a touch embedded them) until touched again
        wait_settled(api.base, load.ledger, {EAGER}, timeout=120, lazy_states=("none", "ready", "stale"))
    print(f"[process cluster] settled in {time.monotonic() - t0:.0f} s", flush=True)
    last: dict[str, object] = {}

    def converged() -> bool:
        last.clear()
        last.update(_index_disagreements(cluster))
        return not last

    with contextlib.suppress(AssertionError):
        wait_for(converged, 120, "every index to hold what the store holds")
    assert not last, (last, _positions(cluster))
    print(f"[process cluster] indexes agree with the store {time.monotonic() - t0:.0f} s after the load", flush=True)
    # Every acknowledged write read back (store, OpenSearch by its version token, vectors by its
    # text) through the replica that was killed; the set comparisons above covered both replicas.
    verdict = verify(cluster.apis[1].base, load.ledger, {EAGER}, keyword_limit=60, semantic_sample=20)
    assert verdict.ok(), verdict.summary()
    print(f"[process cluster] verified {time.monotonic() - t0:.0f} s after the load", flush=True)
