"""Bearer authentication at the HTTP edge: the caller's principal from the request's key or
token (`services.core.keyring` decides what a bearer is), refused without a route's scope."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import Request

from services.core.keyring import KeyRing, token_secret
from shared.errors import ErrorCode, VibeError
from shared.model import Principal

if TYPE_CHECKING:
    from services.container import Container


def bind_keys(keys: KeyRing, c: Container) -> None:
    """API-made keys and end-user tokens, from the store of record."""
    keys.attach(c.key_store(), token_secret(c.settings), c.settings.key_refresh_seconds)


def principal_of(request: Request) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise VibeError(ErrorCode.UNAUTHORIZED, "missing bearer key")
    found: Principal | None = request.app.state.keys.lookup(token.strip())
    if found is None:
        raise VibeError(ErrorCode.UNAUTHORIZED, "unknown, expired or revoked key or token")
    return found


def require(scope: str | None) -> Callable[[Request], Coroutine[Any, Any, Principal]]:
    """The caller's principal, refused without `scope` (None: any valid key or token)."""
    # async: a dictionary lookup, no I/O (but a one-row store read at most every
    # VIBE_KEY_REFRESH_SECONDS). FastAPI runs a plain `def` dependency on a worker thread, one
    # more trip through the thread pool (and the GIL) before every keyed request.
    async def dependency(request: Request) -> Principal:
        p = principal_of(request)
        if scope is not None and not p.may(scope):
            raise VibeError(ErrorCode.FORBIDDEN, f"this key lacks the '{scope}' scope")
        return p

    return dependency
