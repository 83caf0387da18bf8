"""The agent tools' adapters (MCP): the citation registry, audit log, material budget, task ledger,
pre-call check and reranker."""

from __future__ import annotations

import importlib
from typing import Any

from services.container import AgentAdapters
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.adapters.mcp_audit_sqlite import SqliteAuditLog, SqliteMaterialBudget, SqliteTaskLedger
from shared.agent_ports import CitationRegistry, PreCallCheck, Reranker
from shared.config import Settings


def allow_all(tenant: str, user: str, tool: str, params: dict[str, Any]) -> None:
    """The default pre-call check: no billing system exists here."""


def load_precall(spec: str | None) -> PreCallCheck:
    """`VIBE_MCP_PRECALL_CHECK=module:attr` (extract_key_info's billing hook), or allow everything."""
    if not spec:
        return allow_all
    module, _, attr = spec.partition(":")
    fn = getattr(importlib.import_module(module), attr or "check")
    if not callable(fn):
        raise RuntimeError(f"VIBE_MCP_PRECALL_CHECK {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def build_citations(s: Settings) -> CitationRegistry:
    """Redis when API processes scale out (the Celery queue means Redis is there anyway);
    SQLite in the data dir otherwise. Both keep numbers across restarts."""
    if s.queue == "celery":
        from shared.adapters.citations_redis import RedisCitationRegistry

        return RedisCitationRegistry.from_settings(s)
    return SqliteCitationRegistry(s.data_dir / "mcp_citations.sqlite3")


def build_reranker(s: Settings) -> Reranker | None:
    if not s.rerank_url:
        return None
    from shared.adapters.rerank_http import HttpReranker

    return HttpReranker(s.rerank_url, s.rerank_model, s.rerank_protocol, s.rerank_api_key, s.rerank_timeout_seconds)


def build_named_rerankers(s: Settings) -> dict[str, Reranker]:
    """The rerankers a read may name (VIBE_RERANK_PROVIDERS), besides `default` (VIBE_RERANK_URL)."""
    from shared.adapters.rerank_http import HttpReranker

    return {name: HttpReranker(p.url, p.model, p.protocol, p.api_key, s.rerank_timeout_seconds)
            for name, p in s.rerank_providers.items()}


def build_agent_adapters(s: Settings) -> AgentAdapters:
    audit_path = s.data_dir / "mcp_audit.sqlite3"
    return AgentAdapters(build_citations(s), SqliteAuditLog(audit_path), SqliteMaterialBudget(audit_path),
                         SqliteTaskLedger(audit_path), load_precall(s.mcp_precall_check), build_reranker(s))
