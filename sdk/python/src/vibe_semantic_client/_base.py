"""Settings both clients take the same way (base URL, key, timeout, retries)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypedDict

import httpx

from vibe_semantic_client._core import Call, OnRetry, RetryPolicy, client_headers

DEFAULT_TIMEOUT = 30.0


class ClientOptions(TypedDict, total=False):
    """The keyword options of `Client(...)` and `AsyncClient(...)` (see `ClientConfig`)."""

    timeout: float | httpx.Timeout
    retries: int
    backoff: float
    max_backoff: float
    max_retry_after: float
    on_retry: OnRetry | None
    headers: Mapping[str, str] | None


class ClientConfig:
    """`base_url` and `api_key` default to the environment's VIBE_BASE_URL and VIBE_API_KEY.

    `timeout`: seconds to connect and between bytes of an answer (a stream's heartbeats keep it
    alive), or an `httpx.Timeout`. `retries`: how many times an idempotent call is sent again
    after a 429/503 or a lost connection (0 = never); `backoff`/`max_backoff` shape the
    exponential, jittered wait; `on_retry(attempt, wait_seconds, reason)` sees each retry.
    `http_client`: your own `httpx.Client` / `httpx.AsyncClient` (proxies, TLS, event hooks); the
    SDK still sends its base URL and key with each request, and the timeout is then the client's."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float | httpx.Timeout = DEFAULT_TIMEOUT, retries: int = 3, backoff: float = 0.25,
                 max_backoff: float = 8.0, max_retry_after: float = 60.0, on_retry: OnRetry | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        base_url = base_url or os.environ.get("VIBE_BASE_URL")
        if not base_url:
            raise ValueError("base_url is required (or set VIBE_BASE_URL)")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.base_url = base_url.rstrip("/")
        self.retry = RetryPolicy(retries, backoff, max_backoff, max_retry_after, on_retry)
        # Sent with each request (not set on the httpx client), so a client passed as
        # `http_client` needs no base URL or key of its own.
        self.headers = client_headers(api_key or os.environ.get("VIBE_API_KEY"), headers)
        self.timeout = timeout

    def _request_args(self, call: Call[Any]) -> dict[str, Any]:
        """`httpx.Client.build_request` arguments for `call`."""
        return {"method": call.method, "url": self.base_url + call.path, **call.request_kwargs(self.headers)}
