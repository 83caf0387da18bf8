"""Python client for vibe-semantic (its HTTP API: DESIGN.md §5).

    from vibe_semantic_client import Client

    with Client("http://127.0.0.1:8080", "my-key") as vibe:
        vibe.put("posts", "p1", {"title": "Consent patterns", "body": "..."})
        for event in vibe.stream("posts", "consent UX for shared notes"):
            print(event.event, [hit.id for hit in event.results])
"""

from vibe_semantic_client._base import ClientConfig
from vibe_semantic_client._core import RetryPolicy
from vibe_semantic_client.aio import AsyncClient
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
    ReadAnswer,
    Semantic,
    Strategy,
    Warming,
)

__version__ = "0.1.0"
__all__ = [
    "AsyncClient", "BulkResult", "Client", "ClientConfig", "Conflict", "DimensionMismatch", "Done",
    "EmbedderUnavailable", "Error", "Event", "Forbidden", "Hit", "InternalError", "InvalidParams", "Lexical",
    "MethodNotAllowed", "NotFound", "PayloadTooLarge", "QuotaExceeded", "RateLimited", "ReadAnswer", "RetryPolicy",
    "Semantic", "ServiceUnavailable", "Strategy", "Timeout", "TransportError", "Unauthorized", "VibeError", "Warming",
]
