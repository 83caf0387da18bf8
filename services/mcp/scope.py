"""`scope` (SurfSense-compatible): the typed filter that narrows a search's haystack, applied INSIDE
the engine queries (an id allow-list, `SearchFilter.ids`, and field conditions,
`SearchFilter.where`), never as a post-filter of a top list (which lost in-scope documents
ranked past the candidate depth in large collections).

Each non-empty key is one constraint and every constraint must hold (SQL's `WHERE a IN (...)
AND b IN (...)`); ids inside one key are alternatives. An empty list is no constraint. Ids
are strings or integers; `7` and `"7"` name the same id.

Keys and what they map to here:
- `document_ids`: a document of the collection; a file indexed by `reindex` is one document
  whose chunks are `<file id>~<i>`, so its id covers every chunk (a chunk id names one chunk);
- `folder_ids`: folder ids, not paths. A document is in folder F when its `folder_id` field
  holds F (one id or a list). `reindex` gives every folder it reads a stable integer id and
  stores on each chunk the ids of the file's folder and of every enclosing folder up to the
  indexed location, so a folder's id covers its subfolders; search_knowledge_base results
  show a chunk's `folder_id`;
- `connector_ids`: documents whose `connector_id` field holds one of the ids (what a connector
  sync writes); this server runs no connectors, so only documents written with that field match;
- `thread_ids`: documents whose `thread_id` field holds one of the ids (indexed chat turns);
- `paths` (ours): files `reindex` stored, by the path it stored (relative to the location) or
  the file's absolute path, prefix by whole path segments;
- `collection_ids` (ours): collections to search instead of the default one.

Ids the caller cannot read, or that do not exist, simply match nothing: every constraint only
narrows the caller's tenant+ACL filter, so no scope can widen what a caller sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from services.container import Container
from services.core.documents import check_collection
from services.mcp.errors import invalid
from shared.conditions import FieldCondition, Scalar
from shared.errors import VibeError
from shared.model import DocKey, Principal, StoredDoc

SCOPE_KEYS = {"document_ids", "folder_ids", "connector_ids", "thread_ids", "collection_ids", "paths"}
# The scope keys served by a document field, and that field.
FIELD_KEYS = {"folder_ids": "folder_id", "connector_ids": "connector_id", "thread_ids": "thread_id"}
CHUNK_SEP = "~"  # chunk doc id = <file id>~<chunk index>
ANY = "any"
SCAN_BATCH = 500


@dataclass(frozen=True)
class Scope:
    collections: tuple[str, ...]
    ids: frozenset[DocKey] | None = None  # None = no id constraint
    where: tuple[FieldCondition, ...] = ()  # field conditions, all must hold

    @property
    def narrows(self) -> bool:
        return self.ids is not None or bool(self.where)


def check_search_collection(name: str) -> str:
    """A collection an agent may search: a valid name, never a reserved task collection, or
    `any` (every collection of the tenant, as for POST /v1/read)."""
    if name == ANY:
        return name
    try:
        check_collection(name)
    except VibeError as e:
        raise invalid(f"invalid collection name {name[:64]!r}") from e
    return name


def _ids(raw: dict[str, Any], name: str, max_chars: int) -> list[str]:
    v = raw.get(name)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str | int) and not isinstance(x, bool) and str(x) for x in v):
        raise invalid(f"scope.{name} must be a list of ids")
    out = [str(x) for x in v]
    if any(len(x) > max_chars for x in out):
        raise invalid(f"scope.{name} has an id longer than {max_chars} characters")
    return out


def file_heads(c: Container, tenant: str, collection: str) -> Iterator[StoredDoc]:
    """Chunk 0 of every file `reindex` stored in a collection (one store scan, in batches)."""
    keys = [k for k in c.store.collection_keys(tenant, collection) if k.doc_id.endswith(CHUNK_SEP + "0")]
    for i in range(0, len(keys), SCAN_BATCH):
        yield from c.store.get_docs(keys[i:i + SCAN_BATCH]).values()


def file_chunk_keys(head: StoredDoc) -> list[DocKey]:
    """Every chunk key of the file whose chunk 0 is `head`."""
    meta = head.fields.get("meta")
    count = meta.get("chunk_count") if isinstance(meta, dict) else None
    n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    fid = head.key.doc_id[: -len(CHUNK_SEP + "0")]
    k = head.key
    return [DocKey(k.tenant, k.collection, f"{fid}{CHUNK_SEP}{i}") for i in range(n)]


def file_source(doc: StoredDoc) -> str:
    meta = doc.fields.get("meta")
    src = meta.get("file") if isinstance(meta, dict) else None
    return src if isinstance(src, str) else ""


def under_path(doc: StoredDoc, prefixes: list[str]) -> bool:
    rel = doc.fields.get("path")
    names = [n for n in (rel if isinstance(rel, str) else "", file_source(doc)) if n]
    for f in prefixes:
        base = f.rstrip("/")
        if not base:  # "/" or "": the root holds everything
            return True
        if any(n == base or PurePosixPath(n).is_relative_to(base) for n in names):
            return True
    return False


def _document_keys(c: Container, tenant: str, collection: str, doc_ids: list[str]) -> set[DocKey]:
    out: set[DocKey] = set()
    heads = c.store.get_docs([DocKey(tenant, collection, f"{d}{CHUNK_SEP}0") for d in doc_ids
                              if CHUNK_SEP not in d])
    for d in doc_ids:
        out.add(DocKey(tenant, collection, d))  # a plain document, or one chunk by its id
        head = heads.get(DocKey(tenant, collection, f"{d}{CHUNK_SEP}0"))
        if head is not None:
            out.update(file_chunk_keys(head))
    return out


def id_values(ids: list[str]) -> tuple[Scalar, ...]:
    """An id as a field may hold it: the string, and for a decimal string also the integer (a
    client sends `7` or `"7"`; a document stores one or the other)."""
    out: list[Scalar] = []
    for x in ids:
        out.append(x)
        try:
            n = int(x) if x.isascii() and len(x) <= 17 else None
        except ValueError:
            n = None
        if n is not None and str(n) == x and abs(n) < 2**53:  # canonical, and exact as a JSON number
            out.append(n)
    return tuple(dict.fromkeys(out))


def field_conditions(lists: dict[str, list[str]]) -> tuple[FieldCondition, ...]:
    return tuple(FieldCondition(name, "in", id_values(lists[key]))
                 for key, name in sorted(FIELD_KEYS.items()) if lists[key])


def resolve(c: Container, p: Principal, raw: dict[str, Any] | None, collection: str) -> Scope:
    s = c.settings
    if raw is None:
        return Scope((check_search_collection(collection),))
    if not isinstance(raw, dict):
        raise invalid("scope must be an object")
    unknown = set(raw) - SCOPE_KEYS
    if unknown:
        raise invalid(f"unknown scope key(s): {', '.join(sorted(unknown))[:200]}; use "
                      f"{', '.join(sorted(SCOPE_KEYS))}")
    lists = {name: _ids(raw, name, s.mcp_max_id_chars) for name in SCOPE_KEYS}
    if sum(len(v) for v in lists.values()) > s.mcp_max_scope_ids:
        raise invalid(f"scope lists at most {s.mcp_max_scope_ids} ids in all")
    cols = tuple(dict.fromkeys(check_search_collection(x) for x in lists["collection_ids"])) \
        or (check_search_collection(collection),)
    where = field_conditions(lists)
    docs, prefixes = lists["document_ids"], lists["paths"]
    if not docs and not prefixes:
        return Scope(cols, None, where)  # no id constraint (field conditions hold on any collection)
    if ANY in cols:
        raise invalid("document_ids and paths need named collections, not 'any'")
    ids: set[DocKey] | None = None
    for keys in ([_document_keys(c, p.tenant, col, docs) for col in cols] if docs else [],
                 [_path_keys(c, p.tenant, col, prefixes) for col in cols] if prefixes else []):
        if keys:
            union = set().union(*keys)
            ids = union if ids is None else ids & union
    return Scope(cols, frozenset(ids or ()), where)


def _path_keys(c: Container, tenant: str, collection: str, prefixes: list[str]) -> set[DocKey]:
    out: set[DocKey] = set()
    for head in file_heads(c, tenant, collection):
        if under_path(head, prefixes):
            out.update(file_chunk_keys(head))
    return out
