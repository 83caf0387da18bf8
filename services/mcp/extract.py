"""`extract_key_info`: ad-hoc materials + query → the top-K context strings.

Isolation: the materials of one (API key, task) live in their own
collection `mcp-task-<HMAC>` with `_acl = ["mcp-task:<HMAC>"]`, both derived under the server
secret from the caller's key ref (itself an HMAC of the bearer key) and the sanitised task id
(services/mcp/secret.py). So two keys never share materials, even with the same tenant and
principals; nobody without the secret can compute a name or a token; and the documents API
refuses the `mcp-task-` prefix (services/core/reserved.py), so no key can plant a document in
a task collection or read or delete one there. Every engine query of this tool filters by
that collection and that ACL token; ordinary reads never match the token (no key's
principals contain it).

Budget: a read-only key may call the tool, so what it can store and have embedded is capped
per key per UTC day (VIBE_EXTRACT_DAILY_CHARS_PER_KEY characters of materials submitted,
VIBE_EXTRACT_DAILY_CHUNKS_PER_KEY new chunks); past either, the call is refused with
`quota_exceeded` before anything is stored. The check and the charge are one transaction.

Ingestion: paragraphs, then sentences above the cap (chunking.material_chunks); the cleaned
text is indexed and embedded, the original is kept (in `meta`, which nothing indexes) and
returned. A chunk's id is the hash of its cleaned text, so the same chunk of the same task
is stored once (dedupe per key and task). The new chunks of one call become visible together
or not at all: they are first stored under a staging ACL token only this call knows (so no
query, this task's included, can match them), embedded, and then published in one transaction
that gives them the task's token; any failure on the way deletes what was staged. Retrieval is
hybrid: the weighted fusion (0.65 semantic + 0.35 lexical on min-max normalised scores, ties by
recency; the default, VIBE_EXTRACT_FUSION) or RRF.

The contract its clients rely on:
- the answer is a `[]string` of contexts: one text content block per context and structured
  content `{"result": [...]}` (the MCP SDK's shape for a list return); the other facts (task,
  where the task came from, fusion, counts) ride in the result's `_meta["vibe/extract_key_info"]`;
- `topK` absent means the default (VIBE_EXTRACT_TOP_K_DEFAULT, 5); otherwise it must be in
  (0, VIBE_EXTRACT_MAX_TOP_K]: 0 is refused like 21;
- the task: `task_id` when given; else the identity of `Authorization: Bearer <identity>@<key>`
  (over stdio, of VIBE_MCP_KEY=`<identity>@<key>`); else VIBE_EXTRACT_DEFAULT_TASK. The user is
  always the key, so a task name never reaches another key's materials;
- every check runs before the pre-call (billing) hook; nothing is charged for a refused call;
- the chunks to embed must fit the tenant's per-minute embedding budget as a whole; short of it
  the call waits for the bucket to refill (up to VIBE_EXTRACT_BUDGET_WAIT_SECONDS), then is
  refused with `rate_limited` (retry_after_seconds in the details) before anything is stored;
  more than the budget holds at all is `payload_too_large`; a tenant past its daily token cap
  is refused with `rate_limited` and what was staged is removed. Chunks the eligibility policy
  keeps from the embedder are stored lexical-only and counted in `_meta` (`not_embedded`);
- the query embedding, and the materials' embeddings, are retried with exponential backoff
  (VIBE_EXTRACT_EMBED_ATTEMPTS, VIBE_EXTRACT_EMBED_BACKOFF_SECONDS), then the call fails with
  `embedder_unavailable`: never a silent lexical-only answer;
- retention: each task's last use is kept (TaskLedger); tasks unused for
  VIBE_EXTRACT_TASK_RETENTION_DAYS lose their materials (swept at most hourly, on a call).
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import blake3

from services.container import Container
from services.core.secret import task_names
from services.mcp import core
from services.mcp.chunking import material_chunks
from services.mcp.errors import QUOTA_EXCEEDED, ToolFailure, invalid
from services.planner.fusion import minmax_weighted, rrf
from shared.agent_ports import BudgetExceeded, MaterialBudget, TaskLedger
from shared.errors import ErrorCode
from shared.metrics import METRICS
from shared.model import EmbedJob, Principal, SemanticStatus, StoredDoc
from shared.ports import EmbedderError, SearchFilter
from shared.tenant_metrics import TENANT_METRICS

log = logging.getLogger("vibe.mcp")

TASK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
SWEEP_EVERY_SECONDS = 3600.0
EMBED_BATCH = 32  # chunks per embedding request at most


@dataclass(frozen=True)
class Request:
    """A validated call: what the billing hook may see, and what the work needs."""

    query: str
    materials: str
    top_k: int
    fusion: str
    task: str
    task_from: str = "task_id"  # task_id | identity | default


def sanitize_task(task_id: str) -> str:
    """The shared task-id sanitiser (as extract_key_info clients expect): trimmed, a safe alphabet,
    at most 128 chars."""
    t = task_id.strip()
    if not TASK_RE.match(t):
        raise invalid("task_id must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
    return t


def _utc_day(now: float) -> tuple[str, int]:
    """(YYYY-MM-DD, seconds until the next UTC midnight)."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    return day, int(86400 - now % 86400) + 1


class KeyInfo:
    def __init__(self, c: Container, secret: bytes, budget: MaterialBudget, tasks: TaskLedger):
        self.c = c
        self.secret = secret
        self.budget = budget
        self.tasks = tasks
        self._last_sweep = 0.0
        self._sweep_lock = threading.Lock()

    def validate(self, query: str, materials: str, top_k: int | None, fusion: str | None, task_id: str | None,
                 identity: str | None) -> Request:
        s = self.c.settings
        k = min(s.extract_top_k_default, s.extract_max_top_k) if top_k is None else top_k
        if not 0 < k <= s.extract_max_top_k:
            raise invalid(f"topK must be between 1 and {s.extract_max_top_k} (absent: {s.extract_top_k_default})")
        if not query.strip():
            raise invalid("query must not be empty")
        if len(query) > s.extract_max_query_chars:
            raise invalid(f"query is longer than {s.extract_max_query_chars} characters")
        if not materials.strip():
            raise invalid("materials must not be empty")
        if len(materials) > s.extract_max_materials_chars:
            limit = s.extract_max_materials_chars
            raise ToolFailure(ErrorCode.PAYLOAD_TOO_LARGE.code,
                              f"materials are {len(materials)} characters; the limit is {limit}")
        mode = fusion or s.extract_fusion
        if mode not in ("rrf", "weighted"):
            raise invalid("fusion must be 'rrf' or 'weighted'")
        raw_task, source = self._task_of(task_id, identity)
        return Request(query.strip(), materials, k, mode, sanitize_task(raw_task), source)

    def _task_of(self, task_id: str | None, identity: str | None) -> tuple[str, str]:
        """(raw task, where it came from): the argument, the caller's identity, the default."""
        s = self.c.settings
        if task_id is not None:
            return task_id, "task_id"
        if identity is not None and s.extract_task_from_bearer:
            return identity, "identity"
        if s.extract_default_task:
            return s.extract_default_task, "default"
        raise invalid("task_id is required (or send `Authorization: Bearer <task>@<key>`)")

    def run(self, p: Principal, key: str, req: Request) -> tuple[list[str], dict[str, Any]]:
        """(the contexts, the facts that go into the result's metadata)."""
        self._sweep()
        col, token = task_names(self.secret, key, req.task)
        docs = self._docs(p, col, token, req.materials, {"task_id": req.task, "user_id": key[:16]})
        existing = self.c.store.get_docs([d.key for d in docs])
        # a chunk still under another call's staging token (that call failed or is running)
        # is not published: this call stages and publishes it again
        new = [d for d in docs if d.key not in existing or token not in existing[d.key].acl]
        self._charge(key, len(req.materials), len(new))
        fresh = {d.key for d in new}
        skipped = self._ingest(p.tenant, token, new, [d for d in docs if d.key in existing and d.key not in fresh])
        self.tasks.touch(p.tenant, col, time.time())
        contexts, lexical_only = self._retrieve(SearchFilter(p.tenant, (col,), (token,)), req.query, req.top_k,
                                                req.fusion)
        facts: dict[str, Any] = {"task_id": req.task, "task_from": req.task_from, "fusion": req.fusion,
                                 "topK": req.top_k, "count": len(contexts), "ingested_chunks": len(new),
                                 "duplicate_chunks": len(docs) - len(new)}
        if skipped:
            facts["not_embedded"] = dict(skipped)
        if lexical_only:  # said, never silent: the daily token cap left the query unembedded
            facts["semantic"] = "skipped: the tenant's daily embedding token cap is spent"
        return contexts, facts

    def _ingest(self, tenant: str, token: str, new: list[StoredDoc], stored: list[StoredDoc]) -> Counter[str]:
        """Stage the new chunks, embed them (and stored chunks of the task still without a
        vector), publish the new ones in one transaction. Returns the chunks the eligibility
        policy kept from the embedder, by reason."""
        space = self.c.spaces.active(tenant)
        sides = self.c.store.sidecars([d.key for d in stored], space)
        waiting = [d for d in stored if (sd := sides.get(d.key)) is not None and _embeddable(sd.status)]
        self._reserve(tenant, len(new) + len(waiting))
        if not new:
            return self._embed_materials(waiting, space) if waiting else Counter()
        staging = f"{token}#staging:{secrets.token_hex(8)}"
        staged = [replace(d, acl=[staging]) for d in new]
        try:
            self.c.docs.put(staged)  # one transaction; nobody's filter holds the staging token
            skipped = self._embed_materials(staged + waiting, space)
            self.c.docs.put(new)  # one transaction: every new chunk visible at once, vectors ready
        except BaseException:
            self._discard(staged, staging)
            raise
        return skipped

    def _discard(self, staged: Sequence[StoredDoc], staging: str) -> None:
        """Remove what this call staged and did not publish (a chunk another call published
        meanwhile carries the task's token, not ours, and stays)."""
        try:
            now = self.c.store.get_docs([d.key for d in staged])
            for k, d in now.items():
                if d.acl == [staging]:
                    self.c.docs.delete(k)
        except Exception:  # noqa: BLE001 - the call's own error is the one to report; staged rows match no query
            log.warning("extract_key_info could not remove staged chunks", exc_info=True)

    def _reserve(self, tenant: str, wanted: int) -> None:
        """The tenant's per-minute embedding budget for every chunk of the call, all or none,
        before anything is stored: a call is never answered with chunks left unembedded. Short
        of tokens, the call waits for the bucket to refill, up to VIBE_EXTRACT_BUDGET_WAIT_SECONDS,
        then answers `rate_limited` with the wait it would need."""
        if wanted <= 0:
            return
        budget = self.c.planner.budget
        per_minute = self.c.settings.per_tenant_per_min
        if wanted > per_minute:
            raise ToolFailure(ErrorCode.PAYLOAD_TOO_LARGE.code,
                              f"the materials need {wanted} chunks embedded; this tenant may embed at most "
                              f"{per_minute} per minute: send them in smaller parts",
                              {"budget": "per_minute", "needed": wanted, "per_minute": per_minute})
        deadline = time.monotonic() + self.c.settings.extract_budget_wait_seconds
        while True:
            have = budget.available(tenant)
            if have >= wanted and budget.take(tenant, wanted) >= wanted:
                return
            if not budget.reachable():
                return  # the bucket cannot be asked (Redis away): embed, as every write then does
            refill = (wanted - min(have, wanted)) * 60.0 / max(1, per_minute)
            if time.monotonic() + refill > deadline:
                break
            time.sleep(max(0.05, refill))
        wait = max(1, math.ceil(refill))
        raise ToolFailure(ErrorCode.RATE_LIMITED.code,
                          f"the materials need {wanted} chunks embedded and this tenant's per-minute embedding "
                          f"budget has {have} left; nothing was stored, retry in about {wait} s",
                          {"budget": "per_minute", "needed": wanted, "available": have, "retry_after_seconds": wait})

    def _charge(self, key: str, chars: int, chunks: int) -> None:
        s = self.c.settings
        day, retry_after = _utc_day(time.time())
        try:
            self.budget.charge(key, day, chars, chunks, s.extract_daily_chars_per_key, s.extract_daily_chunks_per_key)
        except BudgetExceeded as e:
            raise ToolFailure(QUOTA_EXCEEDED, f"this key's daily extract_key_info budget is spent ({e.quota}: "
                              f"{e.used} used of {e.limit}, this call needs {e.requested}); it resets at 00:00 UTC",
                              {"quota": e.quota, "limit": e.limit, "used": e.used, "requested": e.requested,
                               "retry_after_seconds": retry_after}) from e

    def _docs(self, p: Principal, col: str, token: str, materials: str, owner: dict[str, str]) -> list[StoredDoc]:
        """The chunks as documents. `owner` (the task and an opaque prefix of the key's ref) rides
        in each chunk's `meta`, which nothing indexes or embeds, for audits of the store."""
        by_id: dict[str, StoredDoc] = {}
        for m in material_chunks(materials, self.c.settings.extract_max_chunk_chars):
            doc_id = blake3.blake3(m.cleaned.encode()).hexdigest()[:32]
            if doc_id not in by_id:
                by_id[doc_id] = self.c.docs.parse(p, col, doc_id, {
                    "content": m.cleaned, "meta": {"original": m.original, "index": m.index, **owner},
                    "_acl": [token]})
        return list(by_id.values())

    def _backoff(self, attempt: int) -> None:
        time.sleep(self.c.settings.extract_embed_backoff_seconds * (2 ** attempt))

    def _unavailable(self, why: str) -> ToolFailure:
        return ToolFailure(ErrorCode.EMBEDDER_UNAVAILABLE.code,
                           f"the embedder failed after {self.c.settings.extract_embed_attempts} attempts: {why}")

    def _embed_materials(self, docs: list[StoredDoc], space: str) -> Counter[str]:
        """Embed the chunks now, in requests of at most EMBED_BATCH; chunks whose embedding
        failed are retried with backoff, then the call fails (`embedder_unavailable`). A tenant
        past its daily token cap fails the call (`rate_limited`). Returns the chunks the
        eligibility policy kept from the embedder, by reason."""
        if not docs:
            return Counter()
        tenant = docs[0].key.tenant
        attempts = self.c.settings.extract_embed_attempts
        todo = docs
        started = time.perf_counter()
        with METRICS.embedding_latency.labels(tool="extract_key_info", stage="materials").time():
            for attempt in range(attempts):
                self._run_jobs(todo, space)
                sides = self.c.store.sidecars([d.key for d in todo], space)
                todo = [d for d in todo if (sd := sides.get(d.key)) is None or _embeddable(sd.status)]
                if not todo:
                    break
                if attempt + 1 < attempts:
                    self._backoff(attempt)
        TENANT_METRICS.embedding("extract_key_info", "materials", tenant, time.perf_counter() - started)
        if todo:
            raise self._unavailable(f"{len(todo)} material chunk(s) could not be embedded")
        sides = self.c.store.sidecars([d.key for d in docs], space)
        capped = sum(1 for sd in sides.values() if sd.status == SemanticStatus.DEFERRED and sd.reason == "budget")
        if capped:
            raise ToolFailure(ErrorCode.RATE_LIMITED.code,
                              f"this tenant's daily embedding token cap is spent ({capped} chunk(s) could not be "
                              "embedded); nothing new was stored; it resets at 00:00 UTC",
                              {"budget": "daily_tokens", "retry_after_seconds": _utc_day(time.time())[1]})
        return Counter(sd.reason or sd.status.value for sd in sides.values() if sd.status != SemanticStatus.READY)

    def _run_jobs(self, docs: Sequence[StoredDoc], space: str) -> None:
        """Through the workers' EmbedHandler (eligibility, redaction, dim safety, usage), synchronously."""
        jobs = [EmbedJob(d.key, space, d.content_hash, priority="bulk", purpose="tool") for d in docs]
        batch = max(1, min(EMBED_BATCH, self.c.settings.embed_batch_size))
        for i in range(0, len(jobs), batch):
            self.c.handler.run(jobs[i:i + batch])
        self.c.follower.catch_up(tenant=docs[0].key.tenant)

    def _query_vector(self, query: str, tenant: str, collection: str) -> list[float] | None:
        """None: the tenant's daily token cap is spent (the retrieval is lexical)."""
        attempts = self.c.settings.extract_embed_attempts
        started = time.perf_counter()
        try:
            return self._query_attempts(query, tenant, collection, attempts)
        finally:
            TENANT_METRICS.embedding("extract_key_info", "query", tenant, time.perf_counter() - started)

    def _query_attempts(self, query: str, tenant: str, collection: str, attempts: int) -> list[float] | None:
        why = ""
        with METRICS.embedding_latency.labels(tool="extract_key_info", stage="query").time():
            for attempt in range(attempts):
                try:
                    emb = core.space_embedder(self.c, tenant)
                    vec = core.embed_query(self.c, emb, tenant, collection, query)
                    if len(vec) == emb.dim:
                        return vec
                    why = "the embedder returned another dimension"
                except core.OverBudget:
                    return None
                except (EmbedderError, LookupError) as e:
                    why = type(e).__name__
                if attempt + 1 < attempts:
                    self._backoff(attempt)
        raise self._unavailable(why)

    def _retrieve(self, flt: SearchFilter, query: str, k: int, mode: str) -> tuple[list[str], bool]:
        """(the contexts, whether the semantic leg was skipped because the query could not be embedded
        within the tenant's daily cap)."""
        depth = max(2 * k, 20)
        started = time.perf_counter()
        with METRICS.bm25_latency.labels(tool="extract_key_info").time():
            lex = self.c.lexical.search(flt, query, depth)
        TENANT_METRICS.bm25("extract_key_info", flt.tenant, time.perf_counter() - started)
        assert flt.collections is not None
        qvec = self._query_vector(query, flt.tenant, flt.collections[0])
        sem = core.exact_semantic(self.c, flt, qvec, depth) if qvec is not None else []
        docs = self.c.store.get_docs(list(dict.fromkeys([h.key for h in lex] + [h.key for h in sem])))
        mine = {key: d for key, d in docs.items() if key.tenant == flt.tenant and flt.collections is not None
                and key.collection in flt.collections and set(d.acl) & set(flt.acl)}
        lex = [h for h in lex if h.key in mine]
        sem = [h for h in sem if h.key in mine]
        ranking = rrf(lex, sem, self.c.settings.rrf_k) if mode == "rrf" else minmax_weighted(
            lex, sem, {key: d.updated_at for key, d in mine.items()})
        return [str(mine[f.key].fields.get("meta", {}).get("original", mine[f.key].fields["content"]))
                for f in ranking[:k]], qvec is None

    def _sweep(self) -> None:
        """Task retention, as extract_key_info defines it: materials of tasks unused for the retention
        period are deleted.
        At most hourly per process, a bounded batch each time."""
        days = self.c.settings.extract_task_retention_days
        now = time.time()
        if days <= 0 or now - self._last_sweep < SWEEP_EVERY_SECONDS or not self._sweep_lock.acquire(blocking=False):
            return
        try:
            self._last_sweep = now
            purged = self.purge_before(now - days * 86400.0)
            if purged:
                log.info("extract_key_info retention", extra={"purged_tasks": purged})
        finally:
            self._sweep_lock.release()

    def purge_before(self, cutoff: float) -> int:
        stale = self.tasks.stale(cutoff)
        for tenant, col in stale:
            for key in list(self.c.store.collection_keys(tenant, col)):
                self.c.docs.delete(key)
            self.tasks.forget(tenant, col)
        return len(stale)


def _embeddable(status: SemanticStatus) -> bool:
    """Not embedded yet, and not because the policy said so (denied, deferred) : the handler
    should make it ready, so a chunk left here is a failure to report."""
    return status not in (SemanticStatus.READY, SemanticStatus.DENIED, SemanticStatus.DEFERRED)
