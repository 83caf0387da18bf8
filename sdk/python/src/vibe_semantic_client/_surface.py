"""The calls that are one request and one answer, written once for both clients.

Each method here only builds a `Call` (what to send, how to read the answer). `endpoint` turns it
into the client's method: on `Client` it sends the call and returns the typed answer, on
`AsyncClient` it returns an awaitable of it. The overloads of `endpoint.__get__` give a type
checker exactly that, so both clients are typed per method without writing each one twice.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload

from vibe_semantic_client import _core as core
from vibe_semantic_client.answers import (
    Activated,
    Backfills,
    CollectionDeleted,
    CollectionList,
    CollectionSettings,
    Coverage,
    DeadLetters,
    Deleted,
    DeletedByFilter,
    Demoted,
    DocStatus,
    Evicted,
    Explanation,
    FollowUpView,
    Health,
    KeyCreated,
    Keys,
    Lag,
    LedgerPage,
    Migrating,
    Mismatch,
    Promoted,
    Promotions,
    QueueDepth,
    Reindexing,
    Revoked,
    SchedulerView,
    Spaces,
    TokenCreated,
    Usage,
    Written,
)
from vibe_semantic_client.models import JSON, ReadAnswer, Strategy

P = ParamSpec("P")
T = TypeVar("T")


class SyncTransport:
    """What `endpoint` needs of the sync client."""

    def _do(self, call: core.Call[T]) -> T:
        raise NotImplementedError


class AsyncTransport:
    """What `endpoint` needs of the async client."""

    async def _do(self, call: core.Call[T]) -> T:
        raise NotImplementedError


class endpoint(Generic[P, T]):  # noqa: N801 - used as a decorator, like `property`
    """A method whose body builds the `Call`; reading it from a client gives the sending method."""

    def __init__(self, build: Callable[P, core.Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type) -> endpoint[P, T]: ...
    @overload
    def __get__(self, obj: AsyncTransport, owner: type) -> Callable[P, Awaitable[T]]: ...
    @overload
    def __get__(self, obj: SyncTransport, owner: type) -> Callable[P, T]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        build = self.build

        @functools.wraps(build)  # help() and inspect.signature show the call's own parameters
        def send(*args: Any, **kwargs: Any) -> Any:
            return obj._do(build(*args, **kwargs))
        return send


class Calls:
    """Both clients' one-request calls. The methods take no `self`: `endpoint` calls each as a
    plain function that builds the request, and the client reading it sends that."""

    # -- documents ---------------------------------------------------------------------------

    @endpoint
    def put(collection: str, id: str, doc: Mapping[str, Any], acl: Sequence[str] | None = None,
            semantic_intent: str | None = None) -> core.Call[Written]:
        """Create or replace a document. `acl`: principals who may read it (default: everyone of
        the tenant); `semantic_intent="deny"` keeps it out of embedding."""
        return core.put(collection, id, doc, acl, semantic_intent)

    @endpoint
    def get(collection: str, id: str, include_semantic: bool = False) -> core.Call[JSON]:
        """The document's fields with `_id` (and `__semantic` when asked). `NotFound` if absent or unreadable."""
        return core.get(collection, id, include_semantic)

    @endpoint
    def delete(collection: str, id: str) -> core.Call[Deleted]:
        """Remove the document, its vector and its semantic state."""
        return core.delete(collection, id)

    @endpoint
    def mget(collection: str, ids: Sequence[str]) -> core.Call[list[JSON | None]]:
        """Several documents in one call, in the order of `ids`; None where absent or unreadable."""
        return core.mget(collection, ids)

    # -- read --------------------------------------------------------------------------------

    @endpoint
    def read(collection: str, q: str = "", strategy: Strategy = "auto", limit: int = 10,
             **options: Any) -> core.Call[ReadAnswer]:
        """One JSON answer with what is ready now: keyword hits at once, vectors that already
        exist (`read_once` streams the re-rankings that follow). `collection` may be `"any"`.
        Options: see `_core.read_body` (`filter`, `cursor`, `fields`, `highlights`,
        `include_semantic`, `k`, `query_text`, `like`, `vector`, `semantic={...}`, `include={...}`)."""
        return core.read(core.read_body(collection, q, strategy, limit, options))

    @endpoint
    def explain(explain_id: str) -> core.Call[Explanation]:
        """Why a hit is where it is (its `explain_id`)."""
        return core.explain(explain_id)

    # -- admin (scope `admin`) ---------------------------------------------------------------

    @endpoint
    def coverage(collection: str | None = None) -> core.Call[Coverage]:
        """Documents per semantic state (indexed %, skipped reasons, `eager`) of one collection or the tenant."""
        return core.admin_get("/semantic/coverage", Coverage.from_json, collection=collection)

    @endpoint
    def status(collection: str, id: str) -> core.Call[DocStatus]:
        """The document's `__semantic` state in the active space."""
        return core.admin_get("/semantic/status", DocStatus.from_json, collection=collection, _id=id)

    @endpoint
    def reindex(collection: str | None = None, space: str | None = None, force: bool = False) -> core.Call[Reindexing]:
        """Start a backfill: embed what has no current vector (`force`: re-embed everything). Not retried."""
        return core.reindex(collection, space, force)

    @endpoint
    def promote(collection: str) -> core.Call[Promoted]:
        """Make the collection eager (embed on write) and backfill it. Not retried."""
        return core.admin_post("/semantic/promote", Promoted.from_json, {"collection": collection})

    @endpoint
    def demote(collection: str) -> core.Call[Demoted]:
        """Make the collection lazy again."""
        return core.demote(collection)

    @endpoint
    def promotions() -> core.Call[Promotions]:
        """Each collection's mode (eager/lazy, since, reason) and recent promotion backfills."""
        return core.admin_get("/semantic/promotions", Promotions.from_json)

    @endpoint
    def scheduler() -> core.Call[SchedulerView]:
        """The lifecycle scheduler's policy, its last tick and what it last changed for the tenant."""
        return core.admin_get("/semantic/scheduler", SchedulerView.from_json)

    @endpoint
    def backfills() -> core.Call[Backfills]:
        """The tenant's recent backfill tasks."""
        return core.admin_get("/semantic/backfills", Backfills.from_json)

    @endpoint
    def evict(collection: str, idle_seconds: float | None = None) -> core.Call[Evicted]:
        """Move vectors unused for `idle_seconds` to the cold store now. Not retried."""
        return core.evict(collection, idle_seconds)

    @endpoint
    def spaces() -> core.Call[Spaces]:
        """The tenant's spaces: model, dimension, state, coverage, migration progress."""
        return core.admin_get("/semantic/spaces", Spaces.from_json)

    @endpoint
    def create_space(space: str, model: str, dim: int | None = None, scope: str | None = None) -> core.Call[Migrating]:
        """Start a rolling re-embed into a new space (`model`: e.g. `hash:v1@64`): of every document
        (`scope` "all", the default) or of those with a vector now ("ready"; the rest is embedded on
        its first touch once the space is active). Not retried."""
        return core.create_space(space, model, dim, scope)

    @endpoint
    def activate_space(space: str, force: bool = False) -> core.Call[Activated]:
        """Cut over to a built space (`force`: before it is complete), or re-activate a retired one
        (model rollback: its vectors come back from the cold store). Not retried."""
        return core.activate_space(space, force)

    @endpoint
    def usage(collection: str | None = None, days: int = 30) -> core.Call[Usage]:
        """Provider calls, tokens and estimated cost by day, `days` back."""
        return core.admin_get("/semantic/usage", Usage.from_json, collection=collection, days=days)

    @endpoint
    def ledger(collection: str | None = None, doc_id: str | None = None, since: str | float | None = None,
               limit: int = 100, cursor: str | None = None) -> core.Call[LedgerPage]:
        """The tenant's provider calls, one row per call per document, oldest first: `since` is ISO
        8601 or epoch seconds; pass the page's `next_cursor` as `cursor` for the next one."""
        return core.admin_get("/semantic/ledger", LedgerPage.from_json, collection=collection, _id=doc_id,
                              since=since, limit=limit, cursor=cursor)

    @endpoint
    def queue_depth() -> core.Call[QueueDepth]:
        """The tenant's pending embedding jobs."""
        return core.admin_get("/semantic/queueDepth", QueueDepth.from_json)

    @endpoint
    def lag() -> core.Call[Lag]:
        """How far embedding and the index follower are behind."""
        return core.admin_get("/semantic/lag", Lag.from_json)

    @endpoint
    def mismatch() -> core.Call[Mismatch]:
        """Index/store disagreements (0 when healthy)."""
        return core.admin_get("/semantic/mismatch", Mismatch.from_json)

    @endpoint
    def dead_letters() -> core.Call[DeadLetters]:
        """Index changes a follower quarantined."""
        return core.admin_get("/semantic/deadLetters", DeadLetters.from_json)

    @endpoint
    def touch(after: str | None = None, limit: int | None = None) -> core.Call[FollowUpView]:
        """Each of the tenant's collections' touch "auto" follow-up state (unknown, agree,
        disagree), by name, a page at a time (`after`: the previous page's `next`)."""
        return core.admin_get("/semantic/touch", FollowUpView.from_json, after=after, limit=limit)

    # -- collections -----------------------------------------------------------------------------

    @endpoint
    def list_collections(after: str | None = None, limit: int | None = None) -> core.Call[CollectionList]:
        """The tenant's collections by name with their settings (`documents` for admin keys
        only); `after`: the previous page's `next`."""
        return core.admin_get("/v1/collections", CollectionList.from_json, after=after, limit=limit)

    @endpoint
    def delete_collection(collection: str) -> core.Call[CollectionDeleted]:
        """Remove the collection and everything kept for it (admin). `state` "deleted", or
        "deleting" with `remaining`: call again to follow (or resume) it."""
        return core.delete_collection(collection)

    @endpoint
    def delete_by_filter(collection: str, filter: Mapping[str, Any], limit: int | None = None,
                         after: str | None = None) -> core.Call[DeletedByFilter]:
        """Delete the documents of `filter` (the read filter grammar) this key may read, a bounded
        number per call; while `more`, call again with `after`. Not retried."""
        return core.delete_by_filter(collection, filter, limit, after)

    @endpoint
    def collection_settings(collection: str) -> core.Call[CollectionSettings]:
        """The collection's language, embedded and filterable fields, eagerness, rerank default (admin)."""
        return core.admin_get(core.collection_path(collection, "/settings"), CollectionSettings.from_json)

    @endpoint
    def put_collection_settings(collection: str, **settings: Any) -> core.Call[CollectionSettings]:
        """Change the settings named (`language`, `embed_fields`, `filterable_fields`, `eager`, `rerank`;
        None: back to the deployment's default); the others stay (admin). The JSON names
        (`embedFields`, ...) are accepted too."""
        return core.put_collection_settings(collection, settings)

    # -- keys (scope `admin`) and end-user tokens (any key) -------------------------------------

    @endpoint
    def create_key(name: str, principals: Sequence[str], scopes: Sequence[str] = ("read",),
                   certs: Sequence[str] | None = None) -> core.Call[KeyCreated]:
        """A new key of the tenant; the secret `key` is in this answer only. Not retried."""
        return core.create_key(name, principals, scopes, certs)

    @endpoint
    def list_keys() -> core.Call[Keys]:
        """The tenant's keys (bootstrap ones flagged), never a secret."""
        return core.admin_get("/v1/keys", Keys.from_json)

    @endpoint
    def revoke_key(key_id: str) -> core.Call[Revoked]:
        """Delete a key: it and every token it minted are refused by every process within a second.
        `Forbidden` for a bootstrap key, `NotFound` for an unknown id. Not retried."""
        return core.revoke_key(key_id)

    @endpoint
    def create_token(principals: Sequence[str] | None = None, certs: Sequence[str] | None = None,
                     scopes: Sequence[str] | None = None, ttl_seconds: int | None = None,
                     filter: Mapping[str, Any] | None = None) -> core.Call[TokenCreated]:
        """A signed, expiring token for one end user; pass it as the `api_key` of another client.
        `filter` is ANDed to every read made with it. Not retried."""
        return core.create_token(principals, certs, scopes, ttl_seconds, filter)

    @endpoint
    def health() -> core.Call[Health]:
        """`/healthz` (no key needed)."""
        return core.admin_get("/healthz", Health.from_json)
