"""What every tool call needs: the core Container, who is calling, the citation registry,
the audit log and the pre-call check. One runtime per process (stdio or the API's /mcp).

The caller is decided exactly as for HTTP: over streamable HTTP by the request's bearer key,
over stdio by `VIBE_MCP_KEY` (or the local dev key when no keys are configured). A `Caller`
also carries `key`, an HMAC of the bearer key under the server secret (services/mcp/secret.py):
what a tool keeps per API key (extract_key_info materials, their budget) is keyed by it.
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
from services.mcp.secret import key_ref, server_secret
from services.wiring import Container
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.adapters.mcp_audit_sqlite import SqliteAuditLog, SqliteMaterialBudget
from shared.agent_ports import AuditLog, CitationRegistry, MaterialBudget, PreCallCheck
from shared.config import Settings
from shared.errors import ErrorCode
from shared.model import Principal

log = logging.getLogger("vibe.mcp")


def owner_id(p: Principal) -> str:
    """A stable, opaque id of one identity (tenant + principals): conversations belong to it
    (another identity never sees them) and the audit log names it. Task materials belong to
    one API key instead (Caller.key)."""
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


@dataclass(frozen=True)
class Caller:
    principal: Principal
    key: str  # key_ref of the bearer key: opaque, per API key, never the key itself


@dataclass
class ToolRuntime:
    container: Container
    keys: KeyRing
    citations: CitationRegistry
    audit: AuditLog
    precall: PreCallCheck
    budget: MaterialBudget
    secret: bytes
    fixed: Caller | None = None  # stdio: the one key this process acts as

    @property
    def settings(self) -> Settings:
        return self.container.settings

    def caller(self, headers: Mapping[str, str] | None, scope: str) -> Caller:
        c = self.fixed or self._from_headers(headers)
        if not c.principal.may(scope):
            raise forbidden(f"this key lacks the '{scope}' scope")
        return c

    def _from_headers(self, headers: Mapping[str, str] | None) -> Caller:
        scheme, _, token = (headers or {}).get("authorization", "").partition(" ")
        token = token.strip()
        found = self.keys.lookup(token) if scheme.lower() == "bearer" and token else None
        if found is None:
            raise ToolFailure(ErrorCode.UNAUTHORIZED.code, "missing or unknown bearer key")
        return Caller(found, key_ref(self.secret, token))

    def close(self) -> None:
        self.citations.close()
        self.audit.close()
        self.budget.close()


def _citations(s: Settings) -> CitationRegistry:
    """Redis when API processes scale out (the Celery queue means Redis is there anyway);
    SQLite in the data dir otherwise. Both keep numbers across restarts."""
    if s.queue == "celery":
        from shared.adapters.citations_redis import RedisCitationRegistry

        return RedisCitationRegistry.from_settings(s)
    return SqliteCitationRegistry(s.data_dir / "mcp_citations.sqlite3")


def build_runtime(container: Container, keys: KeyRing, fixed: tuple[Principal, str] | None = None) -> ToolRuntime:
    """`fixed`: the (principal, bearer key) a stdio server acts as."""
    s = container.settings
    secret = server_secret(s)
    audit_path = s.data_dir / "mcp_audit.sqlite3"
    caller = Caller(fixed[0], key_ref(secret, fixed[1])) if fixed else None
    return ToolRuntime(container, keys, _citations(s), SqliteAuditLog(audit_path), load_precall(s.mcp_precall_check),
                       SqliteMaterialBudget(audit_path), secret, caller)
