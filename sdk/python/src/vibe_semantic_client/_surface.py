"""The calls whose answer is a JSON object, written once for both clients.

`_json` sends a call: the sync client returns the object, the async one an awaitable of it, so
`JsonCalls[JSON]` and `JsonCalls[Awaitable[JSON]]` type each client's methods exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from vibe_semantic_client import _core as core
from vibe_semantic_client.models import JSON

R = TypeVar("R")


class JsonCalls(Generic[R]):
    def _json(self, call: core.Call[JSON]) -> R:
        raise NotImplementedError

    # -- documents ---------------------------------------------------------------------------

    def put(self, collection: str, id: str, doc: Mapping[str, Any], acl: Sequence[str] | None = None,
            semantic_intent: str | None = None) -> R:
        """Create or replace a document. `acl`: principals who may read it (default: everyone of
        the tenant); `semantic_intent="deny"` keeps it out of embedding. → `{_id, collection, result}`."""
        return self._json(core.put(collection, id, doc, acl, semantic_intent))

    def get(self, collection: str, id: str, include_semantic: bool = False) -> R:
        """The document's fields with `_id` (and `__semantic` when asked). `NotFound` if absent or unreadable."""
        return self._json(core.get(collection, id, include_semantic))

    def delete(self, collection: str, id: str) -> R:
        """Remove the document, its vector and its semantic state."""
        return self._json(core.delete(collection, id))

    def explain(self, explain_id: str) -> R:
        """Why a hit is where it is (its `explain_id`)."""
        return self._json(core.explain(explain_id))

    # -- admin (scope `admin`) ---------------------------------------------------------------

    def coverage(self, collection: str | None = None) -> R:
        """Documents per semantic state (indexed %, skipped reasons, `eager`) of one collection or the tenant."""
        return self._json(core.admin_get("/semantic/coverage", collection=collection))

    def status(self, collection: str, id: str) -> R:
        """The document's `__semantic` state in the active space."""
        return self._json(core.admin_get("/semantic/status", collection=collection, _id=id))

    def reindex(self, collection: str | None = None, space: str | None = None, force: bool = False) -> R:
        """Start a backfill: embed what has no current vector (`force`: re-embed everything). Not retried."""
        return self._json(core.reindex(collection, space, force))

    def promote(self, collection: str) -> R:
        """Make the collection eager (embed on write) and backfill it. Not retried."""
        return self._json(core.admin_post("/semantic/promote", {"collection": collection}))

    def demote(self, collection: str) -> R:
        """Make the collection lazy again."""
        return self._json(core.demote(collection))

    def promotions(self) -> R:
        """Each collection's mode (eager/lazy, since, reason) and recent promotion backfills."""
        return self._json(core.admin_get("/semantic/promotions"))

    def scheduler(self) -> R:
        """The lifecycle scheduler's policy, its last tick and what it last changed for the tenant."""
        return self._json(core.admin_get("/semantic/scheduler"))

    def backfills(self) -> R:
        """The tenant's recent backfill tasks."""
        return self._json(core.admin_get("/semantic/backfills"))

    def evict(self, collection: str, idle_seconds: float | None = None) -> R:
        """Move vectors unused for `idle_seconds` to the cold store now. Not retried."""
        return self._json(core.evict(collection, idle_seconds))

    def spaces(self) -> R:
        """The tenant's spaces: model, dimension, state, coverage, migration progress."""
        return self._json(core.admin_get("/semantic/spaces"))

    def create_space(self, space: str, model: str, dim: int | None = None, scope: str | None = None) -> R:
        """Start a rolling re-embed into a new space (`model`: e.g. `hash:v1@64`): of every document
        (`scope` "all", the default) or of those with a vector now ("ready"; the rest is embedded on
        its first touch once the space is active). Not retried."""
        return self._json(core.create_space(space, model, dim, scope))

    def activate_space(self, space: str, force: bool = False) -> R:
        """Cut over to a built space (`force`: before it is complete), or re-activate a retired one
        (model rollback: its vectors come back from the cold store). Not retried."""
        return self._json(core.activate_space(space, force))

    def usage(self, collection: str | None = None, days: int = 30) -> R:
        """Provider calls, tokens and estimated cost by day."""
        return self._json(core.admin_get("/semantic/usage", collection=collection, days=days))

    def queue_depth(self) -> R:
        """The tenant's pending embedding jobs."""
        return self._json(core.admin_get("/semantic/queueDepth"))

    def lag(self) -> R:
        """How far embedding and the index follower are behind."""
        return self._json(core.admin_get("/semantic/lag"))

    def mismatch(self) -> R:
        """Index/store disagreements (0 when healthy)."""
        return self._json(core.admin_get("/semantic/mismatch"))

    def dead_letters(self) -> R:
        """Index changes a follower quarantined."""
        return self._json(core.admin_get("/semantic/deadLetters"))

    def touch(self, after: str | None = None, limit: int | None = None) -> R:
        """Each of the tenant's collections' touch "auto" follow-up state (unknown, agree,
        disagree), by name, a page at a time (`after`: the previous page's `next`)."""
        return self._json(core.admin_get("/semantic/touch", after=after, limit=limit))

    # -- collections -----------------------------------------------------------------------------

    def list_collections(self, after: str | None = None, limit: int | None = None) -> R:
        """`{collections: [{name, language, eager, embedFields, filterableFields, documents?}], next}`:
        the tenant's collections by name (`documents` for admin keys only); `after`: the previous `next`."""
        return self._json(core.admin_get("/v1/collections", after=after, limit=limit))

    def delete_collection(self, collection: str) -> R:
        """Remove the collection and everything kept for it (admin). `{state: "deleted"|"deleting",
        deleted, remaining}`: while `deleting`, call again to follow (or resume) it."""
        return self._json(core.delete_collection(collection))

    def delete_by_filter(self, collection: str, filter: Mapping[str, Any], limit: int | None = None,
                         after: str | None = None) -> R:
        """Delete the documents of `filter` (the read filter grammar) this key may read, a bounded
        number per call → `{deleted, examined, more, after}`; while `more`, call again with `after`.
        Not retried."""
        return self._json(core.delete_by_filter(collection, filter, limit, after))

    def collection_settings(self, collection: str) -> R:
        """`{language, embedFields, filterableFields, eager, updatedAt}` (admin)."""
        return self._json(core.admin_get(core.collection_path(collection, "/settings")))

    def put_collection_settings(self, collection: str, **settings: Any) -> R:
        """Change the settings named (`language`, `embedFields`, `filterableFields`, `eager`; None:
        back to the deployment's default); the others stay (admin)."""
        return self._json(core.put_collection_settings(collection, settings))

    # -- keys (scope `admin`) and end-user tokens (any key) -------------------------------------

    def create_key(self, name: str, principals: Sequence[str], scopes: Sequence[str] = ("read",),
                   certs: Sequence[str] | None = None) -> R:
        """A new key of the tenant → `{id, key, name, principals, certs, scopes, createdAt}`; the
        secret `key` is shown this once. Not retried."""
        return self._json(core.create_key(name, principals, scopes, certs))

    def list_keys(self) -> R:
        """`{keys: [...]}`: the tenant's keys (bootstrap ones flagged), never a secret."""
        return self._json(core.admin_get("/v1/keys"))

    def revoke_key(self, key_id: str) -> R:
        """Delete a key: it and every token it minted are refused by every process within a second.
        `Forbidden` for a bootstrap key, `NotFound` for an unknown id. Not retried."""
        return self._json(core.revoke_key(key_id))

    def create_token(self, principals: Sequence[str] | None = None, certs: Sequence[str] | None = None,
                     scopes: Sequence[str] | None = None, ttl_seconds: int | None = None,
                     filter: Mapping[str, Any] | None = None) -> R:
        """A signed, expiring token for one end user → `{token, expiresAt}`; pass it as the
        `api_key` of another client. `filter` is ANDed to every read made with it. Not retried."""
        return self._json(core.create_token(principals, certs, scopes, ttl_seconds, filter))

    def health(self) -> R:
        """`/healthz` (no key needed)."""
        return self._json(core.admin_get("/healthz"))
