"""Readiness: whether a port's adapter can serve right now (GET /readyz).

An adapter that can tell implements `check_ready`; the check must be cheap (a ping, a file
system look), because a balancer calls /readyz every few seconds on every replica."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol, runtime_checkable

_CREDENTIALS = re.compile(r"(?<=//)[^/@\s]+@")
MAX_REASON_CHARS = 200


@runtime_checkable
class ReadinessCheck(Protocol):
    def check_ready(self) -> None:
        """Return when this part can serve now; raise, with a message fit to show anyone who can
        reach /readyz, when it cannot."""


class NotReady(RuntimeError):
    """A part that answers, but says it cannot serve (a stopped worker pool, a missing folder)."""


def reason(exc: BaseException) -> str:
    """Why a check failed, safe to answer without a key: the exception's type and message, with
    any `user:password@` of a URL cut out and the length bounded (a driver's message may quote
    the URL it was given)."""
    text = _CREDENTIALS.sub("***@", f"{type(exc).__name__}: {exc}".strip())
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 1] + "…"


def folder_ready(path: Path) -> None:
    """An embedded index's folder (or, before its first write, the nearest folder above it that
    exists) can be listed and written: what a full disk's remount read-only or a lost volume
    takes away."""
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        raise NotReady(f"{here} is not a folder")
    if not os.access(here, os.R_OK | os.W_OK | os.X_OK):
        raise NotReady(f"{here} is not readable and writable by this process")
