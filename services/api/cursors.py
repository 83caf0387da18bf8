"""Read cursors (`cursor` / `nextCursor` in `/v1/read`): opaque, bound to one query
and one API key, unforgeable.

A cursor is the next page's offset in the query's ranking plus an HMAC-SHA256, under the
server secret (services/mcp/secret.py, the same secret every replica of a deployment shares),
over the offset, the query (everything in the body that decides the ranking: collection, q,
semantic, filter, global; not `limit` or `include`, which a client may change between pages)
and the caller's key. A cursor that is not one (wrong length or alphabet) answers 400
`invalid_params`; a well-formed one that does not verify (another query's or key's, or
altered) answers 404 `not_found`, as an unknown id does: whether a cursor is genuine cannot be
stated in the OpenAPI schema, and a schema-valid request is never refused as malformed
(tests/security/test_schema_fuzz.py; Elasticsearch answers an unknown scroll id 404 too).

Pages are offsets into the ranking as it is when each page is asked for, as in Typesense and
Meilisearch: while embeddings arrive, a hybrid ranking may still move.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
from typing import Any

import orjson

from services.core.secret import server_secret
from shared.config import Settings
from shared.errors import ErrorCode, VibeError, invalid

_LABEL = b"vibe-read-cursor\x1f"
_MAC_BYTES = 16
SHAPE = re.compile(r"[A-Za-z0-9_-]{32}")  # base64url of 8 + 16 bytes, unpadded
_secrets: dict[str, bytes] = {}
_lock = threading.Lock()


def _secret(s: Settings) -> bytes:
    where = str(s.data_dir) + "\x1f" + (s.mcp_task_secret or "")
    with _lock:
        if where not in _secrets:
            _secrets[where] = hashlib.sha256(_LABEL + server_secret(s)).digest()  # a key of its own
        return _secrets[where]


def binding(query: dict[str, Any], token: str) -> bytes:
    """What a cursor is bound to: the ranking-deciding part of the body and the key."""
    canon = orjson.dumps(query, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canon).digest() + hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _mac(s: Settings, offset: int, bound: bytes) -> bytes:
    return hmac.new(_secret(s), offset.to_bytes(8, "big") + bound, hashlib.sha256).digest()[:_MAC_BYTES]


def encode(s: Settings, offset: int, bound: bytes) -> str:
    raw = offset.to_bytes(8, "big") + _mac(s, offset, bound)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(s: Settings, cursor: str, bound: bytes) -> int:
    """The offset a cursor carries; 400 if it is malformed, 404 if it is altered or another
    query's or key's."""
    if not SHAPE.fullmatch(cursor):  # what the OpenAPI pattern declares
        raise invalid("cursor is malformed: pass the nextCursor of the previous page", field="cursor")
    raw = base64.urlsafe_b64decode(cursor)
    offset = int.from_bytes(raw[:8], "big")
    if not hmac.compare_digest(raw[8:], _mac(s, offset, bound)):
        raise VibeError(ErrorCode.NOT_FOUND, "unknown cursor: it belongs to another query or key, or was altered",
                        {"field": "cursor"})
    return offset
