"""Document writes: validate, hash, decide the sidecar transition, store, index. Core: the
API, the MCP tools and the composition root share them (services/api/writes.py re-exports).

Sidecar transitions on write: unchanged content keeps its state (so
re-ingesting queues nothing); changed content moves `ready → stale`; policy or writer intent
moves to `denied`/`deferred` with the reason; an eager (promoted) collection queues at once.
A bulk write validates every document first and stores the valid ones in transactions of
`VIBE_BULK_WRITE_CHUNK` documents (`DocumentService.put`; each item answers on its own).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.core.edge_fanout import EdgeFanout
from services.core.reserved import is_reserved_collection
from shared.backpressure import TenantShare
from shared.collection_settings import embed_fields_of
from shared.edges import EDGES, check_edge_fields
from shared.errors import ErrorCode, VibeError, invalid
from shared.indexing import Follower
from shared.metrics import METRICS
from shared.model import (
    CERTS_IN_VIBE,
    PUBLIC_PRINCIPAL,
    DocKey,
    EmbedJob,
    Principal,
    SemanticStatus,
    SidecarEntry,
    StoredDoc,
)
from shared.names import check_collection_name, check_doc_fields
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import Budget, DocumentStore, JobQueue
from shared.spaces import FixedSpace, Spaces
from shared.text.hashing import content_hash, doc_text
from shared.text.redaction import select_fields

# names a read gives a meaning of its own (every collection; more-like-this over all of them): never stored
RESERVED_COLLECTIONS = {"any", "semantic.nodes"}
KNOWN_META = {"_id", "_acl", "_vibe", "_certs"}
INTENTS = {"deny", "allow"}
# A document's `_certs`: each "issuer:name" becomes one index term in every engine and rides
# with every index write and every filter, so the list and each entry are bounded and the
# charset is plain (no separators the engines' tokens use, no control characters).
MAX_DOC_CERTS = 32
MAX_CERT_CHARS = 128
CERT_PATTERN = re.compile(r"[A-Za-z0-9._~@+/=-]{1,64}:[A-Za-z0-9._~@+/=:-]{1,63}")


@dataclass
class WriteResult:
    id: str
    status: int
    result: str | None = None
    error: dict[str, str] | None = None

    def body(self) -> dict[str, object]:
        out: dict[str, object] = {"_id": self.id, "status": self.status}
        if self.result:
            out["result"] = self.result
        if self.error:
            out["error"] = self.error
        return out


def check_collection(name: str) -> None:
    check_collection_name(name)  # charset and length: shared/names.py, the one rule
    if name in RESERVED_COLLECTIONS:
        raise invalid(f"collection name {name!r} is reserved (reads use it)", field="collection")
    if is_reserved_collection(name):
        raise invalid(f"invalid collection name {name[:64]!r}", field="collection")


def check_doc_id(doc_id: object) -> str:
    if not isinstance(doc_id, str) or not 0 < len(doc_id) <= 256:
        raise invalid("_id must be a string of 1 to 256 characters", field="_id")
    if any(ord(ch) < 32 for ch in doc_id):
        raise invalid("_id must not contain control characters", field="_id")
    return doc_id


def parse_certs(raw: object) -> list[str]:
    """A document's `_certs`: the certificates ("issuer:name") a reader must all hold. Absent,
    null or empty: none required. Duplicates collapse (the engines count distinct terms)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise invalid("_certs must be a list of \"issuer:name\" strings", field="_certs")
    if len(raw) > MAX_DOC_CERTS:
        raise invalid(f"_certs has more than {MAX_DOC_CERTS} certificates", field="_certs")
    for c in raw:
        if len(c) > MAX_CERT_CHARS or not CERT_PATTERN.fullmatch(c):
            raise invalid(f"_certs entries must be \"issuer:name\" (letters, digits and ._~@+/=:- ; issuer up "
                          f"to 64 characters, at most {MAX_CERT_CHARS} in all); got {c[:64]!r}", field="_certs")
    return sorted(set(raw))


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _needs_job(new: SidecarEntry, prev: SidecarEntry | None) -> bool:
    """A `queued` row needs a job unless one for this very content is already pending: a job
    queued for the previous content is dropped by the handler as outdated."""
    return prev is None or prev.status != SemanticStatus.QUEUED or prev.content_hash != new.content_hash


class DocumentService:
    def __init__(
        self,
        store: DocumentStore,
        follower: Follower,
        queue: JobQueue,
        policy: EligibilityPolicy,
        embed_fields: Mapping[str, list[str]],  # shared/collection_settings.py EmbedFields
        spaces: Spaces | str,
        max_doc_bytes: int,
        eager: Callable[[str], set[str]],
        sync_wait: float = 0.0,
        acl_limits: tuple[int, int] = (512, 65_536),
        budget: Budget | None = None,
        share: TenantShare | None = None,
    ):
        self.store = store
        self.follower = follower
        self.queue = queue
        self.policy = policy
        self.embed_fields = embed_fields
        self.spaces: Spaces = FixedSpace(spaces) if isinstance(spaces, str) else spaces
        self.space = self.spaces.default
        self.acl_limits = acl_limits  # (bytes per principal, bytes in all): VIBE_ACL_MAX_*
        self.budget = budget  # the tenant's per-minute embedding bucket
        self.share = share  # the tenant's share of the job queue (shared/backpressure.py TenantShare)
        self.max_doc_bytes = max_doc_bytes
        # The tenant's eager collections, read from the store at every write: a promotion made
        # by any replica or by the scheduler applies to the next write everywhere.
        self.eager = eager
        self.sync_wait = sync_wait  # for a shared index another replica is applying
        self._lock = threading.Lock()  # read-decide-write of sidecars is one critical section
        self.fanout: EdgeFanout | None = None  # the bound on a node's edges, set by the composition root

    # -- validation --------------------------------------------------------------------

    def parse(self, principal: Principal, collection: str, doc_id: str, body: Any) -> StoredDoc:
        if not isinstance(body, dict):
            raise invalid("a document must be a JSON object")
        # ensure_ascii (the default): the text is ASCII, so its length is its size in bytes, and
        # a NUL anywhere is written as `\u0000`: the walk below runs only when that appears.
        encoded = json.dumps(body, separators=(",", ":"))
        size = len(encoded)
        if size > self.max_doc_bytes:
            raise VibeError(ErrorCode.PAYLOAD_TOO_LARGE,
                            f"document is {size} bytes; the limit is {self.max_doc_bytes}")
        if "\\u0000" in encoded and _has_nul(body):  # PostgreSQL's text and jsonb refuse U+0000
            raise invalid("a document must not contain NUL characters (U+0000)")
        unknown = [k for k in body if k.startswith("_") and k not in KNOWN_META]
        if unknown:
            raise invalid(f"unknown reserved field(s): {', '.join(sorted(unknown))[:200]}", fields=unknown)
        acl = self._acl(body.get("_acl"), *self.acl_limits)
        vibe, intent = self._vibe(body.get("_vibe"))
        certs = parse_certs(body.get("_certs"))
        fields = {k: v for k, v in body.items() if k not in KNOWN_META}
        check_doc_fields(fields)  # each name becomes a facet token and a payload key
        if collection == EDGES:
            check_edge_fields(fields)
        allow = embed_fields_of(self.embed_fields, principal.tenant, collection)
        chash = content_hash(doc_text(select_fields(fields, allow), allow))
        return StoredDoc(DocKey(principal.tenant, collection, doc_id), fields, acl, intent, chash,
                         self.store.clock(), vibe, certs)

    @staticmethod
    def _acl(raw: object, max_principal_bytes: int = 512, max_bytes: int = 65_536) -> list[str]:
        """The document's readers. Each principal is one index term (an OpenSearch keyword, a
        Qdrant payload value) and the list rides with every index write, so both are bounded
        (VIBE_ACL_MAX_PRINCIPAL_BYTES, VIBE_ACL_MAX_BYTES; UTF-8 bytes): one huge ACL must not
        fail the shared bulk or upsert request that carries other tenants' changes."""
        if raw is None:
            return [PUBLIC_PRINCIPAL]
        if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
            raise invalid("_acl must be a list of non-empty principal strings", field="_acl")
        if not raw:  # nobody could ever read, rewrite or delete such a document
            raise invalid("_acl must name at least one principal (omit it for every principal of the tenant)",
                          field="_acl")
        if len(raw) > 1000:
            raise invalid("_acl has more than 1000 principals", field="_acl")
        acl = list(dict.fromkeys(raw))
        sizes = [len(p.encode("utf-8", "surrogatepass")) for p in acl]
        if max(sizes, default=0) > max_principal_bytes:
            raise invalid(f"_acl principals must be at most {max_principal_bytes} bytes (UTF-8); "
                          f"one is {max(sizes)}", field="_acl")
        if sum(sizes) > max_bytes:
            raise invalid(f"_acl must be at most {max_bytes} bytes in all (UTF-8); it is {sum(sizes)}",
                          field="_acl")
        return acl

    @staticmethod
    def _vibe(raw: object) -> tuple[dict[str, Any], str | None]:
        if raw is None:
            return {}, None
        if not isinstance(raw, dict):
            raise invalid("_vibe must be an object", field="_vibe")
        if CERTS_IN_VIBE in raw:  # the store keeps the document's certificates under this key
            raise invalid(f"_vibe.{CERTS_IN_VIBE} is reserved; certificates go in _certs", field="_vibe")
        sem = raw.get("semantic", {})
        if not isinstance(sem, dict):
            raise invalid("_vibe.semantic must be an object", field="_vibe.semantic")
        intent = sem.get("intent")
        if intent is not None and (not isinstance(intent, str) or intent not in INTENTS):
            raise invalid("_vibe.semantic.intent must be 'deny' or 'allow'", field="_vibe.semantic.intent")
        return raw, intent

    # -- writes ------------------------------------------------------------------------

    def put(self, docs: Sequence[StoredDoc], chunk: int | None = None, fanout_checked: bool = False) -> list[str]:
        """Store documents and make them searchable; returns per-doc 'created' or 'updated'.
        One transaction, or one per `chunk` documents: the store's writer and the index follower
        are free between two chunks, so another tenant's write waits for one chunk instead of a
        whole bulk (a failure mid-way leaves the chunks before it stored). The embedding jobs
        are queued once, after the last chunk, so a chunked bulk still fills whole provider
        batches."""
        if self.fanout is not None and not fanout_checked and (over := self.fanout.refused(docs)):
            raise next(iter(over.values()))  # nothing written (a bulk drops these first: routes_docs)
        answers: list[str] = []
        jobs: list[EmbedJob] = []
        size = chunk or len(docs) or 1
        tenants = {d.key.tenant for d in docs}
        tenant = next(iter(tenants)) if len(tenants) == 1 else None  # whose changes must be applied
        try:
            for at in range(0, len(docs), size):
                part_answers, part_jobs = self._store(docs[at:at + size])
                self.follower.catch_up(wait=self.sync_wait, tenant=tenant)
                answers += part_answers
                jobs += part_jobs
        finally:  # what was stored before a failure is still embedded
            self.queue.enqueue(jobs)
        return answers

    def _store(self, docs: Sequence[StoredDoc]) -> tuple[list[str], list[EmbedJob]]:
        """One transaction: the documents and their sidecars; returns the answers and the jobs
        to queue. The sidecar is decided in the tenant's active space and in any space it is
        migrating to, where a write embeds at once (a write made during a migration must not be
        missed by it); into a migration of scope `ready`, only as in the active space (an eager
        collection's), since the migration takes only what is embedded."""
        written = list(docs)  # what the caller sent, in order (the answer is per document)
        tenants = {d.key.tenant for d in docs}
        eager = {t: self.eager(t) for t in tenants}
        spaces = {t: self.spaces.layout(t) for t in tenants}
        plan: dict[str, list[tuple[StoredDoc, bool]]] = {}  # space -> (doc, embed at once)
        for d in docs:
            active, building = spaces[d.key.tenant]
            at_once = d.key.collection in eager[d.key.tenant]
            plan.setdefault(active, []).append((d, at_once))
            for b, scope in building.items():
                plan.setdefault(b, []).append((d, at_once or scope == "all"))
        with self._lock:
            old = {sp: self.store.sidecars([d.key for d, _ in items], sp) for sp, items in plan.items()}
            sidecars = [self._transition(d, old[sp].get(d.key), now, sp) for sp, items in plan.items()
                        for d, now in items]
            self._within_budget(sidecars, old)
            same = self._unchanged(docs, sidecars, old)
            if same:
                METRICS.docs_unchanged.inc(len(same))
                docs = [d for d in docs if d.key not in same]
                sidecars = [s for s in sidecars if s.key not in same]
            if docs:
                self.store.put_docs(docs, sidecars)
        jobs = [EmbedJob(s.key, s.space, s.content_hash, priority="bulk",
                         purpose="eager" if s.space == spaces[s.key.tenant][0] else "migration")
                for s in sidecars if s.status == SemanticStatus.QUEUED and _needs_job(s, old[s.space].get(s.key))]
        METRICS.docs_written.labels(op="put").inc(len(written))
        existed = {k for sp in {spaces[t][0] for t in tenants} for k in old[sp]}
        return ["updated" if d.key in existed else "created" for d in written], jobs

    def _unchanged(self, docs: Sequence[StoredDoc], sidecars: Sequence[SidecarEntry],
                   old: dict[str, dict[DocKey, SidecarEntry]]) -> set[DocKey]:
        """Documents written exactly as stored (fields, ACL, intent, `_vibe`) whose rows the write
        would leave as they are: nothing is stored, logged or re-indexed for them. Applications
        that sync by re-sending everything (a nightly full upload) otherwise grew the change log
        by a whole corpus each time and made every index apply it again. A key sent twice in one
        request is always written (the last one must win). A row the policy now decides
        differently, or one that is missing, is still written."""
        counts: dict[DocKey, int] = {}
        for d in docs:
            counts[d.key] = counts.get(d.key, 0) + 1
        stored = self.store.get_docs([d.key for d in docs])
        same = {d.key for d in docs if counts[d.key] == 1 and (was := stored.get(d.key)) is not None
                and (was.fields, was.acl, was.intent, was.vibe, was.content_hash, was.certs)
                == (d.fields, d.acl, d.intent, d.vibe, d.content_hash, d.certs)}
        for row in sidecars:
            o = old[row.space].get(row.key)
            if o is None or (row.status, row.content_hash, row.reason, row.cold_ref) != (o.status, o.content_hash,
                                                                                         o.reason, o.cold_ref):
                same.discard(row.key)
        return same

    def _within_budget(self, sidecars: list[SidecarEntry], old: dict[str, dict[DocKey, SidecarEntry]]) -> None:
        """Eager embedding spends the tenant's per-minute bucket and its share of the job queue
        like every other path; what they do not grant stays `none` and the scheduler's
        backfill of the eager collection embeds it as the bucket refills. The write itself is never refused for cost."""
        if self.budget is None and self.share is None:
            return
        fresh: dict[str, list[SidecarEntry]] = {}
        for s in sidecars:
            if s.status == SemanticStatus.QUEUED and _needs_job(s, old[s.space].get(s.key)):
                fresh.setdefault(s.key.tenant, []).append(s)
        for tenant, rows in fresh.items():
            # the tenant's share of the queue first (bulks into an eager collection filled it
            # alone), so no bucket tokens are taken for jobs that are not queued
            room = self.share.room(tenant) if self.share is not None else None
            wanted = len(rows) if room is None else min(len(rows), room)
            if wanted < len(rows):
                METRICS.budget_denied.labels(budget="tenant_queue").inc(len(rows) - wanted)
            granted = self.budget.take(tenant, wanted) if self.budget is not None else wanted
            if granted < wanted and self.budget is not None and not self.budget.reachable():
                granted = wanted  # the bucket cannot be asked (Redis away): stay queued, as every write then does
            elif granted < wanted:
                METRICS.budget_denied.labels(budget="tenant").inc(wanted - granted)
            for s in rows[granted:]:
                s.status = SemanticStatus.NONE
            if self.share is not None:
                self.share.took(tenant, granted)

    def _transition(self, d: StoredDoc, old: SidecarEntry | None, eager: bool, space: str) -> SidecarEntry:
        allow = embed_fields_of(self.embed_fields, d.key.tenant, d.key.collection)
        text = doc_text(select_fields(d.fields, allow), allow)
        decision = self.policy.decide_text(d, text)
        new = SidecarEntry(d.key, space, SemanticStatus.NONE, d.content_hash, updated_at=self.store.clock())
        if decision.action != "embed":
            new.status = SemanticStatus.DENIED if decision.action == "ignore" else SemanticStatus.DEFERRED
            new.reason = decision.reason
            return new
        if old is not None and old.content_hash == d.content_hash and old.status in (
            SemanticStatus.READY, SemanticStatus.QUEUED
        ):
            return old  # unchanged content never re-embeds
        if old is not None and old.content_hash == d.content_hash and old.cold_ref:
            # still evicted: the next touch rehydrates it; the vector is the one embedded then
            new.cold_ref, new.model_id, new.last_embedded_at = old.cold_ref, old.model_id, old.last_embedded_at
        if eager:
            new.status = SemanticStatus.QUEUED
        elif old is not None and old.status == SemanticStatus.READY:
            new.status = SemanticStatus.STALE
        return new

    def delete(self, key: DocKey) -> bool:
        gone = self.store.delete_doc(key)
        self.follower.catch_up(wait=self.sync_wait, tenant=key.tenant)
        if gone:
            METRICS.docs_written.labels(op="delete").inc()
        return gone
