"""Real Celery processes for tests and benches: `python -m services.cli worker|scheduler`,
started as a user would, in their own process group (so `kill -9` can take down the worker
and its pool children together)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.server import REPO

_counter = iter(range(1_000_000))


class CeleryProcess:
    def __init__(self, command: str, env: dict[str, str], log_dir: Path, args: list[str] | None = None):
        self.command = command
        full = dict(os.environ)
        full.update({"HF_HUB_OFFLINE": "1", "VIBE_QUEUE": "celery"})
        full.update(env)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{command}-{next(_counter)}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "services.cli", command, *(args or [])], cwd=REPO,
                                     env=full, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> CeleryProcess:
        """A worker is ready once Celery says so; beat once it has started its loop."""
        marker = "ready." if self.command == "worker" else "beat: Starting"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.command} exited {self.proc.returncode}: {self.log()[-3000:]}")
            if marker in self.log():
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.command} not ready: {self.log()[-3000:]}")

    def kill9(self) -> None:
        """The whole process group at once: the main process and every pool child."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()


def start_worker(env: dict[str, str], log_dir: Path, concurrency: int = 1) -> CeleryProcess:
    return CeleryProcess("worker", env, log_dir, ["--concurrency", str(concurrency)]).wait_ready()


def start_scheduler(env: dict[str, str], log_dir: Path) -> CeleryProcess:
    return CeleryProcess("scheduler", env, log_dir).wait_ready()


@contextlib.contextmanager
def celery_worker(env: dict[str, str], log_dir: Path, concurrency: int = 1) -> Iterator[CeleryProcess]:
    w = start_worker(env, log_dir, concurrency)
    try:
        yield w
    finally:
        w.stop()
