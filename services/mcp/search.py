"""`search` (seed 002 §4): lexical | semantic | hybrid over chunk documents.

Candidates: up to `top_k * 2` per enabled modality (REQ-006), each from an engine query that
already carries the caller's tenant, collections and ACL. Hybrid is RRF with k=60 and ranks
from 1 (the planner's `rrf`); raw BM25 and cosine are never averaged (RRF-004). Lexical
`bm25` is tantivy's BM25 (higher is better, unlike FTS5's negated value). Semantic `cosine`
is exact cosine over the stored vectors of the ANN candidates.

`scope` (seed 001 §4.2) narrows the haystack but still ranks: `collection_ids` go into the
engine filter; `document_ids` and `paths` keep only matching chunks of a deeper candidate
list, then take the top `top_k * 2` per modality. A collection may be `any` (every collection
of the tenant, still filtered by ACL, as POST /v1/read); a reserved task collection
(`mcp-task-…`, services/api/reserved.py) is refused.

Bounds (issue 12, finding 8): the query (VIBE_MCP_MAX_QUERY_CHARS), top_k
(VIBE_MCP_MAX_TOP_K) and the scope (VIBE_MCP_MAX_SCOPE_IDS ids of at most
VIBE_MCP_MAX_ID_CHARS characters) are refused with `invalid_params` past their limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.core.documents import check_collection
from services.mcp import core
from services.mcp.citations import Passage, cite, render_context
from services.mcp.errors import invalid
from services.planner.fusion import Fused, relative, rrf, single
from services.wiring import Container
from shared.agent_ports import CitationRegistry
from shared.errors import VibeError
from shared.model import DocKey, Hit, Principal, StoredDoc
from shared.ports import SearchFilter
from shared.text.hashing import doc_text

MODES = ("lexical", "semantic", "hybrid")
SCOPE_KEYS = {"document_ids", "collection_ids", "folder_ids", "paths"}
CHUNK_SEP = "~"  # chunk doc id = <file id>~<chunk index>
ANY = "any"


@dataclass
class Scope:
    collections: tuple[str, ...]
    documents: frozenset[str] = frozenset()
    paths: tuple[str, ...] = ()

    @property
    def narrows(self) -> bool:
        return bool(self.documents or self.paths)

    def keeps(self, doc: StoredDoc) -> bool:
        d = doc.key.doc_id
        if self.documents and not ({d, d.split(CHUNK_SEP)[0], str(doc.fields.get("path"))} & self.documents):
            return False
        path = str(doc.fields.get("path", ""))
        return not self.paths or any(path == p or path.startswith(p.rstrip("/") + "/") for p in self.paths)


def _strings(raw: dict[str, Any], name: str, max_chars: int) -> list[str]:
    v = raw.get(name) or []
    if not isinstance(v, list) or not all(isinstance(x, str | int) and not isinstance(x, bool) and str(x) for x in v):
        raise invalid(f"scope.{name} must be a list of ids")
    out = [str(x) for x in v]
    if any(len(x) > max_chars for x in out):
        raise invalid(f"scope.{name} has an id longer than {max_chars} characters")
    return out


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


def parse_scope(raw: dict[str, Any] | None, collection: str, max_ids: int = 1_000, max_chars: int = 1_024) -> Scope:
    if raw is None:
        return Scope((check_search_collection(collection),))
    if not isinstance(raw, dict):
        raise invalid("scope must be an object")
    unknown = set(raw) - SCOPE_KEYS
    if unknown:
        raise invalid(f"unknown scope key(s): {', '.join(sorted(unknown))[:200]}")
    lists = {name: _strings(raw, name, max_chars) for name in SCOPE_KEYS}
    if sum(len(v) for v in lists.values()) > max_ids:
        raise invalid(f"scope lists at most {max_ids} ids in all")
    cols = tuple(check_search_collection(c) for c in lists["collection_ids"]) or (check_search_collection(collection),)
    return Scope(cols, frozenset(lists["document_ids"]), tuple(lists["folder_ids"] + lists["paths"]))


@dataclass
class SearchOut:
    ranking: list[Fused]
    docs: dict[DocKey, StoredDoc]
    lexical: list[Hit] = field(default_factory=list)


def chunk_fields(doc: StoredDoc) -> dict[str, Any]:
    """The seed 002 chunk shape of any document: reindexed chunks carry every field; other
    documents map their id, `path`/`title` and text onto it."""
    f = doc.fields
    content = f.get("content")
    idx = f.get("chunk_index")
    return {
        "chunk_id": doc.key.doc_id,
        "path": f["path"] if isinstance(f.get("path"), str) else doc.key.ref,
        "heading_path": f.get("heading_path") if isinstance(f.get("heading_path"), str)
        else (f["title"] if isinstance(f.get("title"), str) else ""),
        "chunk_index": idx if isinstance(idx, int) and not isinstance(idx, bool) else 0,
        "content": content if isinstance(content, str) else doc_text(f, None),
    }


def breakdown(mode: str, f: Fused) -> dict[str, Any]:
    """Seed 002 §4.3, exactly these keys per mode."""
    if mode == "lexical":
        return {"bm25": f.lexical_score}
    if mode == "semantic":
        return {"cosine": f.semantic_score}
    return {"rrf": f.score, "lexical_rank": f.lexical_rank, "semantic_rank": f.semantic_rank}


class ChunkSearch:
    def __init__(self, c: Container, citations: CitationRegistry):
        self.c = c
        self.citations = citations

    def validate(self, query: str, mode: str, top_k: int) -> str:
        s = self.c.settings
        if mode not in MODES:
            raise invalid(f"mode must be one of {', '.join(MODES)}")
        if not 1 <= top_k <= s.mcp_max_top_k:
            raise invalid(f"top_k must be between 1 and {s.mcp_max_top_k}")
        if len(query) > s.mcp_max_query_chars:
            raise invalid(f"query is longer than {s.mcp_max_query_chars} characters")
        q = query.strip()
        if not q:
            raise invalid("query must not be empty")
        return q

    def run(self, p: Principal, query: str, mode: str, top_k: int, scope: Scope) -> SearchOut:
        flt = SearchFilter(p.tenant, None if ANY in scope.collections else scope.collections, tuple(p.readable_acl))
        want = top_k * 2
        depth = self.c.settings.lexical_candidates if scope.narrows else want
        lex = relative(self.c.lexical.search(flt, query, depth)) if mode != "semantic" else []
        sem: list[Hit] = []
        if mode != "lexical":
            qvec = core.query_vector(self.c, query, flt.tenant)
            sem = core.exact_semantic(self.c, flt, qvec, depth) if qvec is not None else []
        docs = core.readable(self.c, p, list(dict.fromkeys([h.key for h in lex] + [h.key for h in sem])))
        lex = [h for h in lex if h.key in docs and scope.keeps(docs[h.key])][:want]
        sem = [h for h in sem if h.key in docs and scope.keeps(docs[h.key])][:want]
        if mode == "lexical":
            ranking = single(lex, "lexical")
        elif mode == "semantic":
            ranking = single(sem, "semantic")
        else:
            ranking = rrf(lex, sem, self.c.settings.rrf_k)
        return SearchOut(ranking[:top_k], docs, lex)

    def answer(self, p: Principal, owner: str, query: str, mode: str, top_k: int, collection: str | None,
               scope_raw: dict[str, Any] | None, conversation_id: str | None) -> dict[str, Any]:
        q = self.validate(query, mode, top_k)
        s = self.c.settings
        scope = parse_scope(scope_raw, collection or s.mcp_collection, s.mcp_max_scope_ids, s.mcp_max_id_chars)
        out = self.run(p, q, mode, top_k, scope)
        self._touch(p, scope, q, out.lexical)
        results = [{**chunk_fields(out.docs[f.key]), "score_breakdown": breakdown(mode, f)} for f in out.ranking]
        body: dict[str, Any] = {"query": query, "mode": mode, "count": len(results),
                                "embedding_model": self.c.embedder.model_id, "results": results}
        if conversation_id:
            body["conversation_id"] = conversation_id
            body["context"] = self._cite(owner, conversation_id, out, results)
        return body

    def _touch(self, p: Principal, scope: Scope, q: str, lex: list[Hit]) -> None:
        if len(scope.collections) == 1 and scope.collections[0] != ANY and lex:
            core.touch(self.c, p, scope.collections[0], q, lex)

    def _cite(self, owner: str, conversation: str, out: SearchOut, results: list[dict[str, Any]]) -> str:
        passages = []
        for f, r in zip(out.ranking, results, strict=True):
            locator = {"collection": f.key.collection, "id": f.key.doc_id}
            display = {"title": r["path"], "heading_path": r["heading_path"]}
            r["n"] = cite(self.citations, owner, conversation, "kb_chunk", locator, display)
            passages.append(Passage(r["n"], r["path"], "", r["content"]))
        return render_context(passages)

