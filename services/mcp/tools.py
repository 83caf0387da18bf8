"""The tools' bodies, called by services/mcp/server.py through `invoke` once the caller is
known. Each returns the tool's JSON body."""

from __future__ import annotations

from typing import Any

from services.mcp import files
from services.mcp.citations import Passage, cite, cited_numbers, normalize, render_context, resolve_numbers
from services.mcp.errors import ToolFailure, invalid
from services.mcp.extract import KeyInfo, Request
from services.mcp.inner_voice import InnerVoice, snippet
from services.mcp.invoke import ListResult
from services.mcp.jobs import Jobs
from services.mcp.knowledge import KnowledgeBase
from services.mcp.reindex import Reindexer
from services.mcp.runtime import Caller, ToolRuntime, owner_id
from services.mcp.search import ChunkSearch
from shared.agent_ports import CitationEntry
from shared.errors import ErrorCode
from shared.model import DocKey, Principal

MAX_CONVERSATION_ID = 256
MAX_CITATION = 999_999_999  # [n] has at most 9 digits (citations._TOKEN)


def _conversation(cid: str | None) -> str | None:
    if cid is None:
        return None
    if not 0 < len(cid.strip()) <= MAX_CONVERSATION_ID:
        raise invalid(f"conversation_id must be 1-{MAX_CONVERSATION_ID} characters")
    return cid.strip()


class Tools:
    def __init__(self, rt: ToolRuntime):
        self.rt = rt
        c = rt.container
        self.searcher = ChunkSearch(c, rt.citations)
        self.knowledge = KnowledgeBase(self.searcher, rt.citations, rt.reranker)
        self.reindexer = Reindexer(c)
        self.key_info = KeyInfo(c, rt.secret, rt.budget, rt.tasks)
        self.voice = InnerVoice(c)
        self.jobs = Jobs(c.settings.mcp_reindex_jobs_per_tenant)

    def search(self, p: Principal, query: str, top_k: int, mode: str, collection: str | None,
               scope: dict[str, Any] | None, conversation_id: str | None, db_path: str | None = None) -> dict[str, Any]:
        return self.searcher.answer(p, owner_id(p), query, mode, top_k, collection, scope,
                                    _conversation(conversation_id), db_path)

    def knowledge_base(self, p: Principal, query: str, scope: dict[str, Any] | None, top_k: int,
                       collection: str | None, conversation_id: str | None, rerank: bool) -> dict[str, Any]:
        return self.knowledge.answer(p, owner_id(p), query, scope, top_k, collection, _conversation(conversation_id),
                                     rerank)

    def get_chunk(self, p: Principal, chunk_id: str, collection: str | None) -> dict[str, Any]:
        if not 0 < len(chunk_id) <= self.rt.settings.mcp_max_id_chars:
            raise invalid(f"chunk_id must be 1-{self.rt.settings.mcp_max_id_chars} characters")
        chunk = self.searcher.chunk(p, chunk_id, collection)
        if chunk is None:  # missing and unreadable look the same
            raise ToolFailure(ErrorCode.NOT_FOUND.code, "no such chunk")
        return {"chunk": chunk}

    def get_file(self, p: Principal, path: str, collection: str | None) -> dict[str, Any]:
        return files.get_file(self.rt.container, p, path, collection)

    def index_status(self, p: Principal, collection: str | None) -> dict[str, Any]:
        return files.index_status(self.rt.container, p, collection)

    def reindex(self, p: Principal, path: str | None, paths: list[str] | None, force: bool,
                collection: str | None, prune_missing: bool = True, background: bool = False) -> dict[str, Any]:
        plan = self.reindexer.plan(path, paths, force, collection, prune_missing, p.tenant)  # refuses before queuing
        if not background:
            return self.reindexer.execute(p, plan)
        job = self.jobs.submit(owner_id(p), "reindex", lambda: self.reindexer.execute(p, plan), p.tenant)
        return {**job, "background": True, "collection": plan.collection}

    def reindex_status(self, p: Principal, job_id: str) -> dict[str, Any]:
        job = self.jobs.status(owner_id(p), job_id) if 0 < len(job_id) <= 64 else None
        if job is None:
            raise ToolFailure(ErrorCode.NOT_FOUND.code, "no such job")
        return job

    def extract_check(self, c: Caller, query: str, materials: str, top_k: int | None, task_id: str | None,
                      fusion: str | None) -> Request:
        return self.key_info.validate(query, materials, top_k, fusion, task_id, c.identity)

    def extract(self, c: Caller, req: Request) -> ListResult:
        contexts, facts = self.key_info.run(c.principal, c.key, req)
        return ListResult(contexts, {"vibe/extract_key_info": facts})

    def inner_voice(self, p: Principal, query: str, top_k: int | None, floor: float | None, mix: float | None,
                    include_private: bool, include_tags: list[str], exclude_tags: list[str],
                    conversation_id: str | None) -> dict[str, Any]:
        prm = self.voice.params(query, top_k, floor, mix, include_private, include_tags, exclude_tags)
        cid = _conversation(conversation_id)
        picked, diag = self.voice.retrieve(p, prm)
        snippets = [snippet(c) for c in picked]
        body: dict[str, Any] = {"snippets": snippets, "diagnostics": diag}
        if cid:
            passages = []
            for c, s in zip(picked, snippets, strict=True):
                locator = {"collection": c.doc.key.collection, "id": c.doc.key.doc_id}
                s["n"] = cite(self.rt.citations, owner_id(p), cid, s["source_type"], locator,
                              {"title": s["table"], "created_at": s["created_at"]})
                passages.append(Passage(s["n"], s["table"], s["trust_tier"], s["text"]))
            body["conversation_id"], body["context"] = cid, render_context(passages)
        return body

    def resolve(self, p: Principal, conversation_id: str, numbers: list[int] | None,
                text: str | None) -> dict[str, Any]:
        cid = _conversation(conversation_id)
        assert cid is not None
        s = self.rt.settings
        if text is not None and len(text) > s.mcp_max_resolve_text_chars:
            raise invalid(f"text is longer than {s.mcp_max_resolve_text_chars} characters")
        wanted = list(dict.fromkeys([*(numbers or []), *cited_numbers(text or "")]))
        if len(wanted) > s.mcp_max_resolve_numbers:
            raise invalid(f"at most {s.mcp_max_resolve_numbers} citation numbers per call")
        if any(not 0 < n <= MAX_CITATION for n in wanted):
            raise invalid(f"citation numbers run from 1 to {MAX_CITATION}")
        found = resolve_numbers(self.rt.citations, owner_id(p), cid, wanted, lambda e: self._readable(p, e))
        body: dict[str, Any] = {"conversation_id": cid,
                                "citations": {str(n): e.body() for n, e in found.items()},
                                "unknown": [n for n in wanted if n not in found]}
        if text is not None:
            body["normalized_text"] = normalize(text)
        return body

    def _readable(self, p: Principal, e: CitationEntry) -> bool:
        """A source the caller can no longer read (deleted, ACL changed) resolves to nothing, and
        so does a chunk whose text changed since it was numbered (a reindex): `[n]` never comes
        to mean other text."""
        loc = e.locator
        doc_id = loc.get("chunk_id", loc.get("id"))
        doc = self.rt.container.store.get_doc(DocKey(p.tenant, str(loc.get("collection")), str(doc_id)))
        if doc is None or not doc.readable_by(p):
            return False
        return "content_hash" not in loc or loc["content_hash"] == doc.content_hash
