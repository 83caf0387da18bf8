"""A private PostgreSQL cluster (never the machine's own server on 5432), for tests and benches.

`initdb` into a fresh temp dir, then `postgres` on a free 127.0.0.1 port with its unix socket in
that dir, trust auth and no fsync (the data is thrown away at the end). PostgreSQL refuses to
run as root, so under euid 0 both run as the `postgres` system user (or `nobody`), and the temp
dir is theirs: pytest's own tmp dirs are root-only (0700), which that user could not enter."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from harness.server import end_process, free_port

SUPERUSER = "postgres"


def find_bindir() -> Path | None:
    """The folder holding initdb and postgres: PATH first, then the newest Debian/Ubuntu
    /usr/lib/postgresql/<version>/bin."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(os.path.realpath(initdb)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _run_as() -> dict[str, Any]:
    """Popen arguments that drop root to an unprivileged system user (no PAM, no extra process:
    the pid we hold is postgres itself)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pw = pwd.getpwnam(name)
            return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root and neither a `postgres` nor a `nobody` user exists")


class PostgresServer:
    def __init__(self, bindir: Path, root: Path | None = None, port: int | None = None):
        """`root`: a folder kept across stop() and start() (the process cluster's data, initdb
        only the first time); by default a temp dir removed by stop()."""
        self.bindir = bindir
        self.port = port or free_port()
        self.keep = root is not None
        self.root = root or Path(tempfile.mkdtemp(prefix="vibe-pg-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.datadir = self.root / "data"
        self.log_path = self.root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._as = _run_as()
        if self._as:
            os.chown(self.root, self._as["user"], self._as["group"])

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> PostgresServer:
        if (self.datadir / "PG_VERSION").exists():  # a kept cluster: start it again
            self.launch()
            return self
        subprocess.run([str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", SUPERUSER, "--auth=trust",
                        "-E", "UTF8", "--locale=C", "--no-sync"],
                       check=True, capture_output=True, cwd=self.root, **self._as)
        self.launch()
        return self

    def launch(self) -> None:
        """Run the server on the existing data dir and wait until it accepts connections."""
        args = [str(self.bindir / "postgres"), "-D", str(self.datadir), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.root}",
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                                         start_new_session=True, **self._as)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.log()[-2000:]}")
            with contextlib.suppress(psycopg.OperationalError), psycopg.connect(self.url(), connect_timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError("postgres did not accept connections: " + self.log()[-2000:])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def create_database(self, name: str) -> str:
        """A fresh, empty database (CREATE DATABASE cannot run inside a transaction)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then the temp dir goes (a kept root stays)."""
        if self.proc is not None:
            end_process(self.proc, signal.SIGINT, grace=15)
            self.proc = None
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
    server = PostgresServer(bindir)
    try:
        yield server.start()
    finally:
        server.stop()
