"""What the sync and async clients share: each API call as a `Call` (method, path, body, whether
it is safe to repeat, how to read the answer), the retry policy, and answer/error handling.

The clients only move bytes and sleep; everything that decides something lives here once.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from httpx_sse import ServerSentEvent

from vibe_semantic_client.answers import (
    Activated,
    CollectionDeleted,
    CollectionSettings,
    Deleted,
    DeletedByFilter,
    Demoted,
    Evicted,
    Explanation,
    KeyCreated,
    Migrating,
    Reindexing,
    Revoked,
    TokenCreated,
    Written,
)
from vibe_semantic_client.errors import Timeout, TransportError, VibeError, error_from_body
from vibe_semantic_client.models import JSON, BulkResult, Event, ReadAnswer, Strategy, parse_event

T = TypeVar("T")
log = logging.getLogger("vibe_semantic_client")
Progress = Callable[[int, int], None]
OnRetry = Callable[[int, float, str], None]
SSE_ACCEPT = {"Accept": "text/event-stream"}
JSON_ACCEPT = {"Accept": "application/json"}
STREAM_END = ("done", "error")


def json_object(data: Any) -> JSON:
    return data if isinstance(data, dict) else {"value": data}


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and how to read its answer. `idempotent`: sending it twice has the effect of
    sending it once, so a 429/503 or a lost connection may be retried."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = True
    headers: Mapping[str, str] = field(default_factory=lambda: JSON_ACCEPT)

    def request_kwargs(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """`headers`: the client's own (key, user agent), sent with every call."""
        kw: dict[str, Any] = {"headers": {**headers, **self.headers}}
        if self.json is not None:
            kw["json"] = self.json
        if self.params:
            kw["params"] = {k: v for k, v in self.params.items() if v is not None}
        return kw


def seg(s: str) -> str:
    """One path segment: ids may hold '/', '?', '#', spaces."""
    return quote(str(s), safe="")


# -- answers and errors ------------------------------------------------------------------------

def retry_after(headers: httpx.Headers) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_for(resp: httpx.Response) -> VibeError:
    """The typed error of a non-2xx answer whose body has been read."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    return error_from_body(body, resp.status_code, retry_after(resp.headers))


def finish(call: Call[T], resp: httpx.Response) -> T:
    if not resp.is_success:
        raise error_for(resp)
    if resp.status_code == 204:  # no body (DELETE /v1/keys/{id})
        return call.parse(None)
    try:
        data = resp.json()
    except ValueError as e:
        raise TransportError(f"the answer to {call.method} {call.path} is not JSON", status=resp.status_code) from e
    return call.parse(data)


def to_event(sse: ServerSentEvent) -> Event | None:
    try:
        data = sse.json() if sse.data else None
    except ValueError as e:
        raise TransportError(f"the {sse.event!r} event's data is not JSON") from e
    return parse_event(sse.event, data, sse.id, sse.retry)


def cut_short() -> TransportError:
    """The body ended without `done` or `error`: the ranking seen so far may not be final."""
    return TransportError("the stream ended before its done event")


def transport_error(e: httpx.TransportError) -> VibeError:
    cls = Timeout if isinstance(e, httpx.TimeoutException) else TransportError
    return cls(f"{type(e).__name__}: {e}")


# -- retries -----------------------------------------------------------------------------------

# Nothing reached the server: safe to send again whatever the method.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
RETRY_STATUSES = (429, 503)


@dataclass(slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a 429/503's Retry-After is a floor. Only idempotent
    calls are retried after the server saw them; a longer Retry-After than `max_retry_after`
    is handed to the caller (as `RateLimited.retry_after`) instead of blocking."""

    retries: int = 3
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    on_retry: OnRetry | None = None

    def _jitter(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_backoff, self.backoff * 2 ** attempt))

    def after_response(self, call: Call[Any], attempt: int, resp: httpx.Response) -> float | None:
        """Seconds to wait before sending `call` again, or None to give this answer back."""
        if resp.status_code not in RETRY_STATUSES or not call.idempotent or attempt >= self.retries:
            return None
        floor = retry_after(resp.headers) or 0.0
        if floor > self.max_retry_after:
            return None
        return self._notify(call, attempt, max(floor, self._jitter(attempt)), f"HTTP {resp.status_code}")

    def after_exception(self, call: Call[Any], attempt: int, e: httpx.TransportError) -> float | None:
        if attempt >= self.retries or not (call.idempotent or isinstance(e, _NOT_SENT)):
            return None
        return self._notify(call, attempt, self._jitter(attempt), type(e).__name__)

    def _notify(self, call: Call[Any], attempt: int, wait: float, reason: str) -> float:
        log.info("retry %d of %s %s in %.2fs after %s", attempt + 1, call.method, call.path, wait, reason)
        if self.on_retry is not None:
            self.on_retry(attempt + 1, wait, reason)
        return wait


# -- the calls ---------------------------------------------------------------------------------

def doc_path(collection: str, doc_id: str | None = None) -> str:
    base = f"/v1/collections/{seg(collection)}/docs"
    return base if doc_id is None else f"{base}/{seg(doc_id)}"


def put(collection: str, doc_id: str, doc: Mapping[str, Any], acl: Sequence[str] | None,
        semantic_intent: str | None) -> Call[Written]:
    body = dict(doc)
    if acl is not None:
        body["_acl"] = list(acl)
    if semantic_intent is not None:
        body["_vibe"] = {**body.get("_vibe", {}), "semantic": {"intent": semantic_intent}}
    return Call("PUT", doc_path(collection, doc_id), Written.from_json, json=body)


def get(collection: str, doc_id: str, include_semantic: bool) -> Call[JSON]:
    include = "semantic" if include_semantic else None
    return Call("GET", doc_path(collection, doc_id), json_object, params={"include": include})


def delete(collection: str, doc_id: str) -> Call[Deleted]:
    return Call("DELETE", doc_path(collection, doc_id), Deleted.from_json)


def _mget_docs(data: Any) -> list[JSON | None]:
    """`{"docs": [...]}` in the order asked; an absent or unreadable id (`found: false`) → None."""
    docs = data.get("docs") if isinstance(data, dict) else None
    out: list[JSON | None] = []
    for d in docs or ():
        found = isinstance(d, dict) and d.get("_found", d.get("found", True)) is not False
        out.append({k: v for k, v in d.items() if k not in ("_found", "found")} if found else None)
    return out


def mget(collection: str, ids: Sequence[str]) -> Call[list[JSON | None]]:
    """Reading is safe to repeat although it is a POST."""
    return Call("POST", doc_path(collection) + ":mget", _mget_docs, json={"ids": list(ids)})


def bulk(collection: str, docs: Sequence[Mapping[str, Any]]) -> Call[JSON]:
    """Idempotent by id: sending a batch again writes the same documents again."""
    return Call("POST", doc_path(collection) + ":bulk", json_object, json={"docs": [dict(d) for d in docs]})


def batches(docs: Iterable[Mapping[str, Any]], size: int) -> tuple[int, Iterator[list[Mapping[str, Any]]]]:
    if size < 1:
        raise ValueError("batch_size must be at least 1")
    items = list(docs)

    def chunks() -> Iterator[list[Mapping[str, Any]]]:
        for i in range(0, len(items), size):
            yield items[i:i + size]
    return len(items), chunks()


@dataclass(slots=True)
class BulkTally:
    """Per-document results of every batch, and the progress callback's figures."""

    total: int
    progress: Progress | None
    done: int = 0
    accepted: int = 0
    rejected: int = 0
    results: list[JSON] = field(default_factory=list)

    def add(self, sent: int, answer: JSON) -> None:
        self.accepted += int(answer.get("accepted", 0))
        self.rejected += int(answer.get("rejected", 0))
        self.results.extend(answer.get("results") or ())
        self.done += sent
        if self.progress is not None:
            self.progress(self.done, self.total)

    def result(self) -> BulkResult:
        return BulkResult(self.accepted, self.rejected, self.results)


# Python-style names of read options → the JSON body's place for them.
_INCLUDE_OPTIONS = {"include_semantic": "semantic", "highlights": "highlights", "fields": "fields"}
_SEMANTIC_OPTIONS = {"k": "k", "domain_hint": "domainHint"}


def read_body(collection: str, q: str, strategy: Strategy, limit: int, options: Mapping[str, Any]) -> JSON:
    """The `/v1/read` body. Options: `filter`, `cursor`, `include={...}`, `semantic={...}`, and the
    shorthands `fields`, `highlights`, `include_semantic`, `k`, `domain_hint`, `query_text`,
    `like=(collection, id[, fields])`, `vector=[...]`, `global_`, `rerank`. Any other option is sent as
    given, so the server refuses what it does not support (an unsupported option is an error, never
    ignored)."""
    opts = dict(options)
    semantic: JSON = {"strategy": strategy, **(opts.pop("semantic", None) or {})}
    include: JSON = dict(opts.pop("include", None) or {})
    for name, key in _INCLUDE_OPTIONS.items():
        if name in opts:
            include[key] = opts.pop(name)
    for name, key in _SEMANTIC_OPTIONS.items():
        if name in opts:
            semantic[key] = opts.pop(name)
    if "query_text" in opts:
        semantic["query"] = {"text": opts.pop("query_text")}
    if "like" in opts:
        coll, doc_id, *fields = opts.pop("like")
        semantic["query"] = {"doc": {"collection": coll, "_id": doc_id, **({"fields": fields[0]} if fields else {})}}
    if "vector" in opts:  # admin diagnostics: the query vector itself
        semantic["query"] = {"vector": [float(x) for x in opts.pop("vector")]}
    if "global_" in opts:
        opts["global"] = opts.pop("global_")
    body: JSON = {"collection": collection, "q": q, "semantic": semantic, "limit": limit}
    if include:
        body["include"] = include
    body.update({k: v for k, v in opts.items() if v is not None})
    return body


def read(body: JSON) -> Call[ReadAnswer]:
    """POST /v1/read changes nothing a second call would not: safe to retry."""
    return Call("POST", "/v1/read", ReadAnswer.from_json, json=body)


def read_stream(body: JSON) -> Call[None]:
    return Call("POST", "/v1/read", lambda _: None, json=body, headers=SSE_ACCEPT)


def explain(explain_id: str) -> Call[Explanation]:
    return Call("GET", f"/v1/explain/{seg(explain_id)}", Explanation.from_json)


# -- admin (scope `admin`); a POST that starts work is never repeated ----------------------------

def admin_get(path: str, parse: Callable[[Any], T], **params: Any) -> Call[T]:
    return Call("GET", path, parse, params=params)


def admin_post(path: str, parse: Callable[[Any], T], body: Mapping[str, Any] | None = None) -> Call[T]:
    payload = {k: v for k, v in (body or {}).items() if v is not None}
    return Call("POST", path, parse, json=payload, idempotent=False)


def demote(collection: str) -> Call[Demoted]:
    return Call("DELETE", "/semantic/promote", Demoted.from_json, params={"collection": collection})


def reindex(collection: str | None, space: str | None, force: bool) -> Call[Reindexing]:
    return admin_post("/semantic/reindex", Reindexing.from_json,
                      {"collection": collection, "space": space, "force": force or None})


def evict(collection: str, idle_seconds: float | None) -> Call[Evicted]:
    return admin_post("/semantic/evict", Evicted.from_json, {"collection": collection, "idleSeconds": idle_seconds})


def create_space(space: str, model: str, dim: int | None, scope: str | None = None) -> Call[Migrating]:
    return admin_post("/semantic/spaces", Migrating.from_json,
                      {"space": space, "model": model, "dim": dim, "scope": scope})


def activate_space(space: str, force: bool) -> Call[Activated]:
    return admin_post(f"/semantic/spaces/{seg(space)}/activate", Activated.from_json, {"force": force or None})


# -- collections ------------------------------------------------------------------------------

def collection_path(collection: str, rest: str = "") -> str:
    return f"/v1/collections/{seg(collection)}{rest}"


def delete_collection(collection: str) -> Call[CollectionDeleted]:
    """Repeating it reports progress (202 `deleting`) or resumes an interrupted delete: idempotent."""
    return Call("DELETE", collection_path(collection), CollectionDeleted.from_json)


def delete_by_filter(collection: str, filter: Mapping[str, Any], limit: int | None,
                     after: str | None) -> Call[DeletedByFilter]:
    body = {"filter": dict(filter), "limit": limit, "after": after}
    return Call("POST", collection_path(collection, "/docs:deleteByFilter"), DeletedByFilter.from_json,
                json={k: v for k, v in body.items() if v is not None}, idempotent=False)


# The settings' Python names → their JSON names (the JSON names are accepted as well).
_SETTINGS = {"embed_fields": "embedFields", "filterable_fields": "filterableFields"}


def put_collection_settings(collection: str, settings: Mapping[str, Any]) -> Call[CollectionSettings]:
    body = {_SETTINGS.get(k, k): v for k, v in settings.items()}
    return Call("PUT", collection_path(collection, "/settings"), CollectionSettings.from_json, json=body)


# -- keys and end-user tokens (never repeated: a second call would make a second key or token) ---

def create_key(name: str, principals: Sequence[str], scopes: Sequence[str],
               certs: Sequence[str] | None) -> Call[KeyCreated]:
    return admin_post("/v1/keys", KeyCreated.from_json, {
        "name": name, "principals": list(principals), "scopes": list(scopes),
        "certs": list(certs) if certs is not None else None})


def revoke_key(key_id: str) -> Call[Revoked]:
    """Answered 204 without a body; revoking twice answers 404, so it is not retried either."""
    return Call("DELETE", f"/v1/keys/{seg(key_id)}", lambda _: Revoked.from_json({"id": key_id, "revoked": True}),
                idempotent=False)


def create_token(principals: Sequence[str] | None, certs: Sequence[str] | None, scopes: Sequence[str] | None,
                 ttl_seconds: int | None, filter: Mapping[str, Any] | None) -> Call[TokenCreated]:
    return admin_post("/v1/tokens", TokenCreated.from_json, {
        "principals": list(principals) if principals is not None else None,
        "certs": list(certs) if certs is not None else None, "scopes": list(scopes) if scopes is not None else None,
        "ttlSeconds": ttl_seconds, "filter": dict(filter) if filter is not None else None})


def client_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": "vibe-semantic-client-python/0.2.0"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers
