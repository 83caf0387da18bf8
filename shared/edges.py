"""The graph overlay's edges: documents of the collection `semantic.edges`,
`{"from": "<collection>/<id>", "to": "<collection>/<id>", "predicate": "...", "weight"?: 0..1}`
with `_acl` and `_certs` as any document.

An edge is stored, logged and synced like any document, but it is never embedded, never sent
to a provider and never put in the lexical index: its text is two references and a predicate,
and a search hit on it would show the ids of documents the reader may not see. Edges are read
only through a read's `graph` hydration (services/planner/graph.py), which shows one only
where the caller may read the edge and both of its ends.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from shared.errors import invalid
from shared.model import DocKey, StoredDoc
from shared.names import is_collection_name

EDGES = "semantic.edges"
EDGE_FIELDS = ("from", "to", "predicate", "weight")
PREDICATE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
MAX_REF_ID_CHARS = 256  # a document id's bound (services/core/documents.py check_doc_id)
DEFAULT_WEIGHT = 1.0
EDGE_NOT_EMBEDDED = "graph edge: never embedded"
# Collections a reference may not name: the ones a read gives a meaning of its own, and edges.
_NOT_NODES = {"any", "semantic.nodes", EDGES}


def is_edge(key: DocKey) -> bool:
    return key.collection == EDGES


@dataclass(frozen=True, slots=True)
class Edge:
    """One stored edge, its ends resolved to the tenant's document keys."""

    doc: StoredDoc
    src: DocKey
    dst: DocKey
    predicate: str
    weight: float

    @property
    def id(self) -> str:
        return self.doc.key.doc_id


def ref_of(key: DocKey) -> str:
    return f"{key.collection}/{key.doc_id}"


def parse_ref(raw: object, field: str) -> tuple[str, str]:
    """`<collection>/<id>`: the collection name is split at the first `/` (names have none)."""
    if not isinstance(raw, str):
        raise invalid(f"{field} must be a string \"<collection>/<id>\"", field=field)
    collection, sep, doc_id = raw.partition("/")
    if not sep or not is_collection_name(collection) or collection in _NOT_NODES:
        raise invalid(f"{field} must be \"<collection>/<id>\" naming a document collection; got {raw[:64]!r}",
                      field=field)
    if not 0 < len(doc_id) <= MAX_REF_ID_CHARS or any(ord(ch) < 32 for ch in doc_id):
        raise invalid(f"{field}: the id after the collection must be 1 to {MAX_REF_ID_CHARS} characters "
                      "without control characters", field=field)
    return collection, doc_id


def check_edge_fields(fields: dict[str, Any]) -> None:
    """An edge document's fields (`_`-prefixed ones are checked as any document's): a bad one
    is refused with the field it is about."""
    extra = sorted(k for k in fields if k not in EDGE_FIELDS)
    if extra:
        raise invalid(f"an edge holds only from, to, predicate and weight; not {', '.join(extra)[:200]}",
                      field=extra[0])
    for name in ("from", "to", "predicate"):
        if name not in fields:
            raise invalid(f"an edge needs {name!r}", field=name)
    src = parse_ref(fields["from"], "from")
    dst = parse_ref(fields["to"], "to")
    if src == dst:
        raise invalid("an edge may not join a document to itself", field="to")
    predicate = fields["predicate"]
    if not isinstance(predicate, str) or PREDICATE_RE.fullmatch(predicate) is None:
        raise invalid("predicate must be 1 to 64 characters of A-Z a-z 0-9 _ . : -, starting with a letter",
                      field="predicate")
    if "weight" in fields:
        w = fields["weight"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or not 0 <= w <= 1:
            raise invalid("weight must be a number from 0 to 1", field="weight")


def edge_of(doc: StoredDoc) -> Edge | None:
    """The edge a stored document holds (None: not a well-formed edge, which writes refuse)."""
    try:
        src = parse_ref(doc.fields.get("from"), "from")
        dst = parse_ref(doc.fields.get("to"), "to")
    except Exception:  # noqa: BLE001 - a malformed row shows nothing rather than failing a read
        return None
    w = doc.fields.get("weight", DEFAULT_WEIGHT)
    weight = float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) else DEFAULT_WEIGHT
    return Edge(doc, DocKey(doc.key.tenant, *src), DocKey(doc.key.tenant, *dst),
                str(doc.fields.get("predicate", "")), weight)
