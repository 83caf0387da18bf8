"""What every tool call needs: the core Container, who is calling, the citation registry,
the audit log and the pre-call check. One runtime per process (stdio or the API's /mcp).

The caller is decided exactly as for HTTP: over streamable HTTP by the request's bearer key,
over stdio by `VIBE_MCP_KEY` (or the local dev key when no keys are configured).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import blake3

from services.api.auth import KeyRing
from services.mcp.errors import ToolFailure, forbidden
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.adapters.mcp_audit_sqlite import SqliteAuditLog
from shared.agent_ports import AuditLog, CitationRegistry, PreCallCheck
from shared.config import Settings
from shared.errors import ErrorCode
from shared.model import Principal
from services.wiring import Container

log = logging.getLogger("vibe.mcp")


def owner_id(p: Principal) -> str:
    """A stable, opaque id of one key's identity (tenant + principals): conversations and
    task materials belong to it, so another key never sees them."""
    raw = p.tenant + "\x1f" + "\x1f".join(sorted(p.principals))
    return blake3.blake3(raw.encode()).hexdigest()[:32]


def allow_all(tenant: str, user: str, tool: str, params: dict[str, Any]) -> None:
    """The default pre-call check: no billing system exists here."""


def load_precall(spec: str | None) -> PreCallCheck:
    if not spec:
        return allow_all
    module, _, attr = spec.partition(":")
    fn = getattr(importlib.import_module(module), attr or "check")
    if not callable(fn):
        raise RuntimeError(f"VIBE_MCP_PRECALL_CHECK {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


@dataclass
class ToolRuntime:
    container: Container
    keys: KeyRing
    citations: CitationRegistry
    audit: AuditLog
    precall: PreCallCheck
    fixed: Principal | None = None  # stdio: the one key this process acts as

    @property
    def settings(self) -> Settings:
        return self.container.settings

    def caller(self, headers: Mapping[str, str] | None, scope: str) -> Principal:
        p = self.fixed or self._from_headers(headers)
        if not p.may(scope):
            raise forbidden(f"this key lacks the '{scope}' scope")
        return p

    def _from_headers(self, headers: Mapping[str, str] | None) -> Principal:
        scheme, _, token = (headers or {}).get("authorization", "").partition(" ")
        found = self.keys.lookup(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if found is None:
            raise ToolFailure(ErrorCode.UNAUTHORIZED.code, "missing or unknown bearer key")
        return found

    def close(self) -> None:
        self.citations.close()
        self.audit.close()


def _citations(s: Settings) -> CitationRegistry:
    """Redis when API processes scale out (the Celery queue means Redis is there anyway);
    SQLite in the data dir otherwise. Both keep numbers across restarts."""
    if s.queue == "celery":
        from shared.adapters.citations_redis import RedisCitationRegistry

        return RedisCitationRegistry.from_settings(s)
    return SqliteCitationRegistry(s.data_dir / "mcp_citations.sqlite3")


def build_runtime(container: Container, keys: KeyRing, fixed: Principal | None = None) -> ToolRuntime:
    s = container.settings
    return ToolRuntime(container, keys, _citations(s),
                       SqliteAuditLog(s.data_dir / "mcp_audit.sqlite3"), load_precall(s.mcp_precall_check), fixed)
