"""A private single-node OpenSearch 2.19 (never a machine-wide server), for tests, `make opensearch`
and `make cluster`.

The node is `deploy/opensearch-dev/` (a small Java launcher over Maven Central's
`org.opensearch:opensearch`, `transport-netty4-client` and `analysis-common`), built once with
Maven into `deploy/opensearch-dev/target/` and reused while its sources are unchanged. It binds
127.0.0.1 only; port 0 lets it pick a free port, which it prints and writes to
`<home>/logs/http.ports`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from harness.locks import path_lock
from harness.server import end_process

PROJECT = Path(__file__).resolve().parents[1] / "deploy" / "opensearch-dev"
TARGET = PROJECT / "target"
MAIN_CLASS = "vibe.devnode.DevNode"
# What the distribution's launcher passes too (SystemJvmOptions), minus what only Bootstrap reads.
JVM_FLAGS = ("-Dfile.encoding=UTF-8", "-Djava.awt.headless=true", "-Djna.nosys=true",
             "-Dlog4j.shutdownHookEnabled=false", "-Dlog4j2.disable.jmx=true", "-XX:-OmitStackTraceInFastThrow",
             "-XX:+UseSerialGC")
DEFAULT_HEAP = "512m"


class OpenSearchUnavailable(RuntimeError):
    """No JDK or Maven here, or the build could not fetch its artifacts."""


def _sources() -> list[Path]:
    return [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*"))]


def _stamp() -> Path:
    return TARGET / ".built"


def built() -> bool:
    stamp = _stamp()
    if not stamp.exists() or not (TARGET / "lib").is_dir():
        return False
    newest = max(p.stat().st_mtime for p in _sources() if p.is_file())
    return stamp.stat().st_mtime >= newest


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise OpenSearchUnavailable("no `java` on PATH (apt-get install -y openjdk-17-jdk-headless)")
    return found


def build(quiet: bool = True) -> None:
    """`mvn package` once; later calls are free while the launcher's sources are unchanged.
    One process builds at a time (pytest-xdist workers each start a node); the others wait for it."""
    if built():
        return
    with path_lock(TARGET):
        if not built():
            _build(quiet)


def _build(quiet: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise OpenSearchUnavailable("no `mvn` on PATH (apt-get install -y maven)")
    java()
    print("building the OpenSearch dev node (Maven; the first build downloads ~45 MB of jars)...",
          file=sys.stderr, flush=True)
    cmd = [mvn, "-B", "package", *(["-q"] if quiet else [])]
    done = subprocess.run(cmd, cwd=PROJECT, capture_output=quiet, text=True)
    if done.returncode != 0:
        tail = ((done.stdout or "") + (done.stderr or ""))[-3000:]
        raise OpenSearchUnavailable(f"`mvn package` in {PROJECT} failed ({done.returncode}):\n{tail}")
    _stamp().touch()


def command(home: Path, port: int, heap: str = DEFAULT_HEAP) -> list[str]:
    classpath = os.pathsep.join([str(TARGET / "classes"), str(TARGET / "lib" / "*")])
    return [java(), f"-Xms{heap}", f"-Xmx{heap}", *JVM_FLAGS, "-cp", classpath, MAIN_CLASS, str(home), str(port)]


def get_json(url: str, timeout: float = 2) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return dict(json.loads(r.read()))


class OpenSearchNode:
    """One node process on `home` (its data survives a `stop()` + `start()`: a restart)."""

    def __init__(self, home: Path, port: int = 0, heap: str = DEFAULT_HEAP):
        self.home = home
        self.requested_port = port
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.log_path = home / "node.log"

    def start(self, timeout: float = 120) -> OpenSearchNode:
        build()
        self.home.mkdir(parents=True, exist_ok=True)
        ports = self.home / "logs" / "http.ports"
        ports.unlink(missing_ok=True)
        port = self.requested_port or (int(self.url.rsplit(":", 1)[1]) if self.url else 0)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(command(self.home, port, self.heap), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self._wait_ready(ports, timeout)
        return self

    def _wait_ready(self, ports: Path, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"OpenSearch exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            if ports.exists() and ports.read_text().strip():
                self.url = "http://" + ports.read_text().split()[0]
                with contextlib.suppress(OSError, ValueError):
                    health = get_json(f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=1s")
                    if health.get("status") in ("green", "yellow"):
                        return
            time.sleep(0.1)
        raise RuntimeError("OpenSearch did not become ready:\n" + self.log()[-3000:])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM closes the node through its shutdown hook; SIGKILL is a crash."""
        if self.proc is not None:
            end_process(self.proc, sig, grace=30)
            self.proc = None


@contextlib.contextmanager
def opensearch_node(home: Path | None = None, port: int = 0) -> Iterator[OpenSearchNode]:
    """A node on a fresh temp dir (removed afterwards) unless `home` is given."""
    root = home or Path(tempfile.mkdtemp(prefix="vibe-os-"))
    node = OpenSearchNode(root, port)
    try:
        yield node.start()
    finally:
        node.stop()
        if home is None:
            shutil.rmtree(root, ignore_errors=True)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """`make opensearch`: a node in the foreground on OPENSEARCH_PORT (9200) with its data in
    OPENSEARCH_DATA (data/opensearch); Ctrl-C stops it."""
    port = int(os.environ.get("OPENSEARCH_PORT", "9200"))
    home = Path(os.environ.get("OPENSEARCH_DATA", "data/opensearch")).resolve()
    heap = os.environ.get("OPENSEARCH_HEAP", "1g")
    started = time.monotonic()
    node = OpenSearchNode(home, port, heap)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the node too, not only Ctrl-C
    try:
        node.start()
        version = get_json(node.url)["version"]["number"]  # type: ignore[index]
        print(f"OpenSearch {version} ready at {node.url} "
              f"in {time.monotonic() - started:.1f} s (data: {home}, log: {node.log_path}); Ctrl-C stops it",
              flush=True)
        assert node.proc is not None
        node.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()


if __name__ == "__main__":
    main()
