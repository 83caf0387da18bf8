"""`extract_key_info` (seed 004): ad-hoc materials + query → the top-K context strings.

Isolation: the materials of one (caller, task) live in their own collection
`mcp-task-<h>` with `_acl = ["mcp-task:<h>"]`, where `h` hashes the caller's identity
(tenant + principals) and the sanitised task id. Every engine query of this tool filters by
that collection and that ACL token, so one task never sees another's materials; ordinary
reads never match the token either (no key's principals contain it).

Ingestion: paragraphs, then sentences above the cap (chunking.material_chunks); the cleaned
text is indexed and embedded, the original is kept (in `meta`, which nothing indexes) and
returned. A chunk's id is the hash of its cleaned text, so the same chunk of the same task
is stored once (dedupe per user and task); one `put` writes the new chunks in one
transaction. Retrieval is hybrid: RRF (the Vibe default) or seed 004's weighted fusion
(0.65 semantic + 0.35 lexical on min-max normalised scores, ties by recency).
"""

from __future__ import annotations

import re
from typing import Any

import blake3

from services.mcp import core
from services.mcp.chunking import material_chunks
from services.mcp.errors import ToolFailure, invalid
from services.planner.fusion import Fused, rrf
from shared.errors import ErrorCode
from shared.model import DocKey, Hit, Principal, StoredDoc
from shared.ports import SearchFilter
from services.wiring import Container

TASK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
SEMANTIC_WEIGHT, LEXICAL_WEIGHT = 0.65, 0.35


def sanitize_task(task_id: str) -> str:
    """The shared task-id sanitiser (seed 004): trimmed, a safe alphabet, at most 128 chars."""
    t = task_id.strip()
    if not TASK_RE.match(t):
        raise invalid("task_id must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
    return t


def task_space(owner: str, task: str) -> tuple[str, str]:
    h = blake3.blake3(f"{owner}\x1f{task}".encode()).hexdigest()[:24]
    return f"mcp-task-{h}", f"mcp-task:{h}"


def _minmax(hits: list[Hit]) -> dict[DocKey, float]:
    if not hits:
        return {}
    lo, hi = min(h.score for h in hits), max(h.score for h in hits)
    return {h.key: 1.0 if hi == lo else (h.score - lo) / (hi - lo) for h in hits}


def weighted(lex: list[Hit], sem: list[Hit], recency: dict[DocKey, float]) -> list[Fused]:
    """Seed 004 step 8: normalised scores, 0.65 semantic + 0.35 lexical, ties by recency."""
    ln, sn = _minmax(lex), _minmax(sem)
    keys = list(dict.fromkeys([h.key for h in lex] + [h.key for h in sem]))
    out = [Fused(k, SEMANTIC_WEIGHT * sn.get(k, 0.0) + LEXICAL_WEIGHT * ln.get(k, 0.0)) for k in keys]
    out.sort(key=lambda f: (-f.score, -recency.get(f.key, 0.0), f.key.doc_id))
    return out


class KeyInfo:
    def __init__(self, c: Container):
        self.c = c

    def validate(self, query: str, materials: str, top_k: int | None, fusion: str | None) -> tuple[int, str]:
        s = self.c.settings
        k = s.extract_top_k_default if top_k is None else top_k
        if not 0 < k <= s.extract_max_top_k:
            raise invalid(f"topK must be between 1 and {s.extract_max_top_k}")
        if not query.strip():
            raise invalid("query must not be empty")
        if len(query) > s.extract_max_query_chars:
            raise invalid(f"query is longer than {s.extract_max_query_chars} characters")
        if not materials.strip():
            raise invalid("materials must not be empty")
        if len(materials) > s.extract_max_materials_chars:
            limit = s.extract_max_materials_chars
            raise ToolFailure(ErrorCode.PAYLOAD_TOO_LARGE.code,
                              f"materials are {len(materials)} characters; the limit is {limit}")
        mode = fusion or s.extract_fusion
        if mode not in ("rrf", "weighted"):
            raise invalid("fusion must be 'rrf' or 'weighted'")
        return k, mode

    def run(self, p: Principal, owner: str, query: str, materials: str, top_k: int | None, task_id: str,
            fusion: str | None) -> dict[str, Any]:
        k, mode = self.validate(query, materials, top_k, fusion)
        task = sanitize_task(task_id)
        col, token = task_space(owner, task)
        docs = self._docs(p, col, token, materials)
        existing = self.c.store.get_docs([d.key for d in docs])
        new = [d for d in docs if d.key not in existing]
        if new:
            self.c.docs.put(new)  # one transaction: all new chunks or none
        core.embed_now(self.c, docs)
        contexts = self._retrieve(SearchFilter(p.tenant, (col,), (token,)), query.strip(), k, mode)
        return {"contexts": contexts, "count": len(contexts), "task_id": task, "fusion": mode,
                "ingested_chunks": len(new), "duplicate_chunks": len(docs) - len(new)}

    def _docs(self, p: Principal, col: str, token: str, materials: str) -> list[StoredDoc]:
        by_id: dict[str, StoredDoc] = {}
        for m in material_chunks(materials, self.c.settings.extract_max_chunk_chars):
            doc_id = blake3.blake3(m.cleaned.encode()).hexdigest()[:32]
            if doc_id not in by_id:
                by_id[doc_id] = self.c.docs.parse(p, col, doc_id, {
                    "content": m.cleaned, "meta": {"original": m.original, "index": m.index}, "_acl": [token]})
        return list(by_id.values())

    def _retrieve(self, flt: SearchFilter, query: str, k: int, mode: str) -> list[str]:
        depth = max(2 * k, 20)
        lex = self.c.lexical.search(flt, query, depth)
        qvec = core.query_vector(self.c, query)
        sem = core.exact_semantic(self.c, flt, qvec, depth) if qvec is not None else []
        docs = self.c.store.get_docs(list(dict.fromkeys([h.key for h in lex] + [h.key for h in sem])))
        mine = {key: d for key, d in docs.items() if key.tenant == flt.tenant and flt.collections is not None
                and key.collection in flt.collections and set(d.acl) & set(flt.acl)}
        lex = [h for h in lex if h.key in mine]
        sem = [h for h in sem if h.key in mine]
        ranking = rrf(lex, sem, self.c.settings.rrf_k) if mode == "rrf" else weighted(
            lex, sem, {key: d.updated_at for key, d in mine.items()})
        return [str(mine[f.key].fields.get("meta", {}).get("original", mine[f.key].fields["content"]))
                for f in ranking[:k]]
