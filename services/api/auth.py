"""Bearer-key authentication: the key decides tenant, principals and scopes (DESIGN.md §5)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from fastapi import Request

from shared.config import ApiKey
from shared.errors import ErrorCode, VibeError
from shared.model import Principal

DEV_KEY_FILE = "dev-key.json"


class KeyRing:
    def __init__(self, keys: list[ApiKey]):
        self._by_key = {k.key: k for k in keys}

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, token: str) -> Principal | None:
        k = self._by_key.get(token)
        if k is None:
            return None
        return Principal(k.tenant, tuple(k.principals), frozenset(k.scopes))


def dev_key(data_dir: Path) -> ApiKey:
    """The local key `serve` creates when no keys are configured; kept across restarts."""
    path = data_dir / DEV_KEY_FILE
    if path.exists():
        return ApiKey.model_validate(json.loads(path.read_text()))
    key = ApiKey(key="vibe-dev-" + secrets.token_urlsafe(18), tenant="default",
                 principals=["user:dev"], scopes=["read", "write", "admin"])
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(key.model_dump_json())
    path.chmod(0o600)
    return key


def principal_of(request: Request) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise VibeError(ErrorCode.UNAUTHORIZED, "missing bearer key")
    found: Principal | None = request.app.state.keys.lookup(token.strip())
    if found is None:
        raise VibeError(ErrorCode.UNAUTHORIZED, "unknown key")
    return found


def require(scope: str) -> Callable[[Request], Coroutine[Any, Any, Principal]]:
    # async: a dictionary lookup, no I/O. FastAPI runs a plain `def` dependency on a worker
    # thread, one more trip through the thread pool (and the GIL) before every keyed request.
    async def dependency(request: Request) -> Principal:
        p = principal_of(request)
        if not p.may(scope):
            raise VibeError(ErrorCode.FORBIDDEN, f"this key lacks the '{scope}' scope")
        return p

    return dependency
