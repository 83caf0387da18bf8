"""What a read depends on: its configuration and the ports and services it reads and spends through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from services.core.rerank_usage import RerankBudget
from services.core.usage import UsageRecorder
from services.planner.auto_state import CoverageCache
from services.planner.explain import Explains
from services.planner.fusion import (
    DEFAULT_SEMANTIC_WEIGHT,
)
from services.planner.graph import GraphBounds
from services.planner.passages import PassageLocator
from services.planner.query_cache import QueryVectorCache
from services.planner.touch_policy import TouchPolicy
from services.planner.touch_switch import FollowUpSwitch
from shared.agent_ports import Reranker
from shared.backpressure import Backpressure, TenantShare
from shared.foreground import Foreground
from shared.indexing import IndexFollower
from shared.model import (
    Principal,
    StoredDoc,
)
from shared.ports import (
    Budget,
    Embedder,
    FieldCondition,
    JobQueue,
    LexicalIndex,
    SearchFilter,
    StoreOfRecord,
    VectorIndex,
)
from shared.spaces import FixedSpace, Spaces
from shared.text.hashing import doc_text


@dataclass
class PlannerConfig:
    space: str
    lexical_candidates: int
    per_query_max_embeds: int
    rrf_k: int
    fusion: str = "zscore"  # zscore | rrf (services/planner/fusion.py)
    semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT  # chosen leave-one-collection-out (fusion.py)
    touch: TouchPolicy = field(default_factory=TouchPolicy)
    stand_in: str = "line"  # line | agree: an unembedded candidate's semantic z (fusion.zscore)
    # A streamed semantic read may search first for its page only (ReadSession._short_semantic):
    # on for an exact vector index (the embedded one), where a short list's page is the full
    # list's page; an approximate one (HNSW) may rank a short search differently.
    short_first_page: bool = False
    # Global reads (services/planner/fanout.py): collections with a leg of their own (the rest
    # share one), and the fewest candidates each leg is guaranteed in the merged list.
    global_max_collections: int = 32
    global_min_share: int = 20


class PlannerDeps:
    """The ports and services a read uses, with its configuration (`Planner` adds the read flow)."""

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
        # The optional rerank stage (services/planner/rerank.py), set by the composition root:
        # the reranker (None: not configured, a read asking for it is refused), the page's
        # documents it may receive, and each document's text as the semantic leg embeds it.
        self.reranker: Reranker | None = None
        # the rerankers a read may name besides `default` (VIBE_RERANK_PROVIDERS), and each
        # tenant's reranker calls a minute (services/core/rerank_usage.py; None: no bound)
        self.rerankers: dict[str, Reranker] = {}
        self.rerank_budget: RerankBudget | None = None
        self.graph = GraphBounds()  # a read's graph hydration (VIBE_GRAPH_MAX_NEIGHBORS_*)
        # each collection's embedded share, for `auto` (services/planner/auto_state.py; None: by shape only)
        self.coverage: CoverageCache | None = None
        self.rerank_candidates = 50
        self.rerank_text: Callable[[StoredDoc], str] = lambda d: doc_text(d.fields, None)
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

    def reranker_named(self, name: str) -> Reranker | None:
        """The reranker a read names (`default`: VIBE_RERANK_URL); None: not configured."""
        return self.reranker if name == "default" else self.rerankers.get(name)

    def embedder_for(self, space: str, tenant: str | None = None) -> Embedder | None:
        """The embedder of the tenant's space (space names are per tenant)."""
        if self.embedder is None or self.embedders is None or space == self.cfg.space:
            return self.embedder
        return self.embedders(space, tenant)

    def search_filter(self, principal: Principal, collection: str,
                      where: tuple[FieldCondition, ...] = ()) -> SearchFilter:
        cols = None if collection == "any" else (collection,)
        # an end-user token's own filter is ANDed to the request's, inside every engine query
        return SearchFilter(principal.tenant, cols, tuple(principal.readable_acl), (*where, *principal.filter),
                            certs=principal.certs)
