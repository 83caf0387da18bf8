"""One explain record as the store of record keeps it (shared/adapters/explain_sql.py), so an
`explainId` answers on every replica and after a restart until it expires.

`caller` binds the record to who ranked it (tenant, principals and certificates): only the same
caller gets it back, and then only while they may still read the document. `body` is the
ranking's own figures as JSON (strategy, fusion, each leg's contribution, the lexical query
text); never the document's text."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from shared.model import Principal


@dataclass(frozen=True, slots=True)
class ExplainRecord:
    id: str
    tenant: str
    caller: str
    collection: str
    doc_id: str
    expires_at: float
    body: str


def caller_of(principal: Principal) -> str:
    """The caller a record is bound to: a digest of the readable principals and certificates (a
    key and the tokens it mints with the same grants are one caller; wider or narrower grants are
    another)."""
    grants = json.dumps([sorted(principal.readable_acl), sorted(principal.certs)], separators=(",", ":"))
    return hashlib.sha256(grants.encode()).hexdigest()[:32]
