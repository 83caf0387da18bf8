"""One path for every tool call: authenticate, check the scope, run the pre-call check, do
the work, map failures to typed errors, log counters (never text) and write the audit log."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
from mcp_types import CallToolResult, TextContent

from services.mcp.errors import DB_ERROR, ToolFailure, forbidden
from services.mcp.runtime import Caller, ToolRuntime, owner_id
from shared.agent_ports import AuditRecord, PreCallDenied
from shared.errors import ErrorCode, VibeError
from shared.model import Principal

log = logging.getLogger("vibe.mcp")

Work = Callable[[Caller], dict[str, Any]]


def ok(body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body)


def failed(e: ToolFailure) -> CallToolResult:
    body = e.body()
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body,
                          is_error=True)


def _failure(e: Exception, tool: str) -> ToolFailure:
    if isinstance(e, ToolFailure):
        return e
    if isinstance(e, VibeError):
        return ToolFailure.of(e)
    if isinstance(e, PreCallDenied):
        return forbidden(f"refused by the pre-call check: {str(e)[:200]}")
    if isinstance(e, sqlite3.Error | redis.RedisError):  # the registry's or audit log's store
        log.warning("tool storage error", extra={"tool": tool, "error": type(e).__name__})
        return ToolFailure(DB_ERROR, "the store failed; try again")
    log.exception("tool crashed", extra={"tool": tool})
    return ToolFailure(ErrorCode.INTERNAL_ERROR.code, "internal error")


def invoke(rt: ToolRuntime, headers: Mapping[str, str] | None, tool: str, scope: str,
           audit_params: dict[str, Any], work: Work, task: str | None = None) -> CallToolResult:
    started = time.perf_counter()
    principal: Principal | None = None
    key = ""
    outcome, count = "ok", None
    try:
        caller = rt.caller(headers, scope)
        principal, key = caller.principal, caller.key
        rt.precall(principal.tenant, owner_id(principal), tool, audit_params)
        body = work(caller)
        count = body.get("count") if isinstance(body.get("count"), int) else None
        return ok(body)
    except Exception as e:  # every failure leaves as a typed error, never a stack trace
        fail = _failure(e, tool)
        outcome = fail.code
        return failed(fail)
    finally:
        ms = (time.perf_counter() - started) * 1000
        _log(rt, tool, outcome, ms, count)
        if principal is not None:
            rt.audit.record(AuditRecord(tool, principal.tenant, owner_id(principal), audit_params, outcome, ms,
                                        task, count, {"key": key[:16]}))


def _log(rt: ToolRuntime, tool: str, outcome: str, ms: float, count: int | None) -> None:
    if rt.settings.mcp_no_log:
        return  # seed 000 MCP_NO_LOG: nothing beyond what the audit log and metrics keep
    log.info("tool call", extra={"tool": tool, "outcome": outcome, "latency_ms": round(ms, 3), "count": count})
