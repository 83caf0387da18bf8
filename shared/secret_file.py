"""A random server secret kept in a file of the data dir, for settings left unset in the
embedded profile (the token-signing secret, the MCP task secret)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from pathlib import Path

log = logging.getLogger("vibe.secrets")


def _create(path: Path) -> None:
    """Written to a private temporary file and then linked into place: a concurrent process
    never reads half a secret, and two first starts agree on one (the second link fails)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def kept_secret(path: Path, what: str) -> bytes:
    """The secret in `path`, made on first use with mode 0600; a file others may read is
    tightened to 0600 with a warning."""
    if not path.exists():
        _create(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning(f"tightening the {what} file to 0600", extra={"path": str(path), "mode": oct(mode)})
        path.chmod(0o600)
    raw = path.read_text().strip()
    if len(raw) < 32:
        raise RuntimeError(f"{path} holds no usable secret; delete it to have a new one made")
    return raw.encode()
