"""A private `redis-server` on a free port (never the machine's 6379), for tests and benches.

No persistence: `stop()` followed by `start()` is a broker that lost everything it held,
which is the harder case for the reconciler."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import redis

from harness.server import end_process, free_port


class RedisServer:
    def __init__(self, workdir: Path, port: int | None = None, extra_args: Sequence[str] = ()):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.binary = binary
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        # after the defaults, so they win (redis takes the last value of an option): e.g. the
        # compose file's `--appendonly yes` for the process cluster (harness/cluster.py)
        self.extra_args = list(extra_args)
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.workdir), "--protected-mode", "no", *self.extra_args]
        log = (self.workdir / f"redis-{self.port}.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 20) -> None:
        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=5)

    def stop(self) -> None:
        if self.proc is None:
            return
        end_process(self.proc)
        self.proc = None


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir).start()
    try:
        yield server
    finally:
        server.stop()
