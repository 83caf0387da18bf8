"""Rifflux's read tools beside search (Rifflux clients call them): `get_file(path)` →
`{"chunks": [...]}` and `index_status` → files, chunks, embeddings, embedding backend and model.

Both read only what the caller may read: every document is checked against the caller's
tenant and ACL before it is counted or returned, so neither a count nor a path reveals a
document another key owns. `get_file` finds a file by the path `reindex` stored (relative to
its location) or by its absolute path; several files indexed from different locations may
share a relative path, and then all of them are returned, each in chunk order.
"""

from __future__ import annotations

from typing import Any

from services.container import Container
from services.mcp.errors import invalid
from services.mcp.scope import (
    ANY,
    CHUNK_SEP,
    SCAN_BATCH,
    check_search_collection,
    file_chunk_keys,
    file_heads,
    file_source,
)
from services.mcp.search import chunk_fields
from shared.model import DocKey, Principal, SemanticStatus


def _collection(c: Container, collection: str | None, tool: str) -> str:
    col = check_search_collection(collection or c.settings.mcp_collection)
    if col == ANY:
        raise invalid(f"{tool} needs a named collection, not 'any'")
    return col


def get_file(c: Container, p: Principal, path: str, collection: str | None) -> dict[str, Any]:
    if not path.strip():
        raise invalid("path must not be empty")
    if len(path) > c.settings.mcp_max_path_chars:
        raise invalid(f"path is longer than {c.settings.mcp_max_path_chars} characters")
    col = _collection(c, collection, "get_file")
    want = path.strip()
    heads = [h for h in file_heads(c, p.tenant, col)
             if h.readable_by(p) and want in (h.fields.get("path"), file_source(h))]
    chunks: list[dict[str, Any]] = []
    for head in sorted(heads, key=lambda h: (file_source(h), h.key.doc_id)):
        docs = c.store.get_docs(file_chunk_keys(head))
        rows = [chunk_fields(d) for d in docs.values() if d.readable_by(p)]
        chunks += sorted(rows, key=lambda r: r["chunk_index"])
    return {"path": want, "collection": col, "count": len(chunks), "chunks": chunks}


def index_status(c: Container, p: Principal, collection: str | None) -> dict[str, Any]:
    col = _collection(c, collection, "index_status")
    space = c.spaces.active(p.tenant)
    keys = list(c.store.collection_keys(p.tenant, col))
    files: set[str] = set()
    chunks = embeddings = 0
    for i in range(0, len(keys), SCAN_BATCH):
        batch = keys[i:i + SCAN_BATCH]
        docs = c.store.get_docs(batch)
        mine: list[DocKey] = [k for k, d in docs.items() if d.readable_by(p)]
        chunks += len(mine)
        files.update(k.doc_id.split(CHUNK_SEP)[0] for k in mine)
        sides = c.store.sidecars(mine, space)
        embeddings += sum(1 for s in sides.values() if s.status == SemanticStatus.READY)
    emb = c.embedders(space, p.tenant)
    return {"collection": col, "files": len(files), "chunks": chunks, "embeddings": embeddings,
            "embedding_backend": emb.model_id.partition(":")[0] or c.settings.embedder,
            "embedding_model": emb.model_id, "space": space}
