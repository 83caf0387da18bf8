"""`vibe-semantic read`: POST /v1/read as an event stream, printed as each event arrives.

httpx and httpx-sse directly: the Python SDK is a separate distribution that the server
package does not depend on, and `--json` wants each event's data exactly as sent."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
from httpx_sse import SSEError, connect_sse

STRATEGIES = ("auto", "keyword", "semantic", "hybrid")
END = ("done", "error")
_CONNECT_SECONDS = 5.0

Echo = Callable[[str], None]
Event = tuple[str, str | None, Any]


class ReadFailed(Exception):
    """The read did not complete: unreachable server, an error answer or event, a cut stream."""


def _error_text(resp: httpx.Response) -> str:
    try:
        err = resp.json()["error"]
        return f"{resp.status_code} {err['code']}: {err['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{resp.status_code} {resp.reason_phrase}"


def events(base: str, key: str, body: Mapping[str, Any], timeout: float) -> Iterator[Event]:
    """(event name, SSE id, decoded data) until `done` or `error`; ReadFailed otherwise."""
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=base, timeout=httpx.Timeout(timeout, connect=_CONNECT_SECONDS)) as client, \
                connect_sse(client, "POST", "/v1/read", json=dict(body), headers=headers) as source:
            if not source.response.is_success:
                source.response.read()
                raise ReadFailed(_error_text(source.response))
            for sse in source.iter_sse():
                if not sse.event or not sse.data:  # a bare `retry:` hint
                    continue
                yield sse.event, sse.id or None, json.loads(sse.data)
                if sse.event in END:
                    return
    except (httpx.HTTPError, SSEError) as e:
        raise ReadFailed(f"{base}: {type(e).__name__}: {e}") from e
    raise ReadFailed("the stream ended before its done event")


def _ranking(data: Mapping[str, Any]) -> list[str]:
    rows = []
    for n, hit in enumerate(data.get("results") or (), 1):
        by = "+".join(hit.get("matchedBy") or ())
        rows.append(f"  {n:>3}. {hit.get('score', 0):.3f}  {hit.get('collection', '')}/{hit.get('id', '')}  [{by}]")
    return rows


def render(name: str, data: Any) -> list[str]:
    """An event as lines for a person to read."""
    if name == "warming":
        return [f"warming: {data.get('queued', 0)} document(s) being embedded"]
    if name == "error":
        return [f"error: {data.get('code', '')}: {data.get('message', '')}"]
    titles = {"lexical": "lexical ranking (first answer)", "semantic": "semantic re-ranking", "done": "done"}
    head = f"{titles.get(name, name)}: {len(data.get('results') or ())} result(s), strategy {data.get('strategy', '?')}"
    return [head, *_ranking(data)]


def print_stream(base: str, key: str, body: Mapping[str, Any], raw: bool, timeout: float, echo: Echo) -> None:
    for name, event_id, data in events(base, key, body, timeout):
        if raw:
            echo(json.dumps({"event": name, "id": event_id, "data": data}))
        else:
            for line in render(name, data):
                echo(line)
        if name == "error":
            raise ReadFailed(f"{data.get('code', '')}: {data.get('message', '')}")
