"""The distributed profile of docker-compose.yml as local processes on loopback, no Docker:
PostgreSQL, Redis, OpenSearch, two API replicas (`vibe-semantic serve`), two Celery workers and
beat. `make cluster` (`python -m harness.cluster`) runs it in the foreground; the `Cluster`
class is what tests/integration/distributed/test_process_cluster.py drives.

It lives beside the other private servers (harness/*_server.py, celery_worker.py) because
it is made of them: one way to start each part, for `make opensearch`, the tests and this.

Settings are read from the compose file itself (the app services' `environment:`, the redis
`command:`, the OpenSearch heap), so the two cannot drift. What must differ when every service
shares one host is `local_overrides()`, each with its reason; the test checks that nothing else
differs (`compose_differences`).

The vector leg: no Qdrant server can run here, so each API replica keeps its own qdrant-edge
index in its data dir (VIBE_VECTORS=embedded), following PostgreSQL's change log as OpenSearch
does; workers write vectors to PostgreSQL only and build no index (docs/cluster.md)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import yaml
from psycopg import sql

from harness.celery_worker import CeleryProcess
from harness.opensearch_server import OpenSearchNode
from harness.postgres_server import PostgresServer, find_bindir
from harness.redis_server import RedisServer
from harness.server import REPO, Served, free_port

COMPOSE = REPO / "docker-compose.yml"
APP_ROLES = ("api", "worker", "scheduler")
_REF = re.compile(r"\$\{(\w+)(?:(:?)([-?])([^}]*))?\}")
T = TypeVar("T")


# -- the compose file ---------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def interpolate(raw: str, variables: Mapping[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` / `${VAR-default}`, `${VAR:?message}` from `variables`
    (the colon forms treat an empty value as unset, as compose does)."""

    def sub(m: re.Match[str]) -> str:
        name, colon, op, arg = m.group(1), m.group(2), m.group(3), m.group(4)
        value = variables.get(name)
        present = value is not None and (value != "" or not colon)
        if present:
            return str(value)
        if op == "?":
            raise KeyError(f"{name} is required by docker-compose.yml: {arg}")
        return arg if op == "-" else ""

    return _REF.sub(sub, raw)


def compose_environment(service: str, variables: Mapping[str, str]) -> dict[str, str]:
    """What compose passes to `service`: its `environment:` (anchors merged by YAML),
    interpolated; an entry without a value is passed through only when `variables` has it."""
    raw = compose()["services"][service].get("environment") or {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        if value is None:
            if name in variables:
                out[name] = variables[name]
            continue
        out[name] = interpolate(str(value), variables)
    return out


def redis_args() -> list[str]:
    """The compose redis service's options (`--appendonly yes`, `noeviction`, ...)."""
    command = list(compose()["services"]["redis"]["command"])
    return [str(a) for a in command[1:]]  # [0] is the binary


def opensearch_heap() -> str:
    """The heap the compose file gives OpenSearch (`-Xmx1g` in OPENSEARCH_JAVA_OPTS)."""
    opts = str(compose()["services"]["opensearch"]["environment"]["OPENSEARCH_JAVA_OPTS"])
    found = re.search(r"-Xmx(\S+)", opts)
    return found.group(1) if found else "1g"


def service_addresses(variables: Mapping[str, str]) -> dict[str, str]:
    """`host:port` each compose service is reached at by the app services (from their URLs)."""
    env = compose_environment("api", variables)
    out = {}
    for url in (env["VIBE_POSTGRES_URL"], env["VIBE_REDIS_URL"], env["VIBE_OPENSEARCH_URL"]):
        netloc = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
        out[netloc.split(":")[0]] = netloc
    return out


# -- the cluster --------------------------------------------------------------------------------


def _stable_port(ports_file: Path, name: str, wanted: int | None = None) -> int:
    """`wanted`, else the port this cluster used last time when it is free (OpenSearch's follower
    position is named after its address: a new address re-applies the whole change log), else a
    free one. Remembered in `ports_file`."""
    known = json.loads(ports_file.read_text()) if ports_file.exists() else {}
    port = wanted or known.get(name)
    if port is None or not _port_free(int(port)):
        port = free_port()
    known[name] = int(port)
    ports_file.write_text(json.dumps(known, indent=1))
    return int(port)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def default_keys(root: Path) -> list[dict[str, Any]]:
    """An admin and a reader key for tenant `default`, made once and kept in the data dir."""
    path = root / "api-keys.json"
    if not path.exists():
        path.write_text(json.dumps([
            {"key": "vibe-admin-" + secrets.token_urlsafe(18), "tenant": "default", "principals": ["user:admin"],
             "scopes": ["read", "write", "admin"]},
            {"key": "vibe-reader-" + secrets.token_urlsafe(18), "tenant": "default", "principals": ["user:reader"],
             "scopes": ["read"]}], indent=1))
        path.chmod(0o600)
    return list(json.loads(path.read_text()))


def _kept_secret(root: Path, name: str) -> str:
    path = root / name
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


@dataclass
class Cluster:
    """Every process of the distributed profile on loopback, data under `root` (kept across a
    stop and a start). `variables` are what a `.env` gives compose to interpolate (e.g.
    VIBE_EMBEDDER=hash); `extra_env` (tests' short timeouts) goes on top of the compose
    settings; `api_port` fixes the first replica's port (the next ones follow it)."""

    root: Path
    api_replicas: int = 2
    workers: int = 2
    keys: list[dict[str, Any]] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)  # the shell/.env compose interpolates from
    api_port: int | None = None
    heap: str | None = None  # OpenSearch's; default the compose file's
    apis: list[Served] = field(default_factory=list)
    celery: list[CeleryProcess] = field(default_factory=list)  # workers
    beat: CeleryProcess | None = None
    postgres: PostgresServer | None = None
    redis: RedisServer | None = None
    opensearch: OpenSearchNode | None = None
    started_in: float = 0.0

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs = self.root / "logs"
        self.ports_file = self.root / "ports.json"
        if self.keys is None:
            self.keys = default_keys(self.root)
        self.api_ports: list[int] = []

    # -- settings -------------------------------------------------------------------------

    def _variables(self) -> dict[str, str]:
        """What compose would interpolate from `.env` and the shell: the operator's secrets (made
        here and kept in the data dir) and whatever the caller gave."""
        return {"VIBE_API_KEYS": json.dumps(self.keys),
                "POSTGRES_PASSWORD": _kept_secret(self.root, "postgres-password"),
                "VIBE_TOKEN_SECRET": _kept_secret(self.root, "token-secret"), **self.variables}

    def compose_env(self, role: str) -> dict[str, str]:
        return compose_environment(role, self._variables())

    def local_overrides(self, role: str, n: int) -> dict[str, str | None]:
        """What differs from the compose file when every service shares one host (None = left
        out), each for the reason beside it."""
        assert self.postgres is not None and self.redis is not None and self.opensearch is not None
        local = {"postgres": f"127.0.0.1:{self.postgres.port}", "redis": f"127.0.0.1:{self.redis.port}",
                 "opensearch": self.opensearch.url.split("://", 1)[1]}
        env = self.compose_env(role)
        out: dict[str, str | None] = {}
        # Service names are container hostnames: here each service is a process on loopback.
        for host, address in service_addresses(self._variables()).items():
            for name, value in env.items():
                if address in value:
                    out[name] = value.replace(address, local[host])
        # No Qdrant server can run here: each API replica keeps a qdrant-edge index of its own,
        # following the change log in PostgreSQL (workers build no index).
        out["VIBE_VECTORS"] = "embedded"
        out["VIBE_QDRANT_URL"] = None
        # Compose gives each container its own /data; processes on one host need a folder each
        # (an API replica's holds its qdrant-edge index and its change-log position).
        out["VIBE_DATA_DIR"] = str(self.root / f"{role}{n}" / "data")
        if "VIBE_COLD_DIR" in env:
            out["VIBE_COLD_DIR"] = str(self.root / "cold")  # the shared `vibe-cold` volume
        if role == "api":
            out["VIBE_HOST"] = "127.0.0.1"  # loopback only (compose: 0.0.0.0 inside the container)
            out["VIBE_PORT"] = str(self.api_ports[n - 1])  # one port per replica
        if "VIBE_METRICS_PORT" in env:
            out["VIBE_METRICS_PORT"] = str(free_port())  # two workers on one host cannot share 9808
        return out

    def env_for(self, role: str, n: int) -> dict[str, str]:
        """The process environment: compose's settings, the local overrides, then `extra_env`."""
        env: dict[str, str | None] = {**self.compose_env(role), **self.local_overrides(role, n)}
        env.update(self.extra_env)
        return {k: v for k, v in env.items() if v is not None}

    # -- start and stop -------------------------------------------------------------------

    def start(self) -> Cluster:
        t0 = time.monotonic()
        try:
            self._start_infrastructure()
            self._create_database()
            self.api_ports = [self._api_port(n) for n in range(self.api_replicas)]
            starts: list[Callable[[], object]] = [functools.partial(self._start_api, n)
                                                  for n in range(1, self.api_replicas + 1)]
            starts += [functools.partial(self._start_worker, n) for n in range(1, self.workers + 1)]
            starts.append(self._start_beat)
            _all(starts)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def _api_port(self, i: int) -> int:
        wanted = self.api_port + i if self.api_port else None
        return _stable_port(self.ports_file, f"api{i + 1}", wanted) if wanted else free_port()

    def _start_infrastructure(self) -> None:
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
        self.postgres = PostgresServer(bindir, self.root / "postgres", _stable_port(self.ports_file, "postgres"))
        self.redis = RedisServer(self.root / "redis", _stable_port(self.ports_file, "redis"), redis_args())
        self.opensearch = OpenSearchNode(self.root / "opensearch", _stable_port(self.ports_file, "opensearch"),
                                         self.heap or opensearch_heap())
        _all([self.postgres.start, self.redis.start, self.opensearch.start])

    def _create_database(self) -> None:
        """The role and database the compose file's postgres service creates (POSTGRES_USER/DB),
        with the password the app services' URL carries."""
        assert self.postgres is not None
        pg = compose_environment("postgres", self._variables())
        user, db, password = pg["POSTGRES_USER"], pg["POSTGRES_DB"], pg["POSTGRES_PASSWORD"]
        with psycopg.connect(self.postgres.url(), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(user), sql.Literal(password)))
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(db), sql.Identifier(user)))

    def _start_api(self, n: int) -> Served:
        env = self.env_for("api", n)
        api = Served(Path(env["VIBE_DATA_DIR"]), env=env, keys=self.keys, port=self.api_ports[n - 1])
        self._place(self.apis, n, api)
        return api

    def _start_worker(self, n: int) -> CeleryProcess:
        # no --concurrency: compose's `worker` command takes VIBE_WORKERS processes per worker
        worker = CeleryProcess("worker", self.env_for("worker", n), self.logs).wait_ready()
        self._place(self.celery, n, worker)
        return worker

    def _start_beat(self) -> CeleryProcess:
        self.beat = CeleryProcess("scheduler", self.env_for("scheduler", 1), self.logs).wait_ready()
        return self.beat

    @staticmethod
    def _place(parts: list[Any], n: int, part: Any) -> None:
        """Replica n at index n - 1 whatever order they became ready in."""
        while len(parts) < n:
            parts.append(None)
        parts[n - 1] = part

    def stop(self) -> None:
        """Beat, workers and replicas first (SIGTERM: Celery's warm shutdown, uvicorn's), then
        the servers they use."""
        if self.beat is not None:
            self.beat.stop()
            self.beat = None
        for parts in (self.celery, self.apis):
            for part in parts:
                if part is not None:
                    part.stop()
            parts.clear()
        for server in (self.opensearch, self.redis, self.postgres):
            if server is not None:
                server.stop()
        self.opensearch = self.redis = self.postgres = None

    # -- faults ---------------------------------------------------------------------------

    def kill9_api(self, n: int) -> None:
        api = self.apis[n - 1]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(api.proc.pid, signal.SIGKILL)
        api.proc.wait(10)
        api.client.close()

    def restart_api(self, n: int) -> Served:
        """A replica again on its data dir and port (its qdrant-edge index and position kept)."""
        return self._start_api(n)

    def kill9_worker(self, n: int) -> None:
        self.celery[n - 1].kill9()

    def restart_worker(self, n: int) -> CeleryProcess:
        return self._start_worker(n)

    # -- what it holds --------------------------------------------------------------------

    def processes(self) -> dict[str, int]:
        """Each part's name -> the pid that leads its process group (children: PostgreSQL's
        backends, Celery's pool, counted with it)."""
        out: dict[str, int] = {}
        for name, server in (("postgres", self.postgres), ("redis", self.redis), ("opensearch", self.opensearch)):
            if server is not None and server.proc is not None:
                out[name] = server.proc.pid
        groups: list[tuple[str, list[Any]]] = [("api", self.apis), ("worker", self.celery)]
        for role, parts in groups:
            for i, part in enumerate(parts, 1):
                if part is not None:
                    out[f"{role}{i}"] = part.proc.pid
        if self.beat is not None:
            out["beat"] = self.beat.proc.pid
        return out

    def memory(self) -> dict[str, tuple[int, int, int]]:
        """name -> (processes, RSS bytes, PSS bytes) summed over the part's process tree. RSS counts
        pages shared between the processes (PostgreSQL's shared buffers, a worker's forked pool)
        once per process; PSS splits them, so PSS sums to what the part really holds."""
        return {name: tree_memory(pid) for name, pid in self.processes().items()}


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a child that exited stays in /proc until it is waited for)."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except OSError:
        return False


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name: [0] state, [1] parent pid."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def tree_memory(root: int) -> tuple[int, int, int]:
    """(processes, RSS, PSS) of `root` and its descendants. By parent, not by session or
    group: PostgreSQL's backends each start a session of their own."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int(_stat_fields(int(entry.name))[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    count = rss = pss = 0
    for pid in tree:
        with contextlib.suppress(OSError, IndexError, ValueError):
            rollup = {line.split(":")[0]: int(line.split()[1]) * 1024
                      for line in (Path("/proc") / str(pid) / "smaps_rollup").read_text().splitlines()[1:]}
            count += 1
            rss += rollup.get("Rss", 0)
            pss += rollup.get("Pss", 0)
    return count, rss, pss


def _all(starts: list[Callable[[], T]]) -> list[T]:
    """Run the starts at once; on a failure (or Ctrl-C) wait for the others before raising, so
    that whatever did start has been recorded and is stopped by the caller."""
    with concurrent.futures.ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(s) for s in starts]
        try:
            return [f.result() for f in futures]
        except BaseException:
            concurrent.futures.wait(futures)
            raise


def compose_differences(cluster: Cluster, role: str, n: int = 1) -> dict[str, tuple[str | None, str | None]]:
    """Settings where a process's environment differs from what compose passes the role:
    name -> (compose's value, the process's); `extra_env` left out (a caller's own choice)."""
    want = cluster.compose_env(role)
    got = {**want, **cluster.local_overrides(role, n)}
    names = set(want) | set(got)
    return {k: (want.get(k), got.get(k)) for k in sorted(names) if want.get(k) != got.get(k)}


# -- `make cluster` -----------------------------------------------------------------------------


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _mib(n: int) -> str:
    return f"{n / 1048576:.0f} MiB"


def describe(c: Cluster) -> str:
    assert c.postgres is not None and c.redis is not None and c.opensearch is not None and c.keys
    admin = next((k for k in c.keys if "admin" in k.get("scopes", [])), c.keys[0])
    lines = [f"vibe-semantic process cluster (docker-compose.yml's distributed profile, no Docker) "
             f"ready in {c.started_in:.1f} s; data in {c.root}, logs in {c.logs}"]
    for i, api in enumerate(c.apis, 1):
        lines.append(f"  API replica {i}   {api.base}   (log {api.log_path})")
    per = c.env_for("worker", 1).get("VIBE_WORKERS", "?")
    lines += [f"  workers         {len(c.celery)} Celery workers, {per} embedding processes each",
              "  beat            1 (reconciler, lifecycle and backfill ticks)",
              f"  PostgreSQL      127.0.0.1:{c.postgres.port} (store of record)",
              f"  Redis           {c.redis.url} (broker, budgets)",
              f"  OpenSearch      {c.opensearch.url} (BM25)",
              "  vectors         qdrant-edge inside each API replica (no Qdrant server)",
              f"  embedder        {c.env_for('api', 1).get('VIBE_EMBEDDER')}",
              f"  admin key       {admin['key']}  (tenant {admin['tenant']}; keys in {c.root / 'api-keys.json'})",
              "  memory          " + ", ".join(f"{name} {_mib(pss)}" for name, (_n, _rss, pss) in c.memory().items())
              + " (PSS)",
              f"  try             curl -s {c.apis[0].base}/semantic/lag -H 'Authorization: Bearer {admin['key']}'",
              "Ctrl-C (or SIGTERM) stops them all."]
    return "\n".join(lines)


def main() -> None:
    """`make cluster`: data in CLUSTER_DATA (data/cluster), API replicas on CLUSTER_PORT (8080)
    and the next port; VIBE_* in the shell are passed as compose would pass them from `.env`
    (e.g. VIBE_EMBEDDER=hash), and nothing else of the shell's VIBE_* reaches the processes."""
    variables = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("VIBE_") or k == "POSTGRES_PASSWORD"}
    keys = json.loads(variables["VIBE_API_KEYS"]) if "VIBE_API_KEYS" in variables else None
    root = Path(os.environ.get("CLUSTER_DATA", "data/cluster"))
    cluster = Cluster(root, keys=keys, variables=variables, api_port=int(os.environ.get("CLUSTER_PORT", "8080")))
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops everything too, not only Ctrl-C
    signal.signal(signal.SIGINT, _interrupt)  # even when started with SIGINT ignored (from a script's `&`)
    try:
        print(f"starting PostgreSQL, Redis, OpenSearch, {cluster.api_replicas} API replicas, "
              f"{cluster.workers} workers and beat (data: {cluster.root})...", flush=True)
        cluster.start()
        print(describe(cluster), flush=True)
        while all(pid_alive(pid) for pid in cluster.processes().values()):
            time.sleep(1)
        print("a process of the cluster exited; stopping the others (logs in "
              f"{cluster.logs} and beside each replica's data dir)", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):  # one clean stop, not an interrupted one
            signal.signal(sig, signal.SIG_IGN)
        print("stopping...", flush=True)
        cluster.stop()
        print("stopped.", flush=True)


if __name__ == "__main__":
    main()
