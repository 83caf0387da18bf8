"""Python client for vibe-semantic (its HTTP API).

    from vibe_semantic_client import Client

    with Client("http://127.0.0.1:8080", "my-key") as vibe:
        vibe.put("posts", "p1", {"title": "Consent patterns", "body": "..."})
        answer = vibe.read("posts", "consent UX for shared notes")        # one JSON answer
        for event in vibe.read_once("posts", "consent UX for shared notes"):  # the stream
            print(event.event, [hit.id for hit in event.results])
        print(vibe.coverage("posts").indexed_pct)                          # typed admin answers
"""

from vibe_semantic_client._base import ClientConfig
from vibe_semantic_client._core import RetryPolicy
from vibe_semantic_client.aio import AsyncClient
from vibe_semantic_client.answers import (
    Activated,
    Backfills,
    CertReason,
    CollectionDeleted,
    CollectionList,
    CollectionSettings,
    Coverage,
    DeadLetters,
    Deleted,
    DeletedByFilter,
    Demoted,
    DocStatus,
    EdgeReason,
    Evicted,
    ExplainReason,
    Explanation,
    FollowUpView,
    Health,
    KeyCreated,
    Keys,
    Lag,
    LedgerEntry,
    LedgerPage,
    LegContribution,
    MatchReason,
    Migrating,
    Mismatch,
    Model,
    NotEmbeddedReason,
    Promoted,
    Promotions,
    QueueDepth,
    Reindexing,
    RerankContribution,
    Revoked,
    SchedulerView,
    Spaces,
    TokenCreated,
    Usage,
    Written,
)
from vibe_semantic_client.client import Client
from vibe_semantic_client.errors import (
    Conflict,
    DimensionMismatch,
    EmbedderUnavailable,
    Forbidden,
    InternalError,
    InvalidParams,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    RateLimited,
    ServiceUnavailable,
    Timeout,
    TransportError,
    Unauthorized,
    VibeError,
)
from vibe_semantic_client.models import (
    BulkResult,
    Done,
    Error,
    Event,
    Hit,
    Lexical,
    Neighbor,
    Passage,
    ReadAnswer,
    Rerank,
    Semantic,
    Strategy,
    Warming,
)
from vibe_semantic_client.streams import AsyncReadStream, ReadStream

__version__ = "0.2.0"
__all__ = [
    "Activated", "AsyncClient", "AsyncReadStream", "Backfills", "BulkResult", "Client", "ClientConfig",
    "CollectionDeleted", "CollectionList", "CollectionSettings", "Conflict", "Coverage", "DeadLetters", "Deleted",
    "DeletedByFilter", "Demoted", "DimensionMismatch", "DocStatus", "Done", "EmbedderUnavailable", "Error", "Event",
    "CertReason", "EdgeReason", "Evicted", "ExplainReason", "Explanation", "LegContribution", "MatchReason",
    "NotEmbeddedReason", "FollowUpView", "Forbidden", "Health", "Hit", "InternalError", "InvalidParams",
    "KeyCreated", "Keys", "Lag", "LedgerEntry", "Rerank", "RerankContribution",
    "LedgerPage", "Lexical", "MethodNotAllowed", "Migrating", "Mismatch", "Model", "Neighbor", "NotFound",
    "Passage", "PayloadTooLarge", "Promoted", "Promotions", "QueueDepth", "QuotaExceeded", "RateLimited", "ReadAnswer",
    "ReadStream", "Reindexing", "RetryPolicy", "Revoked", "SchedulerView", "Semantic", "ServiceUnavailable", "Spaces",
    "Strategy", "Timeout", "TokenCreated", "TransportError", "Unauthorized", "Usage", "VibeError", "Warming",
    "Written"
]
