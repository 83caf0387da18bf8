"""Drive the MCP tools through the official `mcp` client, over stdio (spawning
`python -m services.cli mcp`) or streamable HTTP (a served app's /mcp), from sync tests.

`McpClient` keeps one client session open in a background event loop: the session is
entered and left by one long-lived task (anyio cancel scopes demand it), and each `call()`
runs as its own task on that loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from harness.server import KEYS, REPO


def stdio_env(data_dir: Path, key: str = "k-alice", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "LANG", "PYTHON"))}
    env.update({"VIBE_DATA_DIR": str(data_dir), "VIBE_EMBEDDER": "hash", "VIBE_API_KEYS": json.dumps(KEYS),
                "VIBE_MCP_KEY": key, "HF_HUB_OFFLINE": "1"})
    env.update(extra)
    return env


class McpClient:
    def __init__(self, target: StdioServerParameters | str, key: str | None = None):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ready: Future[Client] = Future()
        self._stop: asyncio.Event | None = None
        self._done = asyncio.run_coroutine_threadsafe(self._hold(target, key), self._loop)
        self.client = self._ready.result(timeout=120)

    async def _hold(self, target: StdioServerParameters | str, key: str | None) -> None:
        self._stop = asyncio.Event()
        if isinstance(target, str):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            client = Client(streamable_http_client(target, http_client=http))
        else:
            client = Client(target, read_timeout_seconds=120)
        try:
            async with client:
                self._ready.set_result(client)
                await self._stop.wait()
        except BaseException as e:  # surface start-up failures to the test
            if not self._ready.done():
                self._ready.set_exception(e)
            raise

    def raw(self, name: str, args: dict[str, Any] | None = None) -> CallToolResult:
        fut = asyncio.run_coroutine_threadsafe(self.client.call_tool(name, args or {}), self._loop)
        return fut.result(timeout=120)

    def call(self, name: str, args: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
        """(is_error, JSON body) of one tool call: the structured content (a list-returning tool,
        extract_key_info, gives `{"result": [...]}`), else the first text block as JSON."""
        res = self.raw(name, args)
        if res.structured_content is not None:
            return bool(res.is_error), dict(res.structured_content)
        text = res.content[0].text if res.content else "{}"  # type: ignore[union-attr]
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            body = {"raw": text}
        return bool(res.is_error), body

    def extract(self, args: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        """extract_key_info's contexts (a list of strings, one text block each) and the
        facts in the result's `_meta`."""
        res = self.raw("extract_key_info", args)
        assert not res.is_error, res.content
        texts = [c.text for c in res.content]  # type: ignore[union-attr]
        assert res.structured_content == {"result": texts}
        return texts, dict((res.meta or {}).get("vibe/extract_key_info", {}))

    def ok(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        err, body = self.call(name, args)
        assert not err, body
        return body

    def error(self, name: str, args: dict[str, Any] | None = None) -> str:
        err, body = self.call(name, args)
        assert err, body
        return str(body.get("error", {}).get("code", body))

    def schemas(self) -> dict[str, dict[str, Any]]:
        """Each listed tool's input JSON schema."""
        fut = asyncio.run_coroutine_threadsafe(self.client.list_tools(), self._loop)
        return {t.name: t.input_schema for t in fut.result(timeout=60).tools}

    def tools(self) -> list[str]:
        fut = asyncio.run_coroutine_threadsafe(self.client.list_tools(), self._loop)
        return [t.name for t in fut.result(timeout=60).tools]

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._done.result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)


def stdio(data_dir: Path, key: str = "k-alice", cwd: Path | None = None, **extra: str) -> McpClient:
    params = StdioServerParameters(command=sys.executable, args=["-m", "services.cli", "mcp"],
                                   env=stdio_env(data_dir, key, **extra), cwd=str(cwd or REPO))
    return McpClient(params)


def http(base: str, key: str | None) -> McpClient:
    return McpClient(f"{base}/mcp", key)
