"""`search_knowledge_base(query, scope?)` (SurfSense-compatible): the agent's one RAG entry point.

Full hybrid ranking inside the scope (a pinned document still gets its relevant
passages, not raw chunk order), the scope applied inside the engine queries
(services/mcp/scope.py); then, when a reranker is configured (VIBE_RERANK_URL, off by
default), the top VIBE_RERANK_CANDIDATES fused chunks are re-scored by it and the
best `top_k` kept. A reranker that fails leaves the fused order (`reranked: false`), never an
error: retrieval still answers.

Every returned chunk is registered in the conversation's registry (find-or-create) as
a `kb_chunk` with locator `document_id` + `chunk_id` and rendered in
`<retrieved_context>` with `[n]` as the only integer the layout puts next to it.
Without a `conversation_id` the caller's default conversation is used, so numbers always
exist and stay monotonic for that caller.
"""

from __future__ import annotations

import logging
from typing import Any

from services.mcp.citations import Passage, cite, render_context
from services.mcp.scope import resolve
from services.mcp.search import ChunkSearch, SearchOut, chunk_fields, citation_locator, document_label, folder_of
from services.planner.fusion import Fused
from shared.agent_ports import CitationRegistry, Reranker, RerankError
from shared.model import Principal
from shared.text.redaction import redact

log = logging.getLogger("vibe.mcp")

DEFAULT_CONVERSATION = "default"
INTRO = "Excerpts retrieved from the user's knowledge base for this query."


class KnowledgeBase:
    def __init__(self, searcher: ChunkSearch, citations: CitationRegistry, reranker: Reranker | None):
        self.searcher = searcher
        self.c = searcher.c
        self.citations = citations
        self.reranker = reranker

    def answer(self, p: Principal, owner: str, query: str, scope_raw: dict[str, Any] | None, top_k: int,
               collection: str | None, conversation_id: str | None, rerank: bool) -> dict[str, Any]:
        q = self.searcher.validate(query, "hybrid", top_k)
        s = self.c.settings
        scope = resolve(self.c, p, scope_raw, collection or s.mcp_collection)
        use_reranker = self.reranker is not None and rerank
        depth = max(top_k * 2, s.rerank_candidates if use_reranker else 0)
        out = self.searcher.run(p, q, "hybrid", top_k, scope, depth=depth)
        self.searcher.touch(p, scope, q, out.lexical)  # cold lexical hits get embedded for the next query
        ranking, reranked = out.ranking[:top_k], False
        scores: dict[Any, float] = {}
        if use_reranker and out.ranking:
            try:
                ranking, scores = self._rerank(q, out, s.rerank_candidates, top_k)
                reranked = True
            except RerankError as e:
                log.warning("reranker failed; keeping the fused order", extra={"error": str(e)[:200]})
        cid = conversation_id or DEFAULT_CONVERSATION
        results, passages = [], []
        for f in ranking:
            doc = out.docs[f.key]
            ch = chunk_fields(doc)
            loc = citation_locator(doc)
            title = document_label(doc)  # never the document's key: an id is a number a model would cite
            display = {"title": title, "source": f.key.collection, "heading_path": ch["heading_path"]}
            n = cite(self.citations, owner, cid, "kb_chunk", loc, display)
            r: dict[str, Any] = {"n": n, "source_type": "kb_chunk", "document_id": loc["document_id"],
                                 "chunk_id": loc["chunk_id"], "title": title, "source": f.key.collection,
                                 "heading_path": ch["heading_path"], "content": ch["content"], "score": f.score}
            if (folder := folder_of(doc)) is not None:
                r["folder_id"] = folder  # what scope.folder_ids takes to search this chunk's folder
            if f.key in scores:
                r["rerank_score"] = scores[f.key]
            results.append(r)
            passages.append(Passage(n, title, f.key.collection, ch["content"],
                                    group=f"{f.key.collection}/{loc['document_id']}"))
        body: dict[str, Any] = {"query": query, "conversation_id": cid, "count": len(results), "results": results,
                                "context": render_context(passages, INTRO), "reranked": reranked}
        if self.reranker is not None:
            body["reranker"] = self.reranker.model_id
        return body

    def _rerank(self, query: str, out: SearchOut, candidates: int, top_k: int) -> tuple[list[Fused], dict[Any, float]]:
        """The fused pool re-ordered by the reranker, an outside endpoint like an embedding
        provider: a document carrying certificates is never sent (no certificate policy names the
        reranker) and keeps its fused place; the others are sent masked as an embedder's text is,
        and re-ordered among their own places (ties keep the fused order)."""
        assert self.reranker is not None
        pool = out.ranking[:candidates]
        movable = [i for i, f in enumerate(pool) if not out.docs[f.key].certs]
        if not movable:
            return pool[:top_k], {}
        texts = [redact(chunk_fields(out.docs[pool[i].key])["content"])[0] for i in movable]
        got = self.reranker.rerank(query, texts)
        if len(got) != len(movable):
            raise RerankError("the reranker scored a different number of passages")
        order = sorted(range(len(movable)), key=lambda j: (-got[j], j))
        placed = list(pool)
        for slot, j in zip(movable, order, strict=True):
            placed[slot] = pool[movable[j]]
        scores = {pool[i].key: got[j] for j, i in enumerate(movable)}
        top = placed[:top_k]
        return top, {f.key: scores[f.key] for f in top if f.key in scores}
