"""`extract_key_info` (seed 004): ad-hoc materials + query → the top-K context strings.

Isolation (issue 12, finding 7): the materials of one (API key, task) live in their own
collection `mcp-task-<HMAC>` with `_acl = ["mcp-task:<HMAC>"]`, both derived under the server
secret from the caller's key ref (itself an HMAC of the bearer key) and the sanitised task id
(services/mcp/secret.py). So two keys never share materials, even with the same tenant and
principals; nobody without the secret can compute a name or a token; and the documents API
refuses the `mcp-task-` prefix (services/api/reserved.py), so no key can plant a document in
a task collection or read or delete one there. Every engine query of this tool filters by
that collection and that ACL token; ordinary reads never match the token (no key's
principals contain it).

Budget: a read-only key may call the tool, so what it can store and have embedded is capped
per key per UTC day (VIBE_EXTRACT_DAILY_CHARS_PER_KEY characters of materials submitted,
VIBE_EXTRACT_DAILY_CHUNKS_PER_KEY new chunks); past either, the call is refused with
`quota_exceeded` before anything is stored. The check and the charge are one transaction.

Ingestion: paragraphs, then sentences above the cap (chunking.material_chunks); the cleaned
text is indexed and embedded, the original is kept (in `meta`, which nothing indexes) and
returned. A chunk's id is the hash of its cleaned text, so the same chunk of the same task
is stored once (dedupe per key and task); one `put` writes the new chunks in one
transaction. Retrieval is hybrid: RRF (the Vibe default) or seed 004's weighted fusion
(0.65 semantic + 0.35 lexical on min-max normalised scores, ties by recency).
"""

from __future__ import annotations

import re
import time
from typing import Any

import blake3

from services.mcp import core
from services.mcp.chunking import material_chunks
from services.mcp.errors import QUOTA_EXCEEDED, ToolFailure, invalid
from services.mcp.secret import task_names
from services.planner.fusion import Fused, rrf
from services.wiring import Container
from shared.agent_ports import BudgetExceeded, MaterialBudget
from shared.errors import ErrorCode
from shared.model import DocKey, Hit, Principal, StoredDoc
from shared.ports import SearchFilter

TASK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
SEMANTIC_WEIGHT, LEXICAL_WEIGHT = 0.65, 0.35


def sanitize_task(task_id: str) -> str:
    """The shared task-id sanitiser (seed 004): trimmed, a safe alphabet, at most 128 chars."""
    t = task_id.strip()
    if not TASK_RE.match(t):
        raise invalid("task_id must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
    return t


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


def _utc_day(now: float) -> tuple[str, int]:
    """(YYYY-MM-DD, seconds until the next UTC midnight)."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    return day, int(86400 - now % 86400) + 1


class KeyInfo:
    def __init__(self, c: Container, secret: bytes, budget: MaterialBudget):
        self.c = c
        self.secret = secret
        self.budget = budget

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

    def run(self, p: Principal, key: str, query: str, materials: str, top_k: int | None, task_id: str,
            fusion: str | None) -> dict[str, Any]:
        k, mode = self.validate(query, materials, top_k, fusion)
        task = sanitize_task(task_id)
        col, token = task_names(self.secret, key, task)
        docs = self._docs(p, col, token, materials)
        existing = self.c.store.get_docs([d.key for d in docs])
        new = [d for d in docs if d.key not in existing]
        self._charge(key, len(materials), len(new))
        if new:
            self.c.docs.put(new)  # one transaction: all new chunks or none
        core.embed_now(self.c, docs)
        contexts = self._retrieve(SearchFilter(p.tenant, (col,), (token,)), query.strip(), k, mode)
        return {"contexts": contexts, "count": len(contexts), "task_id": task, "fusion": mode,
                "ingested_chunks": len(new), "duplicate_chunks": len(docs) - len(new)}

    def _charge(self, key: str, chars: int, chunks: int) -> None:
        s = self.c.settings
        day, retry_after = _utc_day(time.time())
        try:
            self.budget.charge(key, day, chars, chunks, s.extract_daily_chars_per_key, s.extract_daily_chunks_per_key)
        except BudgetExceeded as e:
            raise ToolFailure(QUOTA_EXCEEDED, f"this key's daily extract_key_info budget is spent ({e.quota}: "
                              f"{e.used} used of {e.limit}, this call needs {e.requested}); it resets at 00:00 UTC",
                              {"quota": e.quota, "limit": e.limit, "used": e.used, "requested": e.requested,
                               "retry_after_seconds": retry_after}) from e

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
        qvec = core.query_vector(self.c, query, flt.tenant)
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
