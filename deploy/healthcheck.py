"""Container health checks for the image's own processes: `vibe-healthcheck api|worker`.

The slim image has no curl; this uses the standard library, and reads its configuration the
way the services do (`Settings`, env prefix VIBE_), so the check follows VIBE_PORT and
VIBE_REDIS_URL instead of repeating them in docker-compose.yml.

- api: GET http://127.0.0.1:$VIBE_PORT/healthz answers 200.
- worker: a Celery `ping` over the broker is answered by a worker of THIS container (workers
  name themselves `vibe-<pid>@<hostname>`), i.e. its consumer is connected and not wedged.
Exit status 0 = healthy, 1 = unhealthy (Docker's convention).
"""

from __future__ import annotations

import socket
import sys
import urllib.request

from shared.config import Settings


def api(settings: Settings, timeout: float = 3.0) -> bool:
    url = f"http://127.0.0.1:{settings.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def worker(settings: Settings, timeout: float = 3.0) -> bool:
    from shared.adapters.celery_queue import make_celery

    suffix = "@" + socket.gethostname()
    try:
        replies = make_celery(settings).control.ping(timeout=timeout) or []
    except Exception:  # broker unreachable: the worker cannot work either
        return False
    return any(name.endswith(suffix) for reply in replies for name in reply)


CHECKS = {"api": api, "worker": worker}


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[1] not in CHECKS:
        print(f"usage: vibe-healthcheck {'|'.join(CHECKS)} [timeout seconds, default 3]", file=sys.stderr)
        return 2
    timeout = float(argv[2]) if len(argv) == 3 else 3.0
    return 0 if CHECKS[argv[1]](Settings(), timeout) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
