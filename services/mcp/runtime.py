"""What every tool call needs: the core Container, who is calling, and the agent adapters
(citation registry, audit log, pre-call check, material budget, task ledger, reranker), which
the composition root builds (`Container.agent()`). One runtime per process
(stdio or the API's /mcp).

The caller is decided exactly as for HTTP: over streamable HTTP by the request's bearer key,
over stdio by `VIBE_MCP_KEY` (or the local dev key when no keys are configured). A `Caller`
also carries `key`, an HMAC of the bearer key under the server secret (services/mcp/secret.py):
what a tool keeps per API key (extract_key_info materials, their budget) is keyed by it.

extract_key_info clients' `Authorization: Bearer <identity>@<token>`: with
VIBE_EXTRACT_TASK_FROM_BEARER on (the default), a bearer that is not itself a key but
`<identity>@<key>` authenticates as `<key>`, and `<identity>` becomes the caller's `identity`
(extract_key_info's task when no task_id is given). A stdio server has no header: its
VIBE_MCP_KEY may take the same `<identity>@<key>` form, so a stdio session has an identity too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import blake3

from services.container import Container
from services.core.keyring import KeyRing, split_identity
from services.core.secret import key_ref, server_secret
from services.mcp.errors import ToolFailure, forbidden
from shared.agent_ports import AuditLog, CitationRegistry, MaterialBudget, PreCallCheck, Reranker, TaskLedger
from shared.config import Settings
from shared.errors import ErrorCode
from shared.model import Principal
from shared.tenant_metrics import TENANT_METRICS

log = logging.getLogger("vibe.mcp")

def owner_id(p: Principal) -> str:
    """A stable, opaque id of one identity (tenant + principals, + certificates when it holds
    any): conversations belong to it (another identity never sees them) and the audit log names
    it. A token holding fewer certificates than its key is another identity: it must not list
    what its key cited. Task materials belong to one API key instead (Caller.key)."""
    raw = p.tenant + "\x1f" + "\x1f".join(sorted(p.principals))
    if p.certs:  # identities without certificates keep the ids they always had
        raw += "\x1e" + "\x1f".join(sorted(p.certs))
    return blake3.blake3(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Caller:
    principal: Principal
    key: str  # key_ref of the bearer key: opaque, per API key, never the key itself
    identity: str | None = None  # extract_key_info clients' `Bearer <identity>@<token>` (when enabled)


@dataclass
class ToolRuntime:
    container: Container
    keys: KeyRing
    citations: CitationRegistry
    audit: AuditLog
    precall: PreCallCheck
    budget: MaterialBudget
    tasks: TaskLedger
    reranker: Reranker | None
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
        identity = None
        if found is None and scheme.lower() == "bearer" and self.settings.extract_task_from_bearer:
            identity, token = split_identity(token)
            found = self.keys.lookup(token) if identity is not None else None
        if found is None:
            raise ToolFailure(ErrorCode.UNAUTHORIZED.code, "missing or unknown bearer key")
        return Caller(found, key_ref(self.secret, token), identity)

    def close(self) -> None:
        self.container.close_agent()


def build_runtime(container: Container, keys: KeyRing, fixed: tuple[Principal, str] | None = None,
                  identity: str | None = None) -> ToolRuntime:
    """`fixed`: the (principal, bearer key) a stdio server acts as; `identity`: its
    `<identity>@` part, when VIBE_MCP_KEY had one."""
    secret = server_secret(container.settings)
    TENANT_METRICS.configure(container.settings)
    caller = Caller(fixed[0], key_ref(secret, fixed[1]), identity) if fixed else None
    a = container.agent()
    return ToolRuntime(container, keys, a.citations, a.audit, a.precall, a.budget, a.tasks, a.reranker, secret,
                       caller)
