"""The content hash as admin clients see it, next to a document's sidecar state.

The store keys sidecars, vectors, cold copies and embedding jobs by `blake3:` over the
normalised text (shared/text/hashing.py says why it stays so); clients are shown `sha256:` over
the same normalised text, and may send either scheme back.
"""

from __future__ import annotations

from typing import Any

from shared.collection_settings import embed_fields_of
from shared.errors import invalid
from shared.model import SemanticStatus, SidecarEntry, StoredDoc
from shared.text.hashing import doc_text, parse_content_hash, same_content, visible_content_hash
from shared.text.redaction import select_fields

# A job is pending for the document in these states: its key is what a worker will run.
_PENDING = (SemanticStatus.QUEUED,)


def hashed_text(doc: StoredDoc, embed_fields: Any) -> str:
    """The text the document's content hash is taken over (its collection's embedded fields)."""
    allow = embed_fields_of(embed_fields, doc.key.tenant, doc.key.collection)
    return doc_text(select_fields(doc.fields, allow), allow)


def checked_hash(raw: str | None) -> str | None:
    """A content hash a client sent, checked before anything is read: 400 `invalid_params`."""
    if raw is None:
        return None
    try:
        parse_content_hash(raw)
    except ValueError as e:
        raise invalid(str(e), field="contentHash") from e
    return raw


def content_view(doc: StoredDoc, side: SidecarEntry | None, space: str, embed_fields: Any,
                 given: str | None) -> dict[str, Any]:
    """`contentHash`; `job` `{docId, space, contentHash}` while an embedding job is pending;
    `contentMatches` when the client sent a hash to compare (either scheme)."""
    text = hashed_text(doc, embed_fields)
    visible = visible_content_hash(text)
    out: dict[str, Any] = {"contentHash": visible}
    if side is not None and side.status in _PENDING:
        out["job"] = {"docId": doc.key.doc_id, "space": side.space, "contentHash": visible}
    if given is not None:
        out["contentMatches"] = same_content(given, text)
    return out
