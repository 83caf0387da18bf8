"""GET /semantic/ledger: the provider-call ledger of the key's tenant (shared/ledger.py), paged
or exported as NDJSON. Rows name documents and fields, never text; every read is the key's
tenant's only (the tenant is part of every query, and the cursor is a position in the tenant's
own rows, so a made-up one reveals nothing)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import orjson
from pydantic import BaseModel, Field

from services.api.render import iso_ms
from shared.errors import invalid
from shared.ledger import LedgerRow
from shared.names import check_collection_name
from shared.ports import ProviderLedger

MAX_LIMIT = 1000
EXPORT_PAGE = 1000
NDJSON = "application/x-ndjson"
# What `since` may be, declared in the OpenAPI document as it is checked here, so every value the
# schema allows is answered: epoch seconds, or an ISO 8601 date or time from 1970 (no zone: UTC).
EPOCH = r"[0-9]{1,11}(\.[0-9]{1,9})?"
ISO = (r"(?P<y>19[7-9][0-9]|[2-9][0-9]{3})-(?P<m>0[1-9]|1[0-2])-(?P<d>0[1-9]|[12][0-9]|3[01])"
       r"(?P<time>[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
       r"(?P<zone>Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?")
SINCE_PATTERN = f"^(?:{EPOCH}|{ISO})$"
CURSOR_PATTERN = r"^[0-9]{1,18}$"  # a row's position: below 2**63 in both stores
_EPOCH = re.compile(f"^{EPOCH}$")
_ISO = re.compile(f"^{ISO}$")
_CURSOR = re.compile(CURSOR_PATTERN)


class LedgerEntry(BaseModel):
    """One document's part of one provider call (a query's row has no `_id` nor `fields`)."""

    callId: str = Field(description="shared by the rows of one batched provider call")
    tenant: str
    collection: str
    id: str | None = Field(alias="_id", description="the document; null for a query embedding")
    fields: list[str] | None = Field(description="the document's fields whose text was sent (never the text)")
    space: str
    provider: str
    model: str
    tokens: int = Field(description="this row's share of what the call billed; 0 for a failed call")
    purpose: str = Field(description="touch, eager, backfill, migration, query, tool or rerank (a read's "
                                     "reranker call: one row per document sent)")
    at: str = Field(description="when the call was made (UTC, ISO 8601)")
    outcome: str = Field(description="`ok`, or the failure's stable code (e.g. `rate_limited`)")

    model_config = {"populate_by_name": True}


class LedgerPage(BaseModel):
    rows: list[LedgerEntry]
    nextCursor: str | None = Field(description="pass as `cursor` for the next page; null at the end")
    oldestAt: str | None = Field(description="the tenant's oldest row kept (older ones are past retention)")
    retentionDays: int


def entry(r: LedgerRow) -> dict[str, object]:
    return {"callId": r.call_id, "tenant": r.tenant, "collection": r.collection, "_id": r.doc_id,
            "fields": None if r.fields is None else list(r.fields), "space": r.space, "provider": r.provider,
            "model": r.model, "tokens": r.tokens, "purpose": r.purpose, "at": iso_ms(r.at), "outcome": r.outcome}


def parse_since(raw: str | None) -> float | None:
    """ISO 8601 (a time without a zone is UTC) or epoch seconds; anything else is 400."""
    if raw is None:
        return None
    if _EPOCH.match(raw):
        return float(raw)
    m = _ISO.match(raw)
    if m is None:
        raise invalid("since must be ISO 8601 (2026-11-28T10:00:00Z) or epoch seconds", field="since")
    # a day past its month's end (2026-02-30) runs on into the next month, as the pattern allows it
    day = datetime(int(m["y"]), int(m["m"]), 1) + timedelta(days=int(m["d"]) - 1)
    if m["time"]:
        clock = datetime.fromisoformat("2000-01-01" + m["time"].replace(" ", "T").removesuffix("Z"))
        day = day.replace(hour=clock.hour, minute=clock.minute, second=clock.second,
                          microsecond=clock.microsecond, tzinfo=clock.tzinfo)
    stamp = day if day.tzinfo else day.replace(tzinfo=UTC)
    return max(0.0, stamp.timestamp())  # an offset may put 1970-01-01 before the epoch: every row


def parse_cursor(raw: str | None) -> int:
    if raw is None:
        return 0
    if not _CURSOR.match(raw):
        raise invalid("cursor is not one this endpoint gave", field="cursor")
    return int(raw)


def check_filters(collection: str | None, doc_id: str | None, limit: int) -> None:
    if collection is not None:
        check_collection_name(collection)
    if doc_id is not None and not 1 <= len(doc_id) <= 256:
        raise invalid("_id must be 1 to 256 characters", field="_id")
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid(f"limit must be between 1 and {MAX_LIMIT}", field="limit")


def page(ledger: ProviderLedger, tenant: str, collection: str | None, doc_id: str | None, since: float | None,
         after: int, limit: int, retention_days: int) -> dict[str, object]:
    rows = ledger.ledger_page(tenant, collection, doc_id, since, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return {"rows": [entry(r) for r in rows], "nextCursor": str(rows[-1].seq) if more else None,
            "oldestAt": iso_ms(ledger.oldest_ledger_at(tenant)), "retentionDays": retention_days}


def export(ledger: ProviderLedger, tenant: str, collection: str | None, doc_id: str | None, since: float | None,
           after: int) -> Iterator[bytes]:
    """Every matching row from `after` on, one JSON object a line, read a page at a time (the
    retention bounds how many there are)."""
    while True:
        rows = ledger.ledger_page(tenant, collection, doc_id, since, after, EXPORT_PAGE)
        if not rows:
            return
        yield b"".join(orjson.dumps(entry(r)) + b"\n" for r in rows)
        if len(rows) < EXPORT_PAGE:
            return
        after = rows[-1].seq


