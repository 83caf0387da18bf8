"""Locks shared by every process on the machine (pytest-xdist workers, two runs side by side),
for the few steps that write into the checkout: building deploy/opensearch-dev/target and
sdk/typescript/dist."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def _lock_file(path: Path) -> Path:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"vibe-tests-{path.name}-{digest}.lock"


@contextlib.contextmanager
def path_lock(path: Path) -> Iterator[None]:
    """Held alone while the body writes under `path`; released when the holder exits, even by a crash."""
    with _lock_file(path).open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def build_then_use(path: Path, build: Callable[[], T]) -> Iterator[T]:
    """`build()` what lives under `path` holding the lock alone, then share the lock while the body
    uses it: another process's rebuild waits until no one is using it, rather than rewriting files
    under tests that are reading them. (POSIX record locks: turning the write lock into a read lock
    is atomic, so no rebuild slips in between.)"""
    with _lock_file(path).open("a+") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        try:
            built = build()
            fcntl.lockf(f, fcntl.LOCK_SH)
            yield built
        finally:
            fcntl.lockf(f, fcntl.LOCK_UN)
