"""The read path: ACL-filtered BM25 at once, ready/cold split,
budgeted on-touch embedding, and re-ranking as the touched documents become ready.

The planner depends on ports only. A `ReadSession` holds one query's state between the first
answer and `done`, so the SSE route can ask it to refresh as workers finish.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from services.planner.explain import Explains, Ranking, ranking_query
from services.planner.fusion import (
    DEFAULT_SEMANTIC_WEIGHT,
    Fused,
    LegStats,
    leg_stats,
    relative_scores,
    rrf,
    single,
    zscore,
)
from services.planner.passages import PassageLocator
from services.planner.query_cache import QueryVectorCache
from services.planner.strategy import choose_strategy
from services.planner.touch import (
    AGREE_DEEP,
    AGREE_TOP,
    FollowUpSwitch,
    TouchPolicy,
    disagreement,
    memory_for,
    neighbour_query,
    neighbours,
    plan,
    query_key,
    reach,
    touch_state,
)
from services.planner.usage import OverBudget, UsageRecorder, embed_query_within_cap
from shared.backpressure import Backpressure, TenantShare
from shared.errors import ErrorCode, VibeError
from shared.filters import describe, matches
from shared.foreground import Foreground
from shared.indexing import IndexFollower
from shared.metrics import METRICS
from shared.model import (
    DocKey,
    EmbedJob,
    Hit,
    Principal,
    SemanticStatus,
    SidecarEntry,
    StoredDoc,
    Strategy,
    centroid,
    hit,
    visible_status,
)
from shared.ports import (
    Budget,
    Candidates,
    Embedder,
    EmbedderError,
    FieldCondition,
    JobQueue,
    LexicalIndex,
    ResolvedCandidates,
    SearchFilter,
    StoreOfRecord,
    VectorIndex,
)
from shared.spaces import FixedSpace, Spaces
from shared.text.hashing import doc_text
from shared.threads import lower_priority

log = logging.getLogger("vibe.planner")

COLD = (SemanticStatus.NONE, SemanticStatus.STALE)
IMPUTE_DEPTH = 200  # lexical candidates checked for a missing vector before fusion


@dataclass
class ReadRequest:
    collection: str
    q: str
    strategy: Strategy = "auto"
    query_text: str | None = None
    query_doc: tuple[str, str, list[str] | None] | None = None
    k: int | None = None
    limit: int = 20
    include_semantic: bool = False
    include_highlights: bool = False
    include_fields: bool | tuple[str, ...] = False  # True: every stored field; a tuple: those
    where: tuple[FieldCondition, ...] = ()  # metadata conditions (shared/filters.py), inside every engine query
    offset: int = 0  # the page starts here (cursor pagination)


MIN_SCORE = 1e-6  # the lowest `score` shown: every shown score is in (0, 1]


class _SidePool:
    """Threads that run a read's lexical leg while the request's own thread embeds the query
    (onnxruntime and torch release the GIL while they compute). The encoder stays on the
    request's thread: it is the longer of the two, so the request thread never sleeps waiting
    for a hand-off when the lexical leg is the shorter one. One pool per process: a forked
    child (a prefork worker) starts its own, as threads do not survive a fork."""

    def __init__(self, workers: int = 4):
        self._workers = workers
        self._lock = threading.Lock()
        self._pid = -1
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], list[Hit]]) -> Future[list[Hit]]:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="vibe-lexical-leg")
                    self._pid = os.getpid()
        assert self._pool is not None
        return self._pool.submit(fn)


LEXICAL_LEGS = _SidePool()


class _Finisher:
    """One background thread per process that finishes streams whose reader left before their
    touch (`ReadSession.finish`). At most `bound` wait: past that a left stream's touch is
    dropped and counted (`vibe_stream_left_touches_total{outcome="dropped"}`), so a flood of
    abandoned streams cannot grow memory without bound; the query's documents are touched again
    by its next read."""

    def __init__(self, bound: int = 256):
        self.bound = bound
        self._lock = threading.Lock()
        self._waiting = 0
        self._pid = -1
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], None]) -> bool:
        with self._lock:
            if self._pid != os.getpid():  # a forked child starts its own thread
                # Background work: below the request threads, as the document embedder is (the
                # query embedding it may do runs on this thread: one intra-op thread).
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="vibe-left-streams",
                                                initializer=lower_priority(5))
                self._pid, self._waiting = os.getpid(), 0
            if self._waiting >= self.bound:
                METRICS.left_streams.labels(outcome="dropped").inc()
                return False
            self._waiting += 1
            assert self._pool is not None
            self._pool.submit(self._run, fn)
            return True

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
            METRICS.left_streams.labels(outcome="touched").inc()
        except Exception:  # noqa: BLE001 - a background step: logged and counted, never raised into a request
            log.exception("finishing a left stream failed")
            METRICS.left_streams.labels(outcome="failed").inc()
        finally:
            with self._lock:
                self._waiting -= 1


FINISHER = _Finisher()


@dataclass
class PlannerConfig:
    space: str
    lexical_candidates: int
    per_query_max_embeds: int
    rrf_k: int
    fusion: str = "zscore"  # zscore | rrf (services/planner/fusion.py)
    semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT  # chosen by bench/fusion_loo.py
    touch: TouchPolicy = field(default_factory=TouchPolicy)
    stand_in: str = "line"  # line | agree: an unembedded candidate's semantic z (fusion.zscore)
    # A streamed semantic read may search first for its page only (ReadSession._short_semantic):
    # on for an exact vector index (the embedded one), where a short list's page is the full
    # list's page; an approximate one (HNSW) may rank a short search differently.
    short_first_page: bool = False


@dataclass
class SemanticLeg:
    state: str = "skipped"  # skipped | ready | degraded; reported as warming/partial while pending
    reason: str | None = None
    vector: list[float] | None = None
    hits: list[Hit] = field(default_factory=list)
    took_ms: float = 0.0


class Planner:
    def __init__(
        self,
        cfg: PlannerConfig,
        store: StoreOfRecord,  # the touch writes a missing row (_with_missing_rows)
        lexical: LexicalIndex,
        vectors: VectorIndex,
        embedder: Embedder | None,
        queue: JobQueue,
        budget: Budget,
        follower: IndexFollower,
        explain: Explains,
        query_cache: QueryVectorCache | None = None,
        usage: UsageRecorder | None = None,
        spaces: Spaces | None = None,
        embedders: Callable[[str, str | None], Embedder | None] | None = None,
        lexical_follower: IndexFollower | None = None,
        foreground: Foreground | None = None,
        follow_ups: FollowUpSwitch | None = None,
        backpressure: Backpressure | None = None,
        tenant_share: TenantShare | None = None,
    ):
        # The "auto" follow-up's switch: the composition root's, on the store of record (shared by
        # replicas, kept across restarts); else one in memory (a planner built directly).
        self.follow_ups = follow_ups if follow_ups is not None else FollowUpSwitch(window=cfg.touch.auto_window)
        self.query_cache = query_cache or QueryVectorCache()
        # First answers are marked, so the in-process pipeline waits for them (shared/foreground.py).
        self.foreground = foreground or Foreground(0)
        # Global backpressure (shared/backpressure.py): touches queue nothing while the job queue
        # is this deep (none: a planner built directly never holds back).
        self.backpressure = backpressure
        # Each tenant's share of the job queue (none: unbounded), so no tenant alone fills it to
        # the global bound above and stops every other tenant's touches.
        self.tenant_share = tenant_share
        self.usage = usage
        # Which passage of a long document matched (set by the composition root; None: not said).
        self.passages: PassageLocator | None = None
        # A tenant's active space (and one it is migrating to) and each space's own embedder:
        # a query vector is only ever compared with vectors of its own model (dim safety).
        self.spaces: Spaces = spaces or FixedSpace(cfg.space)
        self.embedders = embedders
        self.lexical_follower = lexical_follower
        self.cfg = cfg
        self.store = store
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        self.queue = queue
        self.budget = budget
        self.follower = follower
        self.explain = explain

    def finish_left(self, session: ReadSession) -> None:
        """A stream's reader left before its touch: finish it in the background (`_Finisher`),
        after any first answer in flight (it is background work: shared/foreground.py)."""
        def finish() -> None:
            self.foreground.yield_to_requests()
            session.finish()

        if not session.touched and not session.failed:
            FINISHER.submit(finish)

    def embedder_for(self, space: str, tenant: str | None = None) -> Embedder | None:
        """The embedder of the tenant's space (space names are per tenant)."""
        if self.embedder is None or self.embedders is None or space == self.cfg.space:
            return self.embedder
        return self.embedders(space, tenant)

    def open(self, principal: Principal, req: ReadRequest, streaming: bool = False) -> ReadSession:
        """Plan and rank at once. When streaming, the caller sends the first answer before
        queueing embeds ("return fast" comes before "queue"), and a hybrid query whose
        vector is not cached answers lexically first; `complete_semantic()` then fuses."""
        with self.foreground.serving():
            session = ReadSession(self, principal, req)
            session.start(defer_query_embedding=streaming)
        if not streaming:
            session.touch()
        return session

    def search_filter(self, principal: Principal, collection: str,
                      where: tuple[FieldCondition, ...] = ()) -> SearchFilter:
        cols = None if collection == "any" else (collection,)
        # an end-user token's own filter is ANDed to the request's, inside every engine query
        return SearchFilter(principal.tenant, cols, tuple(principal.readable_acl), (*where, *principal.filter),
                            certs=principal.certs)


def _evicted(side: SidecarEntry) -> bool:
    """Its vector went to the cold store (eviction leaves `none` with a cold reference; a
    rewrite clears the reference): a job for it rehydrates without a provider call."""
    return side.status == SemanticStatus.NONE and side.cold_ref is not None


class ReadSession:
    def __init__(self, planner: Planner, principal: Principal, req: ReadRequest):
        self.p = planner
        self.principal = principal
        self.req = req
        self.flt = planner.search_filter(principal, req.collection, req.where)
        self.space, self.building = planner.spaces.of(principal.tenant)
        self._shown_ok: dict[DocKey, StoredDoc] = {}  # documents re-checked readable (see _readable_top)
        self._hidden: set[DocKey] = set()  # documents that failed that check
        self._answered = False  # a payload was built (later ones re-check pending documents too)
        self.k = req.k or planner.cfg.lexical_candidates
        self.lexical_hits: list[Hit] = []
        self.semantic = SemanticLeg()
        self.strategy: str = req.strategy
        self.strategy_reason = "requested"
        self.pending: set[DocKey] = set()
        self._first_touch = False  # this read's touch was its query's first (touch.PageMemory)
        self._followed = False  # follow_up() has run
        self._observed = False  # this first read's agreement with its lexical top was counted ("auto")
        # The "auto" follow-up state this read's touches were last planned with (diagnostics `followUp`;
        # None: no touch planned, or the follow-up is not "auto")
        self.follow_up_state: str | None = None
        # A streamed semantic read searches first for its page only (offset + limit + 1 hits: the
        # one past the page tells whether there is a next). The page is the full list's page, so
        # all `k` candidates are fetched only for what reports or needs them: the `done` answer
        # (`_full_semantic`), a page re-check that drops a document, a refresh as vectors arrive.
        self._short_semantic = False
        self._lexical_later = False  # a streamed semantic read's lexical leg waits for complete_semantic
        # A streamed keyword or hybrid read ranks first only the lexical candidates its page
        # needs (their keys are read from the index as they are asked for: `Candidates`);
        # complete_semantic() reads the rest. The fused scores are the whole leg's all the same
        # (`_lexical_stats`), and the page is the whole ranking's page (`_rank_first_page`).
        self._short_lexical = False
        self._lexical_found: Candidates | None = None
        self._lexical_scores: list[float] = []  # every candidate's (relative) score, best first
        self._lexical_stats: LegStats | None = None
        self._vector_target: int | None = None  # log head the vector index must reach (refresh)
        self.queued_by_us = 0
        self.budget_limited = 0
        self.backpressure_limited = 0  # cold candidates not queued: the job queue was too deep
        # A stream's steps after its first answer (complete_semantic, touch) run on whichever
        # thread gets them, and a reader that leaves hands the rest to the planner's finisher
        # (`Planner.finish_left`): one at a time, and the touch once.
        self._steps = threading.RLock()
        self.touched = False
        self.failed = False  # the stream ended with an error: nothing is finished for it
        self.resolved: dict[str, int] = {}
        self.ranking: list[Fused] = []
        self.lexical_ms = 0.0
        self.started = time.perf_counter()

    # -- first answer ------------------------------------------------------------------

    def start(self, defer_query_embedding: bool = False) -> None:
        text = self._lexical_text()
        # The strategy depends on the query alone, so when this answer waits for a query vector
        # that is not cached, the lexical leg runs on another thread while this one embeds the
        # query. A streamed hybrid answer does not wait for it: its query is embedded after the
        # first event (complete_semantic), not beside it on a 2-core machine
        # (bench.first_event_ab at 100k with it embedded here: hybrid +2.5, auto +1.6 ms paired
        # p50, an A/A run's spread ±1.3).
        self.strategy, self.strategy_reason = choose_strategy(self.req, text, self.p.embedder is not None)
        waits = self.strategy == "semantic" or (self.strategy == "hybrid" and not defer_query_embedding)
        embedded = (waits and bool(text) and not self._is_doc_query()
                    and self.p.embedder_for(self.space, self.principal.tenant) is not None
                    and self._cached_query_vector() is None)
        # A streamed semantic answer shows vector hits only: its lexical leg, which the touch and
        # the usage statistics need, runs after the first event (complete_semantic), so the first
        # answer does not share the interpreter lock with it.
        later = self._lexical_later = self.strategy == "semantic" and defer_query_embedding
        # A streamed hybrid read uses its query vector at once only when it is cached (looked up
        # once, here).
        cached = self._cached_query_vector() if self.strategy == "hybrid" and not waits else None
        # Lexical first: a keyword read, or a hybrid one whose semantic leg comes after the first
        # event (its query vector is not cached); the first event shows the lexical ranking.
        lexical_first = (defer_query_embedding and not embedded and not later
                         and (self.strategy == "keyword" or (self.strategy == "hybrid" and cached is None)))
        if embedded and not later:
            lexical = LEXICAL_LEGS.submit(lambda: self._lexical_leg(text))
            self.semantic.vector = self._query_vector()  # None: the leg is degraded, with its reason
            self.lexical_hits = lexical.result()
        elif embedded:
            self.semantic.vector = self._query_vector()
        elif lexical_first:
            # The page and the one past it (is there a next page?), and the top the usage
            # statistics count (`_record_usage`).
            limit = self.req.limit
            self.lexical_hits = self._lexical_leg(text, max(self.req.offset + limit + 1, 2 * limit, 10))
            self._short_lexical = len(self.lexical_hits) < len(self._lexical_scores)
        elif not later:
            self.lexical_hits = self._lexical_leg(text)
        if waits:
            if not (embedded and self.semantic.vector is None):  # None: degraded, not tried twice
                # A streamed semantic answer needs only its page at first: a 500-hit vector
                # search reads and decodes 500 hits, most of its time (complete_semantic).
                short = self.strategy == "semantic" and defer_query_embedding and self.p.cfg.short_first_page
                self._semantic_leg(self.req.offset + self.req.limit + 1 if short else None)
                self._short_semantic = short and self.semantic.state == "ready"
                if self._short_semantic and not self._short_list_decides_page():
                    self._semantic_leg()  # a tie across the page's end: which of them is on it
        elif self.strategy == "hybrid":
            self.semantic.vector = cached
            if self.semantic.vector is not None:
                self._semantic_leg()
            else:
                self.semantic.state = "embedding_query"
        if self._short_lexical:
            self._rank_first_page()
        else:
            self._rank()
        if not later:
            self._record_usage()

    def _lexical_leg(self, text: str, first: int | None = None) -> list[Hit]:
        """The lexical candidates, scores relative to the best (fusion.relative); only the
        first `first` of them when given (`_short_lexical`; `_full_lexical` reads the rest)."""
        t0 = time.perf_counter()
        if text and self.p.lexical_follower is not None:
            # writes made through another process are searched as they are now
            self.p.lexical_follower.catch_up(tenant=self.principal.tenant)
        found = self.p.lexical.candidates(self.flt, text, self.k) if text else ResolvedCandidates([])
        self._lexical_found, self._lexical_scores = found, relative_scores(found.scores)
        self._lexical_stats = None
        n = len(self._lexical_scores) if first is None else first
        hits = [hit(k, s) for k, s in zip(found.keys(n), self._lexical_scores, strict=False)]
        self.lexical_ms = (time.perf_counter() - t0) * 1000
        return hits

    def _more_lexical(self, n: int) -> None:
        """The first `n` lexical candidates with their keys (of a short first page's leg, from
        the same snapshot of the index)."""
        with self._steps:  # the stream's tail and the finisher may both complete it
            have, n = len(self.lexical_hits), min(n, len(self._lexical_scores))
            if n > have and self._lexical_found is not None:
                more = zip(self._lexical_found.keys(n)[have:], self._lexical_scores[have:n], strict=True)
                self.lexical_hits = [*self.lexical_hits, *(hit(k, s) for k, s in more)]  # a new list
            self._short_lexical = len(self.lexical_hits) < len(self._lexical_scores)

    def _full_lexical(self) -> None:
        """Every lexical candidate of a short first page (ranked with their own statistics)."""
        self._more_lexical(len(self._lexical_scores))
        self._lexical_stats = None

    def _rank_first_page(self) -> None:
        """Rank the first lexical candidates alone, with the whole leg's statistics. Z-score and
        RRF order equal scores by key (the engine in its own order), so every candidate tied
        with the page's last is read first, and the one after them; should the fused scores
        still leave the page open (a candidate not read could tie with it), all of them."""
        self._lexical_stats = leg_stats(self._lexical_scores)
        end, scores = self.req.offset + self.req.limit, self._lexical_scores
        fused = self.strategy != "keyword"
        if fused and end < len(scores):
            past = end
            while past < len(scores) and scores[past] == scores[end - 1]:
                past += 1
            self._more_lexical(past + 1)
        self._rank()
        if fused and self._short_lexical and not self.ranking[end - 1].score > self.ranking[-1].score:
            self._full_lexical()
            self._rank()

    def _record_usage(self) -> None:
        """Statistics for the lifecycle scheduler: the collections queried, their
        lexical hits on the page, the documents this query could embed and the ones it shows."""
        usage = self.p.usage
        if usage is None:
            return
        limit = self.req.limit
        page = [f.key for f in self._page()]
        first = self.lexical_hits[:limit]
        hits: dict[str, int] = {}
        for h in first:
            hits[h.key.collection] = hits.get(h.key.collection, 0) + 1
        if self.req.collection == "any":
            collections = sorted({k.collection for k in page} | set(hits))
        else:
            collections = [self.req.collection]
        touched = [h.key for h in self.lexical_hits[: max(10, 2 * limit)]]
        usage.record(self.principal.tenant, collections, hits, touched, page)

    @property
    def semantic_deferred(self) -> bool:
        return self.semantic.state == "embedding_query"

    def complete_semantic(self) -> bool:
        """Run the deferred semantic leg, or complete a short one; True if the visible ranking
        changed."""
        with self._steps:
            if self._lexical_later:
                self._lexical_later = False
                # Keys only as deep as the touch and the usage statistics read them: a semantic
                # ranking does not use the lexical list (`_touch` reads further if it must).
                self.lexical_hits = self._lexical_leg(self._lexical_text(), 0)
                self._more_lexical(self._touch_reach())  # (the reach depends on the leg's length)
                self._record_usage()
            # Fusion ranks every lexical candidate; a keyword page is decided by the first ones
            # (`_rank_first_page` read the page and the one past it), so the rest of a keyword
            # list is read only where something needs it (the touch, a page re-check).
            if self._short_lexical and self.strategy == "hybrid":
                self._full_lexical()
                if not self.semantic_deferred:
                    self._rank()  # the same first page (`_rank_first_page`), now with every candidate
            # A short semantic list decides its page (`_short_list_decides_page`), so the full
            # search cannot change what is shown: it waits for an answer that reports the whole
            # list (`done`: `_full_semantic`), and a reader that left never pays for it. It was
            # the largest part of a left stream's tail (py-spy --gil: 65 of 155 samples;
            # qdrant-edge holds the interpreter lock), which runs beside the next query.
            if not self.semantic_deferred:
                return False
            before = self._visible()
            self._semantic_leg()
            self._rank()
            return self._visible() != before

    def _full_semantic(self) -> None:
        """Every semantic candidate of a short first search (the same page, see above)."""
        with self._steps:
            if self._short_semantic:
                self._semantic_leg()
                self._rank()

    def _lexical_text(self) -> str:
        if self.req.q.strip():
            return self.req.q
        if self.req.query_text:
            return self.req.query_text
        doc = self._query_doc()
        return doc_text(doc[0], doc[1])[:2000] if doc else ""

    def _query_doc(self) -> tuple[dict[str, object], list[str] | None] | None:
        if self.req.query_doc is None:
            return None
        collection, doc_id, fields = self.req.query_doc
        doc = self.p.store.get_doc(DocKey(self.principal.tenant, collection, doc_id))
        if doc is None or not doc.readable_by(self.principal):
            raise VibeError(ErrorCode.NOT_FOUND, "semantic.query.doc not found")
        return doc.fields, fields

    def touch(self) -> None:
        """Split the top candidates into ready and cold; queue cold, eligible ones within
        the per-query ceiling and the tenant budget (policy: services/planner/touch.py).
        Every strategy touches, so the next query finds these ready. Once per session."""
        with self._steps:
            if self.touched:
                return
            self.touched = True
            self._touch()

    def finish(self) -> None:
        """What a stream does after its first answer that must not depend on its reader staying:
        the semantic leg completed (the touch plans on the fused page) and the touch. A query's
        reader leaving early (a page closed, an SDK reading only the first event) still queues
        what the query touched, as a JSON read of the same query would."""
        with self._steps:
            if not self.touched:
                self.complete_semantic()
                self.touch()

    def _touch_reach(self) -> int:
        """How many leading lexical candidates the touch and the usage statistics may read."""
        policy, limit, n = self.p.cfg.touch, self.req.limit, len(self._lexical_scores)
        reach = max(10, 2 * limit, policy.depth(limit, n))
        if policy.policy == "adaptive":
            reach = max(reach, policy.dig_max, (policy.similar_within or n) if policy.similar else 0)
        return reach

    def _touch(self) -> None:
        cfg = self.p.cfg
        self._more_lexical(self._touch_reach())  # a short first page's list, as deep as the touch reads
        if cfg.touch.policy == "adaptive":
            self._touch_adaptive()
            return
        keys = [h.key for h in self.lexical_hits[: cfg.touch.depth(self.req.limit, len(self._lexical_scores))]]
        keys += self._neighbour_keys(keys)
        sides = self._with_missing_rows(keys, self.p.store.sidecars(keys, self.space))
        cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD]
        self.pending = {k for k in keys if k in sides and sides[k].status == SemanticStatus.QUEUED}
        self._spend(cold)

    def _with_missing_rows(self, keys: Sequence[DocKey],
                           sides: dict[DocKey, SidecarEntry]) -> dict[DocKey, SidecarEntry]:
        """`sides` with a `none` row written for each of `keys` that has none in this space: a
        document the caller's own reads found, whose row a race (a cut-over, a re-create and the
        gone-rows sweep at once) or an earlier version left out. A backfill (an eager collection's,
        a reindex, a migration) writes such rows as it passes, but a lazy collection's documents
        are embedded by touches only, and a touch moved existing rows only: never embedded.
        The worker decides its policy again before any provider call, as for every job.
        Counted in `vibe_reconciler_repaired_total{reason="row_missing"}`."""
        missing = [k for k in dict.fromkeys(keys) if k not in sides]
        if not missing:
            return sides
        docs = self.p.store.get_docs(missing)  # one deleted meanwhile gets no row (ensure_sidecars re-checks)
        now = self.p.store.clock()
        made = self.p.store.ensure_sidecars([SidecarEntry(k, self.space, SemanticStatus.NONE, d.content_hash,
                                                          updated_at=now) for k, d in docs.items()])
        if made:
            METRICS.reconciler_repaired.labels(reason="row_missing").inc(made)
            log.warning("sidecar rows were missing; written", extra={"tenant": self.principal.tenant,
                                                                    "space": self.space, "rows": made})
        return {**sides, **self.p.store.sidecars(list(docs), self.space)}

    def _spend(self, cold: list[SidecarEntry]) -> None:
        """Queue cold candidates, in order, within the per-query ceiling and the tenant's bucket.
        A candidate whose vector was evicted (a cold-store reference) is rehydrated without a
        provider call, so it takes nothing from the bucket (within the same per-query ceiling).
        Rehydrating every evicted candidate the touch looks at (down to dig_max), not only the
        ones it picks, was measured and left out: in bench lifecycle (30 days) it brought back
        twice as many vectors for +0.003 of eager on Cranfield and -0.003 on CISI."""
        cap = self.p.cfg.per_query_max_embeds
        wanted = [e for e in cold if not _evicted(e)][:cap]
        free = [e for e in cold if _evicted(e)][:cap]
        if (wanted or free) and self.p.backpressure is not None and self.p.backpressure.pressed():
            # The workers or the provider are not keeping up: more jobs would only lengthen the
            # wait of every read already waiting. Nothing is queued, not even a rehydration (it
            # is a job too); the read answers with what is embedded and says why it does not warm.
            self.backpressure_limited = len(wanted) + len(free)
            METRICS.budget_denied.labels(budget="backpressure").inc(self.backpressure_limited)
            return
        room = self.p.tenant_share.room(self.principal.tenant) if self.p.tenant_share is not None else None
        if room is not None and len(wanted) + len(free) > room:
            # The tenant's own share of the queue is full: what does not fit waits, rehydrations
            # included (each is a job others wait behind), and no other tenant's touches do.
            cut = len(wanted) + len(free) - room
            wanted = wanted[:room]
            free = free[:room - len(wanted)]
            self.backpressure_limited = cut
            METRICS.budget_denied.labels(budget="tenant_queue").inc(cut)
        if wanted and self.semantic.reason == "budget":
            # The daily cap refused this query's own embedding a moment ago: the tenant's day is
            # spent, and each job would only be turned `deferred` by the worker. Queued anyway,
            # every read of a spent tenant flipped its candidates to `deferred` and said
            # "Warming up… N results are being indexed" for results that never came.
            self.budget_limited = len(wanted)
            METRICS.budget_denied.labels(budget="daily_tokens").inc(self.budget_limited)
            self._enqueue(free)
            return
        granted = self.p.budget.take(self.principal.tenant, len(wanted)) if wanted else 0
        self.budget_limited = len(wanted) - granted
        if self.budget_limited:
            METRICS.budget_denied.labels(budget="tenant").inc(self.budget_limited)
        self._enqueue([*wanted[:granted], *free])

    def _neighbour_keys(self, keys: list[DocKey]) -> list[DocKey]:
        """Speculation: lexical neighbours of `keys` (the first `neighbour_sources` of them),
        searched inside the caller's filter (so only documents the caller may read are ever
        considered)."""
        policy = self.p.cfg.touch
        if not policy.neighbours or not keys:
            return []
        docs = self.p.store.get_docs(keys[: policy.neighbour_sources])
        sources = [docs[k] for k in keys[: policy.neighbour_sources] if k in docs]
        return neighbours(sources, lambda text, n: self.p.lexical.search(self.flt, text, n),
                          policy.neighbours, set(keys))

    def _touch_adaptive(self) -> None:
        """The adaptive policy (services/planner/touch.py `plan`): the fused page's cold
        documents first, then the lexical top, deeper only while the page is unstable, less
        under a tight budget. Everything considered comes from this query's own reads inside
        the caller's filter (lexical list, fused page, neighbour searches)."""
        cfg, limit = self.p.cfg, self.req.limit
        policy = self._policy()
        depth = max(policy.dig_max, policy.depth(limit, len(self._lexical_scores)))
        lexical = [h.key for h in self.lexical_hits[:depth]]
        page = [f.key for f in self._page()]
        candidates = list(dict.fromkeys([*page, *lexical]))
        sides = self._with_missing_rows(candidates, self.p.store.sidecars(candidates, self.space))
        state = {k: touch_state(s.status, COLD) for k, s in sides.items()}
        # Settled repeats (touch.PageMemory): keyed by tenant, ACL, collection and query, so one
        # caller's history never decides another's spend.
        memory = memory_for(self.p) if policy.remember else None
        # the caller's certificates are part of its reach, as its ACL: "\x1e" sets them apart from principals
        readers = (*self.flt.acl, *(f"\x1ecert:{c}" for c in sorted(self.flt.certs)))
        qkey = query_key(self.principal.tenant, readers, self._scope_key(), self._lexical_text(), limit)
        settled = memory.settled(qkey, page, policy.probe_rounds) if memory is not None else None
        reachable = None
        end = self.req.offset + limit
        touches = memory.touches(qkey) if memory is not None else 0
        self._first_touch = memory is not None and touches == 0
        # `reach` compares lexical candidates with a fused z-score page: a hybrid ranking's (a
        # keyword or semantic page has no fused scores to reach)
        if (self.strategy == "hybrid" and cfg.fusion == "zscore" and policy.reaches(touches) and self.semantic.hits
                and len(self.ranking) >= end):
            reachable = reach(self._lexical_scores, [h.score for h in self.semantic.hits],
                              self.ranking[end - 1].score, cfg.semantic_weight, policy.reach_best)
        similar = self._similar_keys(lexical) if policy.similar and settled is not True else []
        chosen = plan(policy, limit, lexical, page, state, self.p.budget.available(self.principal.tenant),
                      reachable, similar, settled)
        if memory is not None:
            memory.remember(qkey, page, chosen.probe)
        watched = [*page, *lexical[: chosen.depth]]
        keys = list(chosen.keys)
        if chosen.neighbours:
            # "Vector similarity once a few are embedded": the page's documents the semantic
            # leg ranks highest lend their lexical neighbours.
            near = sorted((f for f in self._page() if f.semantic_rank is not None),
                          key=lambda f: f.semantic_rank or 0)
            extra = self._neighbour_keys([f.key for f in near])
            more = self.p.store.sidecars([k for k in extra if k not in sides], self.space)
            sides.update(more)
            keys += [k for k in extra if k in more and more[k].status in COLD]
            watched += extra
        self.pending = {k for k in watched if k in sides and sides[k].status == SemanticStatus.QUEUED}
        # Evicted candidates within the plan's depth come back even where a tight budget cut the
        # plan short (they cost no provider call: `_spend`).
        picked = set(keys)
        keys += [k for k in dict.fromkeys([*page, *lexical[: chosen.depth]])
                 if k not in picked and (s := sides.get(k)) is not None and _evicted(s)]
        self._spend([sides[k] for k in keys if k in sides and sides[k].status in COLD])

    def _policy(self) -> TouchPolicy:
        """The touch policy for this read's collection: an "auto" follow-up resolved by the
        collection's switch (touch.FollowUpSwitch.state): "agree" follows up and digs
        `auto_dig_step` at a time; "disagree" (with `auto_disagree`) follows up, but with
        `auto_disagree_probe_rounds` probing rounds per query and `auto_disagree_dig_step`
        steps, since there a dug document reaches the page less often; otherwise no follow-up."""
        policy = self.p.cfg.touch
        if policy.follow_up != "auto":
            return policy
        state = self.p.follow_ups.state(self.principal.tenant, self.req.collection, policy.auto_after,
                                        policy.auto_below)
        self.follow_up_state = state
        if state == "agree":
            return replace(policy, follow_up=True, dig_step=policy.auto_dig_step)
        if state == "disagree" and policy.auto_disagree:
            return replace(policy, follow_up=True, probe_rounds=policy.auto_disagree_probe_rounds,
                           dig_step=policy.auto_disagree_dig_step)
        return replace(policy, follow_up=False)

    def _observe_agreement(self) -> None:
        """Count, for the collection's "auto" switch, how far this first read's refreshed fused
        top left its lexical top (touch.disagreement), once. Only a hybrid ranking with its
        semantic leg says anything about the lexical list as a guide. Counted under the read's
        tenant and collection as named (a read across collections, "any", under "any"): one
        store lookup (which of the lexical ranks 10-60 have a vector) per streamed first read."""
        if self._observed or self.strategy != "hybrid" or self.semantic.state != "ready":
            return
        self._observed = True
        deep = [h.key for h in self.lexical_hits[AGREE_TOP:AGREE_DEEP]]
        ready = len(self.p.store.ready_among(deep, self.space)) if deep else 0
        value = disagreement([h.key for h in self.lexical_hits], [f.key for f in self.ranking], ready)
        t = self.p.cfg.touch
        self.p.follow_ups.observe(self.principal.tenant, self.req.collection, value, t.auto_after, t.auto_below)

    def follow_up(self) -> bool:
        """Once this read's touch has landed (nothing pending), touch again if it was its query's
        first touch and the policy follows up (TouchPolicy.follow_up; "auto": if its collection's
        switch is on, after this read is counted): the plan is a repeat's, so it spends only while
        the refreshed page is unstable. True if it queued anything."""
        policy = self.p.cfg.touch
        with self._steps:
            if (self._followed or not self._first_touch or self.pending or not self.touched
                    or not policy.follow_up or policy.policy != "adaptive"):
                return False
            # Under a tight budget a first touch embeds only its page's best cold document and
            # keeps the bucket for queries that come back (TouchPolicy.first_under_budget): a
            # follow-up would spend it at once. (Nor is such a read counted for "auto": its
            # lexical top is not embedded, so its page cannot say how far the leg would move it.)
            room = policy.reserve * policy.depth(self.req.limit, len(self._lexical_scores))
            if (self.budget_limited or self.backpressure_limited
                    or self.p.budget.available(self.principal.tenant) < room):
                return False
            if policy.follow_up == "auto":
                self._observe_agreement()
                if not self._policy().follow_up:
                    return False
            self._followed = True
            self._touch_adaptive()
            return bool(self.pending)

    def _similar_keys(self, lexical: list[DocKey]) -> list[DocKey]:
        """This query's lexical candidates ordered by likeness to the semantic leg's best hits
        (a lexical more-like-this of their text with the query's): a predictor of which deeper
        candidates the semantic leg would lift onto the page. The sources are this query's own
        semantic hits and the search runs with the caller's filter; only candidates from this
        query's own lexical list (`similar_within` deep) are returned."""
        policy = self.p.cfg.touch
        top = [h.key for h in self.semantic.hits[: policy.similar_sources]]
        if not top:
            return []
        docs = self.p.store.get_docs(top)
        text = " ".join([self._lexical_text(), *(neighbour_query(docs[k]) for k in top if k in docs)])
        within = policy.similar_within or len(self._lexical_scores)
        allowed = {h.key for h in self.lexical_hits[:within]}
        hits = self.p.lexical.search(self.flt, text, max(200, within))
        return [h.key for h in hits if h.key in allowed]

    def _enqueue(self, entries: Sequence[SidecarEntry]) -> None:
        if not entries:
            return
        space = self.space
        moved = set(self.p.store.set_status([e.key for e in entries], space, SemanticStatus.QUEUED,
                                            only_from=COLD))
        jobs = [EmbedJob(e.key, space, e.content_hash) for e in entries if e.key in moved]
        self.p.queue.enqueue(jobs)
        if self.p.tenant_share is not None:
            self.p.tenant_share.took(self.principal.tenant, len(jobs))
        self.queued_by_us += len(jobs)  # a follow-up touch adds to the first
        self.pending |= moved

    def _query_text(self) -> str:
        return self.req.query_text or self.req.q or self._lexical_text()

    def _is_doc_query(self) -> bool:
        return self.req.query_doc is not None and not self.req.query_text and not self.req.q.strip()

    def _doc_vector(self, space: str) -> list[float] | None:
        """More-like-this searches with the document's STORED vector: its fields never go
        to the provider from a read, so the allowlist, redaction and a writer's deny
        hold as they do for its embedding job. A document not embedded yet is queued, like a touch."""
        assert self.req.query_doc is not None
        collection, doc_id, _ = self.req.query_doc
        key = DocKey(self.principal.tenant, collection, doc_id)
        stored = self.p.store.vectors_for([key], space).get(key)
        vec = None if stored is None else centroid(stored)
        if vec is None:
            side = self.p.store.sidecar(key, space)
            if side is not None and side.status in COLD:
                self._spend([side])  # a touch's budget: the bucket, the cap, the queue shares
            denied = side is not None and side.status == SemanticStatus.DENIED
            self.semantic.state = "degraded"
            self.semantic.reason = "query_doc_denied" if denied else "query_doc_not_embedded"
        return vec

    def _cached_query_vector(self, space: str | None = None) -> list[float] | None:
        if self._is_doc_query():
            return self._doc_vector(space or self.space)
        emb = self.p.embedder_for(space or self.space, self.principal.tenant)
        if emb is None:
            return None
        return self.p.query_cache.get(self.principal.tenant, emb.model_id, self._query_text(), self.flt.acl)

    def _query_vector(self, space: str | None = None) -> list[float] | None:
        emb = self.p.embedder_for(space or self.space, self.principal.tenant)
        if emb is None:
            self.semantic.state, self.semantic.reason = "degraded", "no_embedder"
            return None
        cached = self._cached_query_vector(space)
        if cached is not None or self._is_doc_query():
            return cached
        text = self._query_text()
        try:  # the daily token cap: a spent tenant answers lexically, with no provider call
            vec = embed_query_within_cap(self.p.usage, emb, self.principal.tenant, self.req.collection, text,
                                         space=space or self.space)
        except OverBudget:
            self.semantic.state, self.semantic.reason = "degraded", "budget"
            return None
        except EmbedderError as e:
            self.semantic.state, self.semantic.reason = "degraded", f"embedder_unavailable: {str(e)[:80]}"
            return None
        self.p.query_cache.put(self.principal.tenant, emb.model_id, text, vec, self.flt.acl)
        return vec

    def _short_list_decides_page(self) -> bool:
        """Whether a short search's page is the full list's: it returned all there is, or its
        last hit (one past the page) scores below the page's last one. Then every hit that
        scores as high as the page's last is in the short list (an exact top-k), and both lists
        order them alike (`_semantic_leg` breaks ties by key)."""
        end, hits = self.req.offset + self.req.limit, self.semantic.hits
        return len(hits) <= end or hits[end].score < hits[end - 1].score

    def _semantic_leg(self, k: int | None = None) -> None:
        """The vector search, `k` candidates (None: all `self.k`; fewer only for a first page,
        see `_short_semantic`)."""
        t0 = time.perf_counter()
        self._short_semantic = False
        if self.semantic.vector is None:
            self.semantic.vector = self._query_vector()
        if self.semantic.vector is None:
            return
        self.p.follower.catch_up(tenant=self.principal.tenant)
        k = min(k or self.k, self.k)
        hits = self.p.vectors.search(self.space, self.flt, self.semantic.vector, k)
        for space in self.building:
            hits = self._with_building(space, hits, k)
        # Equal scores in key order: engines return ties in no set order, and a page, its
        # cursor's next page and a short first search must agree on them.
        self.semantic.hits = sorted(hits, key=lambda h: (-h.score, h.key))
        self.semantic.took_ms = (time.perf_counter() - t0) * 1000
        self.semantic.state = "ready"

    def _with_building(self, space: str, active: list[Hit], k: int) -> list[Hit]:
        """During a migration, queries fan out to both spaces until it completes: search the space being built with its
        own model's query vector and, for the documents it already holds, take its score instead
        of the active space's. The two models' scores are put on one scale by standardising each
        list (never by comparing raw scores of different models)."""
        state, reason = self.semantic.state, self.semantic.reason
        vec = self._query_vector(space)
        self.semantic.state, self.semantic.reason = state, reason  # the building space is best effort
        if vec is None:
            return active
        fresh = self.p.vectors.search(space, self.flt, vec, k)
        if not fresh:
            return active
        merged = {h.key: s for h, s in zip(active, _standard(active), strict=True)}
        merged.update({h.key: s for h, s in zip(fresh, _standard(fresh), strict=True)})
        return [Hit(k, s) for k, s in sorted(merged.items(), key=lambda kv: -kv[1])]

    def _rank(self) -> None:
        if self.strategy == "keyword":
            self.ranking = single(self.lexical_hits, "lexical")
        elif self.strategy == "semantic":
            self.ranking = single(self.semantic.hits, "semantic")
        else:
            self.ranking = self._fuse()

    def _fuse(self) -> list[Fused]:
        cfg = self.p.cfg
        unembedded = self._unembedded()
        if cfg.fusion == "rrf":
            return rrf(self.lexical_hits, self.semantic.hits, cfg.rrf_k, unembedded)
        return zscore(self.lexical_hits, self.semantic.hits, cfg.semantic_weight, unembedded=unembedded,
                      stand_in=cfg.stand_in, lexical_stats=self._lexical_stats)

    def _unembedded(self) -> set[DocKey]:
        """Top lexical candidates with no vector in this space yet: fusion stands an estimate in
        for the unknown semantic score (fusion.stand_in_line). Candidates below IMPUTE_DEPTH keep the floor:
        they cannot reach a page whatever they are given, and the lookup stays one batch."""
        keys = [h.key for h in self.lexical_hits[:IMPUTE_DEPTH]]
        if not keys or self.semantic.state != "ready":
            return set()
        ready = self.p.store.ready_among(keys, self.space)
        return {k for k in keys if k not in ready}

    # -- backfill ----------------------------------------------------------------------

    @property
    def awaits_backfill(self) -> bool:
        """A keyword ranking never changes as vectors arrive, so its stream need not wait."""
        return bool(self.pending) and self.strategy != "keyword"

    def refresh(self) -> bool:
        """Check the pending documents; re-rank if any became ready. True if the visible
        ranking changed."""
        if not self.pending:
            return False
        sides = self.p.store.sidecars(list(self.pending), self.space)
        done = {k for k in self.pending if k not in sides or sides[k].status != SemanticStatus.QUEUED}
        if not done:
            return False
        if any(sides[k].status == SemanticStatus.READY for k in done if k in sides) and not self._vectors_caught_up():
            return False  # ready in the store, not yet searchable: look again at the next poll
        for k in done:
            # a refusal for cost is reported as `budget`, apart from policy deferrals
            status = ("budget" if k in sides and sides[k].reason == "budget"
                      else sides[k].status.value if k in sides else "deleted")
            self.resolved[status] = self.resolved.get(status, 0) + 1
        self.pending -= done
        if self.strategy not in ("semantic", "hybrid") or not self.resolved.get("ready"):
            return False
        before = self._visible()
        self._semantic_leg()
        self._rank()
        return self._visible() != before

    def _vectors_caught_up(self) -> bool:
        """Whether the vector index has applied the log up to the head seen when documents
        were first found ready. An embedded index is applied by this process at once; a shared
        one (Qdrant server) by whichever replica holds its lease, and until then a ready
        document would be neither searched nor imputed and would drop to the floor."""
        if self._vector_target is None:
            # includes their vector changes (only the tenant's own changes matter to its read)
            self._vector_target = self.p.store.change_log_head(self.principal.tenant)
        self.p.follower.catch_up(tenant=self.principal.tenant)
        if self.p.follower.applied(self.principal.tenant) < self._vector_target:
            return False
        self._vector_target = None
        return True

    def _visible(self) -> list[tuple[DocKey, float]]:
        return [(f.key, round(f.score, 9)) for f in self._page()]

    def _page(self) -> list[Fused]:
        return self.ranking[self.req.offset: self.req.offset + self.req.limit]

    def _scope_key(self) -> str:
        """The collection plus the filter and the page: one query text under two filters, or
        its second page, is another page to remember (touch page memory keys on it)."""
        if not self.flt.where and not self.req.offset:
            return self.req.collection
        return f"{self.req.collection}\x1f{describe(self.flt.where)!r}\x1f{self.req.offset}"

    @property
    def has_more(self) -> bool:
        """Whether the ranking holds results past this page (a next cursor is worth giving)."""
        return len(self.ranking) > self.req.offset + self.req.limit

    # -- payloads ----------------------------------------------------------------------

    def payload(self, final: bool = False) -> dict[str, object]:
        if final:
            self._full_semantic()  # `done` reports the whole candidate list
        # A stream shows its page again at every event: each one is re-checked against the store
        # (a document revoked between two events must not be in the next one, nor its fields).
        self._shown_ok.clear()
        top = self._readable_top()
        shown = self._shown_scores(top)
        results = [self._result(f, s) for f, s in zip(top, shown, strict=True)]
        self._explain(results, top, shown)
        self._decorate(results, top)
        body: dict[str, object] = {"results": results, "strategy": self.strategy,
                                   "warming": self.warming(), "diagnostics": self.diagnostics(final)}
        self._answered = True
        return body

    def _readable_top(self) -> list[Fused]:
        """The page, each document re-checked against the store of record before it is shown:
        an index another process has not caught up with yet (a revoked ACL, a delete, an edit
        that no longer meets the filter) must not decide what a caller sees. A document that
        fails leaves the ranking for good. The ranking's first document is checked too on a
        later page: its score anchors the shown scores (`_shown_scores`)."""
        where = self.req.where
        while True:
            top = self._page()
            unchecked = [f.key for f in [*self.ranking[:1], *top] if f.key not in self._shown_ok]
            if not unchecked:
                return top
            docs = self.p.store.get_docs(unchecked)
            bad = {k for k in unchecked if k not in docs or not docs[k].readable_by(self.principal)
                   or (where and not matches(where, docs[k].fields))}
            self._shown_ok.update((k, docs[k]) for k in unchecked if k not in bad)
            if not bad:
                return top
            if self._short_semantic:  # the page needs candidates past the short list
                self._semantic_leg()
                self._rank()
            if self._short_lexical:
                self._full_lexical()
                self._rank()
            self._hidden |= bad
            self.ranking = [f for f in self.ranking if f.key not in self._hidden]

    def _shown_scores(self, page: list[Fused]) -> list[float]:
        """`score` as shown: in (0, 1], higher is better, comparable across the pages of one
        query (anchored on the ranking's best, not the page's). The ranking's own scores are
        kept for explain; the mapping is monotone, so the order is the ranking's.
        - keyword: BM25 divided by the best BM25 of the caller's list (fusion.relative);
        - semantic: cosine similarity mapped onto (0, 1] as (1 + cos) / 2, an absolute figure
          (1: same direction as the query); a space being built standardises its scores, and
          then the hybrid rule below is used;
        - hybrid, z-score fusion: exp(fused - best fused), 1 for the best, each standard
          deviation behind it a factor e less (a lone hit scores 1, not the 0.0 it used to);
        - hybrid, RRF: the RRF sum divided by the best possible (rank 1 in both legs)."""
        if not page:
            return []
        best = self.ranking[0].score
        raw = [f.score for f in page]
        if self.strategy == "keyword":
            shown = raw
        elif self.strategy == "semantic" and all(-1.0 <= s <= 1.0 for s in [best, *raw]):
            shown = [(1.0 + s) / 2.0 for s in raw]
        elif self.strategy == "hybrid" and self.p.cfg.fusion == "rrf":
            shown = [s * (self.p.cfg.rrf_k + 1) / 2.0 for s in raw]
        else:
            shown = [math.exp(min(0.0, s - best)) for s in raw]
        return [min(1.0, max(MIN_SCORE, round(s, 6))) for s in shown]

    def _result(self, f: Fused, shown: float) -> dict[str, object]:
        return {
            "id": f.key.doc_id,
            "collection": f.key.collection,
            "score": shown,
            "matchedBy": list(f.matched_by),
        }

    def _explain(self, results: list[dict[str, object]], top: list[Fused], shown: list[float]) -> None:
        """Each result's `explainId`: the page's records go to the store in one write."""
        cfg = self.p.cfg
        ranking = Ranking(self.strategy, cfg.fusion, cfg.semantic_weight,
                          ranking_query(self.req.q, self.req.query_text), self.space)
        ids = self.p.explain.record(self.principal, ranking, list(zip(top, shown, strict=True)))
        for r, eid in zip(results, ids, strict=True):
            r["explainId"] = eid

    def _decorate(self, results: list[dict[str, object]], top: list[Fused]) -> None:
        wanted = self.req.include_fields
        if wanted and top:
            for r, f in zip(results, top, strict=True):
                r["fields"] = shown_fields(self._shown_ok[f.key], wanted)  # loaded by the page's re-check
        if self.req.include_highlights and top:
            text = self._lexical_text()
            docs = [self._shown_ok[f.key] for f in top]  # loaded by the page's re-check (_readable_top)
            hl = self.p.lexical.highlights(self.flt, text, [d for d in docs if d.readable_by(self.principal)])
            for r, f in zip(results, top, strict=True):
                if f.key in hl:
                    r["highlights"] = hl[f.key]
        self._locate_passages(results, top)
        if self.req.include_semantic and top:
            sides = self.p.store.sidecars([f.key for f in top], self.space)
            for r, f in zip(results, top, strict=True):
                r["__semantic"] = semantic_projection(sides.get(f.key), self.space)

    def _locate_passages(self, results: list[dict[str, object]], top: list[Fused]) -> None:
        """`passage` on each semantic hit of a long document: where its best passage sits."""
        locator, query = self.p.passages, self.semantic.vector
        semantic = [f.key for f in top if "semantic" in f.matched_by and locator is not None
                    and locator.is_long(self._shown_ok[f.key])]
        if locator is None or query is None or not semantic:
            return
        vectors = self.p.store.vectors_for(semantic, self.space)
        for r, f in zip(results, top, strict=True):
            vecs = vectors.get(f.key)
            if vecs is not None and len(vecs) > 1:
                where = locator.locate(self._shown_ok[f.key], vecs, query)
                if where is not None:
                    r["passage"] = where

    def warming(self) -> dict[str, object]:
        if self._answered:  # a later event of a stream (a first answer's pending came from reads just made)
            self._drop_unreadable_pending()
        n = len(self.pending)
        if n:
            msg = f"Warming up… {n} results are being indexed"
        elif self.budget_limited:
            msg = f"Embedding budget reached: {self.budget_limited} results wait for it"
        elif self.backpressure_limited:
            msg = f"Indexing is behind: {self.backpressure_limited} results wait until it catches up"
        else:
            msg = "Nothing to warm up"
        return {"queued": n, "message": msg}

    def _drop_unreadable_pending(self) -> None:
        """Pending documents the caller may no longer read (an ACL revoked, a filter no longer
        met since the touch) leave `pending`: neither a warming count nor the stream's wait may
        follow a document the caller cannot see. A deleted one stays, for `refresh` to count."""
        if not self.pending:
            return
        docs = self.p.store.get_docs(list(self.pending))
        where = self.req.where
        self.pending = {k for k in self.pending if k not in docs or (
            docs[k].readable_by(self.principal) and (not where or matches(where, docs[k].fields)))}

    def diagnostics(self, final: bool = False) -> dict[str, object]:
        sem = self.semantic
        state = sem.state
        if state == "ready" and self.pending:
            # still embedding touched documents; at `done` that means the wait bound passed
            state = "partial" if final else "warming"
        return {
            "strategy": self.strategy,
            "strategyReason": self.strategy_reason,
            "fusion": self.p.cfg.fusion if self.strategy == "hybrid" else None,
            "space": self.space,
            "model": (emb.model_id if (emb := self.p.embedder_for(self.space, self.principal.tenant)) else None),
            "buildingSpaces": list(self.building),
            "lexical": {"candidates": len(self._lexical_scores), "tookMs": round(self.lexical_ms, 3)},
            "semantic": {
                "state": state, "reason": sem.reason, "hits": len(sem.hits),
                "queued": self.queued_by_us, "pending": len(self.pending),
                "budgetLimited": self.budget_limited, "backpressureLimited": self.backpressure_limited,
                "resolved": dict(self.resolved),
                "tookMs": round(sem.took_ms, 3),
            },
            "followUp": self.follow_up_state,
            "elapsedMs": round((time.perf_counter() - self.started) * 1000, 3),
        }


def shown_fields(doc: StoredDoc, wanted: bool | tuple[str, ...]) -> dict[str, object]:
    """The stored fields a reader is shown: all (`True`) or the named ones that exist; never a
    `_`-prefixed field (`_acl`, `_vibe` live apart from the fields; this is belt and braces)."""
    if wanted is True:
        return {k: v for k, v in doc.fields.items() if not k.startswith("_")}
    names = wanted if isinstance(wanted, tuple) else ()
    return {k: doc.fields[k] for k in names if k in doc.fields and not k.startswith("_")}


def _standard(hits: Sequence[Hit]) -> list[float]:
    if not hits:
        return []
    scores = [h.score for h in hits]
    mean = sum(scores) / len(scores)
    sd = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5 or 1.0
    return [(s - mean) / sd for s in scores]


def semantic_projection(side: SidecarEntry | None, space: str) -> dict[str, object]:
    """`__semantic`: status, lastEmbeddedAt, space; the reason when one is kept."""
    if side is None:
        return {"status": SemanticStatus.NONE.value, "lastEmbeddedAt": None, "space": space}
    out: dict[str, object] = {
        "status": visible_status(side),
        "lastEmbeddedAt": iso_ms(side.last_embedded_at),
        "space": side.space,
    }
    if side.reason:
        out["reason"] = side.reason
    return out


def iso_ms(ts: float | None) -> str | None:
    """A stamp as the read and admin surfaces show it: UTC, milliseconds."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
