"""One path for every tool call: authenticate, check the scope, validate the arguments, run
the pre-call (billing) check, do the work, map failures to typed errors, count and time the
call (tool_calls_total, tool_call_seconds), log counters (never text) and write the audit log
(with MCP_NO_LOG: the counters only, no log line and no audit row).

Storage failures of any store (SQLite, PostgreSQL, Redis, the engines) leave as `db_error`
(the code inner_voice clients handle), never as SDK text or a stack trace."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from mcp_types import CallToolResult, TextContent

from services.mcp.errors import DB_ERROR, ToolFailure, forbidden
from services.mcp.runtime import Caller, ToolRuntime, owner_id
from shared.agent_ports import AuditRecord, PreCallDenied
from shared.errors import ErrorCode, VibeError
from shared.metrics import METRICS
from shared.model import Principal
from shared.tenant_metrics import TENANT_METRICS

log = logging.getLogger("vibe.mcp")

@dataclass
class ListResult:
    """A tool whose contract returns a list (extract_key_info's `[]string`): one text block per item,
    structured content `{"result": items}` (the MCP SDK's shape for a list return) and the
    other facts in `_meta`."""

    items: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


Work = Callable[[Caller], dict[str, Any] | ListResult]
Check = Callable[[Caller], object]


def ok(body: dict[str, Any] | ListResult) -> CallToolResult:
    if isinstance(body, ListResult):
        return CallToolResult(content=[TextContent(type="text", text=t) for t in body.items],
                              structured_content={"result": body.items}, _meta=body.meta or None)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body)


def _storage_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean "a store failed": SQLite and Redis always; PostgreSQL, and
    the engines' clients, when installed."""
    kinds: list[type[BaseException]] = [sqlite3.Error, redis.RedisError]
    try:
        import psycopg

        kinds.append(psycopg.Error)
    except ImportError:  # pragma: no cover - the embedded profile may lack it
        pass
    try:
        import opensearchpy

        kinds.append(opensearchpy.exceptions.ConnectionError)
        kinds.append(opensearchpy.exceptions.TransportError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(kinds)


STORAGE_ERRORS = _storage_errors()


def failed(e: ToolFailure) -> CallToolResult:
    body = e.body()
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body,
                          is_error=True)


def _failure(e: Exception, tool: str, quiet: bool = False) -> ToolFailure:
    """`quiet` (MCP_NO_LOG): the failure is still counted by outcome, but not logged."""
    if isinstance(e, ToolFailure):
        return e
    if isinstance(e, VibeError):
        return ToolFailure.of(e)
    if isinstance(e, PreCallDenied):
        return forbidden(f"refused by the pre-call check: {str(e)[:200]}")
    if isinstance(e, STORAGE_ERRORS):  # the store, an index, the registry or the audit log
        if not quiet:
            log.warning("tool storage error", extra={"tool": tool, "error": type(e).__name__})
        return ToolFailure(DB_ERROR, "the store failed; try again")
    if not quiet:
        log.exception("tool crashed", extra={"tool": tool})
    return ToolFailure(ErrorCode.INTERNAL_ERROR.code, "internal error")


def invoke(rt: ToolRuntime, headers: Mapping[str, str] | None, tool: str, scope: str,
           audit_params: dict[str, Any], work: Work, task: str | None = None,
           check: Check | None = None) -> CallToolResult:
    """`check` validates the arguments (raising invalid_params) BEFORE the pre-call hook, so a
    refused call is never billed."""
    started = time.perf_counter()
    principal: Principal | None = None
    key = ""
    outcome, count = "ok", None
    try:
        caller = rt.caller(headers, scope)
        principal, key = caller.principal, caller.key
        if check is not None:
            check(caller)
        rt.precall(principal.tenant, owner_id(principal), tool, audit_params)
        body = work(caller)
        if isinstance(body, ListResult):
            count = len(body.items)
        else:
            count = body.get("count") if isinstance(body.get("count"), int) else None
        return ok(body)
    except Exception as e:  # every failure leaves as a typed error, never a stack trace
        fail = _failure(e, tool, quiet=rt.settings.mcp_no_log)
        outcome = fail.code
        return failed(fail)
    finally:
        ms = (time.perf_counter() - started) * 1000
        METRICS.tool_calls.labels(tool=tool, outcome=outcome).inc()
        METRICS.tool_call_seconds.labels(tool=tool).observe(ms / 1000)
        TENANT_METRICS.tool_call(tool, outcome, principal.tenant if principal is not None else None)
        _log(rt, tool, outcome, ms, count)
        # MCP_NO_LOG: counters only, so no audit row either (it holds the caller, the
        # parameters' sizes and the outcome: more than a counter).
        if principal is not None and not rt.settings.mcp_no_log:
            rt.audit.record(AuditRecord(tool, principal.tenant, owner_id(principal), audit_params, outcome, ms,
                                        task, count, {"key": key[:16]}))


def _log(rt: ToolRuntime, tool: str, outcome: str, ms: float, count: int | None) -> None:
    if rt.settings.mcp_no_log:
        return  # MCP_NO_LOG (inner_voice's switch): nothing beyond what the metrics count
    log.info("tool call", extra={"tool": tool, "outcome": outcome, "latency_ms": round(ms, 3), "count": count})
