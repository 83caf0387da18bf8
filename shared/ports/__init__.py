"""Ports: the Protocols the core is written against. One adapter per engine implements each;
the contract suite in tests/contract/ runs against every adapter.

One module per concern: `documents` (the store of record's documents, sidecar rows, vectors and
change log), `search` (lexical and vector indexes, the search filter), `embedders`, `queue`
(job queue, read budget), `usage`, `spaces` and `lifecycle` (what the lifecycle keeps in the
store), `cold` (the cold store), `follow_up`, `collection_store`, `ledger`, `explain`, and
`store` (`StoreOfRecord`, every part of the store). The broad store ports (`DocumentStore`,
`LifecycleStore`) are unions of narrow ones per consumer; type a consumer with the narrow port
it uses. This package re-exports every public name, so importers write
`from shared.ports import X` whichever module defines it (and `FieldCondition`, which a
`SearchFilter` holds, from here too).
"""

from __future__ import annotations

from shared.conditions import FieldCondition
from shared.ports.cold import ColdStore
from shared.ports.collection_store import CollectionStore
from shared.ports.documents import (
    Change,
    ChangeLog,
    CodeCursor,
    ColdRow,
    DocumentReader,
    DocumentStore,
    DocumentWriter,
    GonePage,
    RowCursor,
    StatusViews,
    VectorAudit,
)
from shared.ports.edges import EdgeStore
from shared.ports.embedders import Embedder, EmbedderError
from shared.ports.explain import ExplainStore
from shared.ports.follow_up import FollowUpStore
from shared.ports.ledger import ProviderLedger
from shared.ports.lifecycle import (
    BackfillStore,
    DeadLetters,
    EvictionStore,
    LifecycleStore,
    PromotionStore,
    SchedulerRuns,
    StorageReports,
    SweepStore,
)
from shared.ports.queue import Budget, JobQueue
from shared.ports.search import (
    Candidates,
    LexicalIndex,
    Rebuildable,
    ResolvedCandidates,
    SearchFilter,
    VectorIndex,
)
from shared.ports.spaces import SpaceStore
from shared.ports.store import StoreOfRecord
from shared.ports.usage import ProviderUsage, UsageStore

__all__ = [
    "BackfillStore",
    "Budget",
    "Candidates",
    "Change",
    "ChangeLog",
    "CodeCursor",
    "ColdRow",
    "ColdStore",
    "CollectionStore",
    "DeadLetters",
    "DocumentReader",
    "DocumentStore",
    "DocumentWriter",
    "Embedder",
    "EdgeStore",
    "EmbedderError",
    "EvictionStore",
    "ExplainStore",
    "FieldCondition",
    "FollowUpStore",
    "GonePage",
    "JobQueue",
    "LexicalIndex",
    "LifecycleStore",
    "PromotionStore",
    "ProviderLedger",
    "ProviderUsage",
    "Rebuildable",
    "ResolvedCandidates",
    "RowCursor",
    "SchedulerRuns",
    "SearchFilter",
    "SpaceStore",
    "StatusViews",
    "StorageReports",
    "StoreOfRecord",
    "SweepStore",
    "UsageStore",
    "VectorAudit",
    "VectorIndex",
]
