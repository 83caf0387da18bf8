"""`search_rifflux` (Rifflux-compatible; `search` is its alias): lexical | semantic | hybrid over
chunk documents.

Candidates: up to `top_k * 2` per enabled modality (as Rifflux ranks), each from an engine query that
already carries the caller's tenant, collections, ACL and the scope's id allow-list
(services/mcp/scope.py), so an in-scope chunk is found however deep it ranks in the whole
collection. Hybrid is RRF with k=60 and ranks from 1 (the planner's `rrf`); raw BM25 and
cosine are never averaged (their scales differ). Semantic `cosine` is exact cosine over the
stored vectors of the ANN candidates; a zero-norm query vector gives rows with cosine 0.0, as
Rifflux does.

Lexical `bm25` follows SQLite FTS5's sign: negative, lower is better, results in ascending
order. Its magnitude is the hit's BM25 divided by the caller's best hit (so the best is -1.0):
raw BM25 carries IDF over every document of the tenant, which would tell a caller how many
documents it may not read contain a word (services/planner/fusion.py `relative`).

`top_k`: any positive value is accepted (Rifflux clients only promise "positive"); above
VIBE_MCP_MAX_TOP_K the answer holds at most that many results and `diagnostics.top_k` says
so. `db_path`: Rifflux lets a local client choose its SQLite file; a server must never open
a file a remote caller names, so the argument is accepted and not used, and
`diagnostics.db_path` says the answer came from this server's own store.

Bounds: the query (VIBE_MCP_MAX_QUERY_CHARS), `db_path` (VIBE_MCP_MAX_PATH_CHARS) and the
scope (VIBE_MCP_MAX_SCOPE_IDS ids of at most VIBE_MCP_MAX_ID_CHARS characters) are refused
with `invalid_params` past their limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.container import Container
from services.core.edge_access import edge_visible
from services.mcp import core
from services.mcp.citations import Passage, cite, render_context
from services.mcp.errors import invalid
from services.mcp.scope import ANY, CHUNK_SEP, Scope, check_search_collection, resolve
from services.planner.fusion import Fused, relative, rrf, single
from shared.agent_ports import CitationRegistry
from shared.conditions import matches
from shared.model import DocKey, Hit, Principal, StoredDoc
from shared.ports import SearchFilter
from shared.text.hashing import doc_text

MODES = ("lexical", "semantic", "hybrid")
__all__ = ["ANY", "CHUNK_SEP", "MODES", "ChunkSearch", "Scope", "check_search_collection"]


@dataclass
class SearchOut:
    ranking: list[Fused]
    docs: dict[DocKey, StoredDoc]
    lexical: list[Hit] = field(default_factory=list)
    semantic_unavailable: str | None = None  # why the semantic leg is empty without a query vector


def chunk_fields(doc: StoredDoc) -> dict[str, Any]:
    """The Rifflux chunk shape of any document: reindexed chunks carry every field; other
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


def document_label(doc: StoredDoc) -> str:
    """What `<retrieved_context>` groups a passage under: its title, else the file path
    `reindex` stored; never the document's key, an id a model would cite instead of `[n]`."""
    f = doc.fields
    for name in ("title", "path"):
        if isinstance(f.get(name), str) and f[name].strip():
            return str(f[name])
    return "Untitled document"


def folder_of(doc: StoredDoc) -> int | str | None:
    """The document's own folder id: its `folder_id`, or the innermost of the list `reindex`
    stores (the file's folder, then each enclosing one)."""
    v = doc.fields.get("folder_id")
    first = v[0] if isinstance(v, list) and v else v
    return first if isinstance(first, int | str) and not isinstance(first, bool) else None


def fts5_bm25(score: float | None) -> float | None:
    """FTS5's sign: lower is better (0.0 stays 0.0, never -0.0)."""
    return None if score is None else (-score or 0.0)


def breakdown(mode: str, f: Fused) -> dict[str, Any]:
    """Exactly the keys per mode that Rifflux clients read."""
    if mode == "lexical":
        return {"bm25": fts5_bm25(f.lexical_score)}
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

    def run(self, p: Principal, query: str, mode: str, top_k: int, scope: Scope, depth: int | None = None) -> SearchOut:
        """Top `top_k` of the fused ranking, from `depth` (default `top_k * 2`) candidates per
        modality, each engine query filtered by tenant, collections, ACL and the scope's ids."""
        ids = tuple(sorted(scope.ids, key=lambda k: (k.collection, k.doc_id))) if scope.ids is not None else None
        flt = SearchFilter(p.tenant, None if ANY in scope.collections else scope.collections,
                           tuple(p.readable_acl), p.filter + scope.where, ids=ids, certs=p.certs)
        want = depth or top_k * 2
        lex = relative(self.c.lexical.search(flt, query, want)) if mode != "semantic" else []
        sem: list[Hit] = []
        why: str | None = None
        if mode != "lexical":
            cols = flt.collections or ()
            qvec, why = core.query_vector(self.c, query, flt.tenant, cols[0] if len(cols) == 1 else ANY)
            sem = core.exact_semantic(self.c, flt, qvec, want, only=ids) if qvec is not None else []
        docs = core.readable(self.c, p, list(dict.fromkeys([h.key for h in lex] + [h.key for h in sem])))
        if scope.where:  # re-checked on the store of record, as a read re-checks its filter
            docs = {k: d for k, d in docs.items() if matches(scope.where, d.fields)}
        allowed = scope.ids
        lex = [h for h in lex if h.key in docs and (allowed is None or h.key in allowed)][:want]
        sem = [h for h in sem if h.key in docs and (allowed is None or h.key in allowed)][:want]
        if mode == "lexical":
            ranking = single(lex, "lexical")
        elif mode == "semantic":
            ranking = single(sem, "semantic")
        else:
            ranking = rrf(lex, sem, self.c.settings.rrf_k)
        return SearchOut(ranking[:top_k] if depth is None else ranking, docs, lex, why)

    def answer(self, p: Principal, owner: str, query: str, mode: str, top_k: int, collection: str | None,
               scope_raw: dict[str, Any] | None, conversation_id: str | None,
               db_path: str | None = None) -> dict[str, Any]:
        s = self.c.settings
        diagnostics: dict[str, Any] = {}
        if db_path is not None:
            if len(db_path) > s.mcp_max_path_chars:
                raise invalid(f"db_path is longer than {s.mcp_max_path_chars} characters")
            diagnostics["db_path"] = {"used": False, "reason": "this server answers from its own store; "
                                      "it never opens a file a caller names"}
        if top_k > s.mcp_max_top_k:
            diagnostics["top_k"] = {"requested": top_k, "applied": s.mcp_max_top_k,
                                    "reason": "clamped to the server's limit (VIBE_MCP_MAX_TOP_K)"}
            top_k = s.mcp_max_top_k
        q = self.validate(query, mode, top_k)
        scope = resolve(self.c, p, scope_raw, collection or s.mcp_collection)
        out = self.run(p, q, mode, top_k, scope)
        self.touch(p, scope, q, out.lexical)
        results = [{**chunk_fields(out.docs[f.key]), "score_breakdown": breakdown(mode, f)} for f in out.ranking]
        body: dict[str, Any] = {"query": query, "mode": mode, "count": len(results),
                                "embedding_model": self.c.active_model(p.tenant), "results": results}
        if out.semantic_unavailable:
            # Rifflux answers an empty semantic leg here; say why, as a read's diagnostics do
            # (without it a spent daily cap in `semantic` mode is a bare `count: 0`)
            body["semantic"] = {"state": "degraded", "reason": out.semantic_unavailable}
        if diagnostics:
            body["diagnostics"] = diagnostics
        if conversation_id:
            body["conversation_id"] = conversation_id
            body["context"] = self._cite(owner, conversation_id, out, results)
        return body

    def chunk(self, p: Principal, chunk_id: str, collection: str | None) -> dict[str, Any] | None:
        col = check_search_collection(collection or self.c.settings.mcp_collection)
        if col == ANY:
            raise invalid("get_chunk needs a named collection, not 'any'")
        doc = self.c.store.get_doc(DocKey(p.tenant, col, chunk_id))
        # an edge (semantic.edges) also needs both of its ends readable (services/core/edge_access.py)
        return chunk_fields(doc) if doc is not None and edge_visible(self.c.store, p, doc) else None

    def touch(self, p: Principal, scope: Scope, q: str, lex: list[Hit]) -> None:
        if len(scope.collections) == 1 and scope.collections[0] != ANY and lex:
            core.touch(self.c, p, scope.collections[0], q, lex)

    def _cite(self, owner: str, conversation: str, out: SearchOut, results: list[dict[str, Any]]) -> str:
        passages = []
        for f, r in zip(out.ranking, results, strict=True):
            doc = out.docs[f.key]
            locator = citation_locator(doc)
            display = {"title": document_label(doc), "heading_path": r["heading_path"], "source": f.key.collection}
            r["n"] = cite(self.citations, owner, conversation, "kb_chunk", locator, display)
            passages.append(Passage(r["n"], document_label(doc), "", r["content"],
                                    group=f"{f.key.collection}/{locator['document_id']}"))
        return render_context(passages)



def citation_locator(doc: StoredDoc) -> dict[str, Any]:
    """A kb_chunk's identity (document_id + chunk_id, as SurfSense-compatible clients cite), with its collection and
    content hash: a reindex that rewrites the same text keeps the number, and a chunk whose
    text changed is a new unit with a new number (its old number resolves to nothing, never
    to other text)."""
    d = doc.key.doc_id
    return {"collection": doc.key.collection, "document_id": d.split(CHUNK_SEP)[0] if CHUNK_SEP in d else d,
            "chunk_id": d, "id": d, "content_hash": doc.content_hash}  # `id`: the older locator key
