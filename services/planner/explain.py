"""Explain records (explainability): why a result is where it is, looked up by the
`explainId` a ranking carries.

Records live in the store of record (shared/adapters/explain_sql.py) until their TTL, so an
id answers on every replica and after a restart; an in-process LRU in front answers this
replica's own ids without a query. A ranking's records are written in one batch, and a
record holds the ranking's figures and the lexical query text, never the document's text:
the reasons that need the document (highlights, certificates, why it is not embedded) are
made at lookup, from the document as it is then, for a caller who may still read it.

A record is bound to its caller (tenant, principals, certificates: shared/explain_record.py);
anyone else, and a caller who lost the document, gets the same answer as for an unknown id."""

from __future__ import annotations

import html
import json
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.planner.graph import edge_explained, is_edge_record
from shared.explain_record import ExplainRecord, caller_of
from shared.metrics import METRICS
from shared.model import DocKey, Principal, SemanticStatus, SidecarEntry, StoredDoc

if TYPE_CHECKING:
    from services.planner.fusion import Fused
    from shared.ports import DocumentReader, ExplainStore, LexicalIndex, SearchFilter

log = logging.getLogger(__name__)

# An explainId is secrets.token_urlsafe(12): 16 characters of [A-Za-z0-9_-]. Anything else is
# unknown without asking the store (and bounds what a caller can make it look up).
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Expired records are swept by whichever process writes, at most this often, a bounded batch.
SWEEP_EVERY_SECONDS = 60.0
SWEEP_BATCH = 5_000
QUERY_CHARS = 2_000  # the lexical query text a record keeps (the read's own bound is larger)

# One cached record: (tenant, caller, collection, doc id, expires at, body). A flat tuple of
# atomic values: the collector stops tracking such a tuple after one pass, so 50,000 cached
# records cost later collections nothing (a dict each made every full collection of a busy
# server walk ~400k objects, 27 ms a pause).
_Cached = tuple[str, str, str, str, float, str]


@dataclass(frozen=True, slots=True)
class Ranking:
    """What every record of one ranking shares."""

    strategy: str  # keyword | semantic | hybrid
    fusion: str  # zscore | rrf (hybrid), else none
    semantic_weight: float
    query: str | None  # the lexical leg's text when the caller typed it (never a document's text)
    space: str


class Explains:
    def __init__(self, store: ExplainStore | None = None, ttl_seconds: float = 3600.0,
                 per_tenant: int = 100_000, clock: Callable[[], float] = time.time, capacity: int = 50_000):
        self.store = store
        self.ttl = ttl_seconds
        self.per_tenant = per_tenant
        self.clock = clock
        self.capacity = capacity
        self._items: OrderedDict[str, _Cached] = OrderedDict()
        self._lock = threading.Lock()
        self._swept_at = clock()  # the first sweep is due a period after start, not on the first read
        self._sweeping = False

    def record(self, principal: Principal, ranking: Ranking, page: Sequence[tuple[Fused, float]],
               rerank: Sequence[dict[str, object] | None] | None = None) -> list[str]:
        """One id per hit of `page` ((fused, shown score) pairs), written in one batch; `rerank`:
        each hit's part of the rerank stage (services/planner/rerank.py), when the read asked for it."""
        stage = rerank if rerank is not None else [None] * len(page)
        now = self.clock()
        caller, expires = caller_of(principal), now + self.ttl
        records = [ExplainRecord(secrets.token_urlsafe(12), principal.tenant, caller, f.key.collection,
                                 f.key.doc_id, expires, _body(ranking, f, shown, rr))
                   for (f, shown), rr in zip(page, stage, strict=True)]
        return self._keep(records, now)

    def record_bodies(self, principal: Principal, items: Sequence[tuple[DocKey, str]]) -> list[str]:
        """One id per (document, body) pair, as `record` writes a ranking's (graph neighbours:
        services/planner/graph.py)."""
        now = self.clock()
        caller, expires = caller_of(principal), now + self.ttl
        return self._keep([ExplainRecord(secrets.token_urlsafe(12), principal.tenant, caller, k.collection,
                                         k.doc_id, expires, body) for k, body in items], now)

    def _keep(self, records: list[ExplainRecord], now: float) -> list[str]:
        with self._lock:
            for r in records:
                self._items[r.id] = (r.tenant, r.caller, r.collection, r.doc_id, r.expires_at, r.body)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            METRICS.explain_cache.set(len(self._items))
        if self.store is not None and records:
            try:
                self.store.put_explains(records, self.per_tenant)
            except Exception:  # an explain link is worth less than the answer it decorates
                log.warning("explain records not stored; their ids answer on this replica only", exc_info=True)
            self._maybe_sweep(now)
        return [r.id for r in records]

    def lookup(self, principal: Principal, explain_id: str) -> ExplainRecord | None:
        """The record, if `explain_id` is known, unexpired and was issued to this caller."""
        if not ID_PATTERN.fullmatch(explain_id):
            return None
        now = self.clock()
        with self._lock:
            item = self._items.get(explain_id)
        record = ExplainRecord(explain_id, *item) if item is not None else None
        if record is None and self.store is not None:
            record = self.store.get_explain(explain_id, now)
        if record is None or record.expires_at <= now:
            return None
        if record.tenant != principal.tenant or record.caller != caller_of(principal):
            return None
        return record

    def sweep(self) -> int:
        """Expired records go from the store (a bounded batch) and from this process's cache;
        the rows gauge is refreshed."""
        now = self.clock()
        self._swept_at = now
        with self._lock:
            for eid in [k for k, v in self._items.items() if v[4] <= now]:
                del self._items[eid]
            METRICS.explain_cache.set(len(self._items))
        if self.store is None:
            return 0
        gone = self.store.prune_explains(now, SWEEP_BATCH)
        METRICS.explain_records.set(self.store.count_explains())
        return gone

    def _maybe_sweep(self, now: float) -> None:
        """Start a sweep in the background when one is due: the read that happens to be due must
        not wait for a DELETE and a COUNT over every tenant's records."""
        with self._lock:
            if self._sweeping or now - self._swept_at < min(SWEEP_EVERY_SECONDS, self.ttl):
                return
            self._sweeping, self._swept_at = True, now
        threading.Thread(target=self._sweep_quietly, name="explain-sweep", daemon=True).start()

    def _sweep_quietly(self) -> None:
        try:
            self.sweep()
        except Exception:  # the next due write sweeps again
            log.warning("explain sweep failed", exc_info=True)
        finally:
            self._sweeping = False


def _body(r: Ranking, f: Fused, shown: float, rerank: dict[str, object] | None = None) -> str:
    return json.dumps({
        **({"rr": rerank} if rerank is not None else {}),
        "strategy": r.strategy, "fusion": r.fusion if r.strategy == "hybrid" else "none", "score": f.score,
        "shown": shown, "w": r.semantic_weight, "space": r.space, "q": r.query,
        "lex": None if f.lexical_norm is None else [f.lexical_rank, f.lexical_score, f.lexical_norm,
                                                     f.lexical_part],
        "sem": None if f.semantic_norm is None else [f.semantic_rank, f.semantic_score, f.semantic_norm,
                                                      f.semantic_part, f.stand_in],
    }, separators=(",", ":"))


def ranking_query(q: str, query_text: str | None) -> str | None:
    """The text a record keeps for highlighting at lookup: what the caller typed, bounded. A
    more-like-this query's text is another document's, so it is not kept."""
    text = q if q.strip() else (query_text or "")
    return text[:QUERY_CHARS] if text.strip() else None


# -- the answer ------------------------------------------------------------------------------


def weights(body: Mapping[str, Any]) -> dict[str, float]:
    if body["strategy"] != "hybrid":
        return {"keyword": 1.0} if body["strategy"] == "keyword" else {"semantic": 1.0}
    if body["fusion"] == "rrf":
        return {"keyword": 1.0, "semantic": 1.0}
    w = float(body["w"])
    return {"keyword": 1.0 - w, "semantic": w}


def contributions(body: Mapping[str, Any]) -> list[dict[str, object]]:
    """Each leg's raw score, normalised score and share of the final score (the shares sum to it)."""
    w = weights(body)
    out: list[dict[str, object]] = []
    for leg, name in (("lex", "keyword"), ("sem", "semantic")):
        part = body.get(leg)
        if part is None:
            continue
        item: dict[str, object] = {"leg": name, "rank": part[0], "raw": part[1], "normalised": part[2],
                                   "weight": w.get(name, 0.0), "contribution": part[3]}
        if name == "semantic" and part[4]:
            item["standIn"] = True
        out.append(item)
    return out


def match_reasons(body: Mapping[str, Any], doc: StoredDoc, highlights: Sequence[str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    lex, sem = body.get("lex"), body.get("sem")
    if lex is not None and lex[0] is not None:
        by_field: dict[str, list[str]] = {}
        for fragment in highlights:
            by_field.setdefault(field_of(fragment, doc.fields), []).append(fragment)
        base = {"type": "match", "leg": "keyword", "rank": lex[0], "score": lex[1]}
        out.extend({**base, "field": name, "highlights": frags} for name, frags in by_field.items())
        if not by_field:
            out.append(base)
    if sem is not None and sem[0] is not None:
        out.append({"type": "match", "leg": "semantic", "rank": sem[0], "score": sem[1]})
    return out


_TAG = re.compile(r"<[^>]*>")
_MARKED = re.compile(r"<b>(.*?)</b>", re.S)


def field_of(fragment: str, fields: Mapping[str, Any]) -> str:
    """The document field a highlight fragment came from: the one holding its text, else the
    first holding one of its marked terms; `_all` when none does (a fragment across fields)."""
    plain = html.unescape(_TAG.sub("", fragment)).strip()
    texts = [(name, _text(value)) for name, value in fields.items() if not name.startswith("_")]
    for name, text in texts:
        if plain and plain in text:
            return name
    for term in (html.unescape(t).lower() for t in _MARKED.findall(fragment)):
        for name, text in texts:
            if term and term in text.lower():
                return name
    return "_all"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(_text(v) for v in value.values())
    return ""


def cert_reasons(doc: StoredDoc) -> list[dict[str, object]]:
    """Each certificate the document requires (the caller holds them all, or it would not be here)."""
    out: list[dict[str, object]] = []
    for cert in doc.certs:
        issuer, _, name = cert.partition(":")
        out.append({"type": "cert", "issuer": issuer, "name": name, "rule": "required"})
    return out


def not_embedded(side: SidecarEntry | None, space: str) -> list[dict[str, object]]:
    """Why the document has no vector in the ranking's space (nothing when it has one)."""
    if side is None:
        return [{"type": "not_embedded", "status": SemanticStatus.NONE.value, "reason": "no sidecar row yet",
                 "space": space}]
    if side.status == SemanticStatus.READY:
        return []
    reason = side.reason
    if side.status == SemanticStatus.NONE and side.cold_ref is not None:
        reason = reason or "evicted to the cold store"
    return [{"type": "not_embedded", "status": side.status.value, "reason": reason, "space": space}]


def answer(record: ExplainRecord, doc: StoredDoc, side: SidecarEntry | None,
           highlights: Sequence[str]) -> dict[str, object]:
    body = json.loads(record.body)
    out: dict[str, object] = {
        "id": record.doc_id, "collection": record.collection, "strategy": body["strategy"],
        "score": body["score"], "fusion": body["fusion"], "shownScore": body["shown"],
        "weights": weights(body), "contributions": contributions(body),
        "reasons": [*match_reasons(body, doc, highlights), *cert_reasons(doc),
                    *not_embedded(side, str(body["space"]))],
        "expiresAt": record.expires_at,
    }
    if body.get("rr") is not None:
        out["rerank"] = body["rr"]
    return out


def explained(explains: Explains, principal: Principal, explain_id: str, store: DocumentReader,
              lexical: LexicalIndex, flt: Callable[[Principal, str], SearchFilter]) -> dict[str, object] | None:
    """The answer of GET /v1/explain/{id}: None (unknown) unless the record is this caller's and
    the caller may read the document now. Highlights are asked of the lexical index with the
    caller's own filter, for this one document, so they are what a read would show them."""
    record = explains.lookup(principal, explain_id)
    if record is None:
        return None
    doc = store.get_doc(DocKey(principal.tenant, record.collection, record.doc_id))
    if doc is None or not doc.readable_by(principal):
        return None
    body = json.loads(record.body)
    if is_edge_record(body):  # a graph neighbour: its path, every edge and end on it checked again
        return edge_explained(record, body, store, principal, cert_reasons(doc))
    highlights: list[str] = []
    if body.get("lex") is not None and body.get("q"):
        highlights = lexical.highlights(flt(principal, record.collection), str(body["q"]), [doc]).get(doc.key, [])
    return answer(record, doc, store.sidecar(doc.key, str(body["space"])), highlights)
