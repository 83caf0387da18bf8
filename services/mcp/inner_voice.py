"""`inner_voice.retrieve` (the inner_voice / Surr memory MCP tool): retrieval-only, provenance-rich snippets from two
sources, behind `VIBE_ENABLE_INNER_VOICE=1`.

Sources are collections of the caller's tenant: the knowledge graph is
`VIBE_INNER_VOICE_KG_COLLECTION` (default `kg`; a document with `kind: "observation"` is a
`kg_observation`, any other a `kg_entity`), the thoughts are
`VIBE_INNER_VOICE_THOUGHTS_COLLECTION` (default `thoughts`; fields `text`, `origin`
human|logged|tool|model, `is_private`, `tags`, `created_at`). `table` is the collection name
and `id` is `kg:<doc id>` or `t:<doc id>`.

Three sources, each its own engine query (no UNION) with its own candidate cap
`min(3 x top_k, max candidates)`: KG entities, KG observations (`kind` = "observation" inside
the engine query) and thoughts, so a crowd of close entities cannot starve observations, nor
the reverse. Tenant and ACL are filtered inside every engine query; what no engine filter
expresses (privacy, tags, "not an observation") is applied to the ranked candidates, and the
query widens (bounded) until the cap is met or the source is exhausted, so those filters cut
no source short either. Entities and observations together are the KG side of `mix`.

As inner_voice clients' manual says, exactly where it is explicit:
- configuration: the manual's names (`SURR_ENABLE_INNER_VOICE`, `SURR_INNER_VOICE_*`,
  `MCP_NO_LOG`) are read by shared/config.py beside the `VIBE_` ones (which win, except that a
  set `SURR_ENABLE_INNER_VOICE` alone decides the gate: only "1" enables); out-of-range
  values clamp (mix, top_k) or fall back (min_floor, max candidates) with a warning at start;
- call parameters: `top_k`, `mix` and `floor` out of range are clamped (with a warning, no
  content); only what no clamp can fix (NaN) is `invalid_params`;
- `content_hash`: bare hex `blake3` of the returned (capped) text normalised in the manual's
  order (NFKC, lowercase, whitespace runs to one space, trim, then zero-width/control
  characters removed); dedupe across sources uses it;
- `origin` as stored; a thought without one is `"unknown"` and `red` (nothing vouches for it:
  only human|logged is green), never assumed human;
- `diagnostics`: `provider` and `model` as the manual shows them (`"openai"`,
  `"text-embedding-3-small"`: the model name without our `provider:` prefix), `latency_ms` an
  integer.
"""

from __future__ import annotations

import logging
import math
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import blake3

from services.container import Container
from services.mcp import core
from services.mcp.errors import FEATURE_DISABLED, ToolFailure, invalid
from shared.config import Settings
from shared.errors import ErrorCode
from shared.model import Hit, Principal, StoredDoc
from shared.ports import EmbedderError, FieldCondition, SearchFilter
from shared.text.hashing import SNIPPET_LIMIT, cap_text, doc_text

log = logging.getLogger("vibe.mcp.inner_voice")

TRUST = {"human": "green", "logged": "green", "tool": "amber", "model": "red"}
UNKNOWN_ORIGIN = "unknown"
_WS = re.compile(r"\s+")
# Normalisation step 5: zero-width/format (Cf) and control (Cc) characters; lone surrogates (Cs) too,
# which UTF-8 cannot encode (the hash would fail on JSON like "\ud800").
_DROP = frozenset({"Cc", "Cf", "Cs"})


def seed_normalize(text: str) -> str:
    """The manual's "Content Normalization", in its order: NFKC, lowercase, whitespace sequences →
    one ASCII space, trim, then zero-width/control characters removed."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = _WS.sub(" ", t).strip()
    return "".join(ch for ch in t if unicodedata.category(ch) not in _DROP)


def seed_hash(text: str) -> str:
    """`content_hash`: bare hex blake3 of the normalised text (no `blake3:` prefix)."""
    return blake3.blake3(seed_normalize(text).encode("utf-8")).hexdigest()


MAX_TOP_K = 50
DEFAULT_MIN_FLOOR = 0.15
OBSERVATION = "observation"  # the `kind` of a KG observation; any other KG document is an entity
# Widest engine query one source makes while its privacy/tag filters leave the cap unmet: a
# bound on work per call whatever the data (the cap itself is at most 3 x 50).
MAX_SCAN = 5_000


@dataclass(frozen=True)
class IVConfig:
    mix: float
    top_k: int
    floor: float
    min_floor: float
    max_candidates: int


def _clamp(name: str, v: float, lo: float, hi: float, warnings: list[str]) -> float:
    if lo <= v <= hi:
        return v
    warnings.append(f"{name}={v} out of range; clamped to [{lo}, {hi}]")
    return min(max(v, lo), hi)


def config(s: Settings) -> tuple[IVConfig, list[str]]:
    """The manual's "Config validation": clamp (or fall back) with a warning, never refuse to start."""
    warns: list[str] = []
    mix = _clamp("inner_voice_mix", s.inner_voice_mix, 0.0, 1.0, warns)
    top_k = int(_clamp("inner_voice_topk_default", s.inner_voice_topk_default, 1, MAX_TOP_K, warns))
    min_floor = s.inner_voice_min_floor
    if not 0.0 < min_floor < 1.0:
        warns.append(f"inner_voice_min_floor={min_floor} invalid; using {DEFAULT_MIN_FLOOR}")
        min_floor = DEFAULT_MIN_FLOOR
    cands = s.inner_voice_max_candidates_per_source
    if cands < top_k:
        warns.append(f"inner_voice_max_candidates_per_source={cands} < top_k; using {max(3 * top_k, 150)}")
        cands = max(3 * top_k, 150)
    floor = _clamp("inner_voice_floor", s.inner_voice_floor, 0.0, 1.0, warns)
    return IVConfig(mix, top_k, floor, min_floor, cands), warns


@dataclass
class Cand:
    table: str
    doc: StoredDoc
    score: float
    kg: bool
    text: str = ""
    hash: str = ""


@dataclass
class Params:
    query: str
    top_k: int
    floor: float
    mix: float
    include_private: bool
    include_tags: list[str] = field(default_factory=list)
    exclude_tags: list[str] = field(default_factory=list)


def allocate(top_k: int, mix: float, n_kg: int, n_t: int) -> tuple[int, int]:
    """Slots by mix (round half up), ≥1 per source when both are non-empty and 0 < mix < 1,
    then backfill: a source that underflows gives its slots to the other."""
    n_kg, n_t = (n_kg, 0) if mix >= 1.0 else ((0, n_t) if mix <= 0.0 else (n_kg, n_t))  # single-source mixes
    kg = math.floor(mix * top_k + 0.5)
    th = top_k - kg
    if n_kg and n_t and 0.0 < mix < 1.0 and top_k >= 2:
        kg, th = (1, top_k - 1) if kg == 0 else (kg, th)
        kg, th = (top_k - 1, 1) if th == 0 else (kg, th)
    take_kg, take_t = min(kg, n_kg), min(th, n_t)
    spare = top_k - take_kg - take_t
    take_kg += min(spare, n_kg - take_kg)
    take_t += min(top_k - take_kg - take_t, n_t - take_t)
    return take_kg, take_t


def adapt_floor(floor: float, min_floor: float, sources: list[list[Cand]]) -> float:
    """Lower the floor (never below `min_floor`) just enough that every non-empty source keeps
    at least one candidate."""
    used = floor
    for cands in sources:
        if cands and not any(c.score >= floor for c in cands):
            best = max(c.score for c in cands)
            used = min(used, max(best, min_floor))
    return used


def dedupe(kg: list[Cand], th: list[Cand]) -> tuple[list[Cand], list[Cand]]:
    """By (table, id), then by content hash across sources, keeping the higher score."""
    best: dict[str, Cand] = {}
    seen: set[tuple[str, str]] = set()
    for c in sorted(kg + th, key=lambda c: -c.score):
        ident = (c.table, c.doc.key.doc_id)
        if ident in seen or c.hash in best:
            continue
        seen.add(ident)
        best[c.hash] = c
    keep = {id(c) for c in best.values()}
    return [c for c in kg if id(c) in keep], [c for c in th if id(c) in keep]


def _tags(doc: StoredDoc) -> set[str]:
    raw = doc.fields.get("tags")
    return {t for t in raw if isinstance(t, str)} if isinstance(raw, list) else set()


def passes(doc: StoredDoc, p: Params, thought: bool) -> bool:
    if thought and doc.fields.get("is_private") is True and not p.include_private:
        return False
    tags = _tags(doc)
    if p.include_tags and not tags & set(p.include_tags):
        return False
    return not (p.exclude_tags and tags & set(p.exclude_tags))


def is_observation(doc: StoredDoc) -> bool:
    return doc.fields.get("kind") == OBSERVATION


def snippet_text(doc: StoredDoc) -> str:
    for name in ("text", "content", "observation"):
        v = doc.fields.get(name)
        if isinstance(v, str) and v.strip():
            return v
    return doc_text(doc.fields, None)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def snippet(c: Cand) -> dict[str, Any]:
    f = c.doc.fields
    raw = f.get("origin")
    origin = raw if isinstance(raw, str) and raw.strip() else UNKNOWN_ORIGIN
    capped = c.text
    return {
        "id": f"{'kg' if c.kg else 't'}:{c.doc.key.doc_id}",
        "table": c.table,
        "source_type": ("kg_observation" if is_observation(c.doc) else "kg_entity") if c.kg else "thought",
        "origin": origin,
        "trust_tier": "green" if c.kg else TRUST.get(origin, "red"),
        "created_at": f["created_at"] if isinstance(f.get("created_at"), str) else _iso(c.doc.updated_at),
        "text": capped,
        "score": round(c.score, 6),
        "content_hash": c.hash,
        "span_start": 0,
        "span_end": len(capped),
    }


class InnerVoice:
    def __init__(self, c: Container):
        self.c = c
        self.cfg, warnings = config(c.settings)
        for w in warnings:
            log.warning("inner_voice config", extra={"problem": w})

    def params(self, query: str, top_k: int | None, floor: float | None, mix: float | None, include_private: bool,
               include_tags: list[str], exclude_tags: list[str]) -> Params:
        if not self.c.settings.enable_inner_voice:
            raise ToolFailure(FEATURE_DISABLED, "inner_voice.retrieve is disabled (set SURR_ENABLE_INNER_VOICE=1)")
        s = self.c.settings
        if len(query) > s.mcp_max_query_chars:
            raise invalid(f"query is longer than {s.mcp_max_query_chars} characters")
        q = query.strip()
        if not q:
            raise invalid("query must not be empty")
        for name, tags in (("include_tags", include_tags), ("exclude_tags", exclude_tags)):
            if len(tags) > s.mcp_max_tags or any(len(t) > s.mcp_max_id_chars for t in tags):
                raise invalid(f"{name} takes at most {s.mcp_max_tags} tags of at most {s.mcp_max_id_chars} characters")
        k = min(max(self.cfg.top_k if top_k is None else top_k, 1), MAX_TOP_K)  # 1-50, as inner_voice expects
        m = self.cfg.mix if mix is None else mix
        fl = self.cfg.floor if floor is None else floor
        if math.isnan(m) or math.isnan(fl):
            raise invalid("mix and floor must be numbers between 0.0 and 1.0")  # post-clamp still invalid
        warns: list[str] = []
        m, fl = _clamp("mix", m, 0.0, 1.0, warns), _clamp("floor", fl, 0.0, 1.0, warns)
        for w in warns:
            if not s.mcp_no_log:
                log.warning("inner_voice.retrieve parameter", extra={"problem": w})
        return Params(q, k, fl, m, include_private, include_tags, exclude_tags)

    def embed(self, query: str, tenant: str) -> list[float] | None:
        """None: the tenant's daily token cap is spent (no provider call; no candidates)."""
        emb = core.space_embedder(self.c, tenant)
        try:
            vec = core.embed_query(self.c, emb, tenant, self.c.settings.inner_voice_kg_collection, query)
        except core.OverBudget:
            return None
        except EmbedderError as e:
            raise ToolFailure(ErrorCode.EMBEDDER_UNAVAILABLE.code, f"the embedder failed: {str(e)[:120]}") from e
        if len(vec) != emb.dim:
            raise ToolFailure(ErrorCode.EMBEDDER_UNAVAILABLE.code, "the embedder returned another dimension")
        return vec

    def candidates(self, p: Principal, prm: Params, qvec: list[float], collection: str,
                   kg: bool) -> list[list[Cand]]:
        """The ranked candidates of the collection's sources: [entities, observations] for the KG,
        [thoughts] otherwise, each cut to its own cap."""
        flt = SearchFilter(p.tenant, (collection,), tuple(p.readable_acl), p.filter, certs=p.certs)
        core.touch(self.c, p, collection, prm.query, self.c.lexical.search(flt, prm.query, 2 * prm.top_k))
        cap = min(3 * prm.top_k, self.cfg.max_candidates)
        if not kg:
            return [self._ranked(p, flt, qvec, cap, collection, kg, lambda d: passes(d, prm, thought=True))]
        observations = replace(flt, where=(*flt.where, FieldCondition("kind", "eq", (OBSERVATION,))))
        return [self._ranked(p, flt, qvec, cap, collection, kg,
                             lambda d: not is_observation(d) and passes(d, prm, thought=False)),
                self._ranked(p, observations, qvec, cap, collection, kg, lambda d: passes(d, prm, thought=False))]

    def _ranked(self, p: Principal, flt: SearchFilter, qvec: list[float], cap: int, collection: str, kg: bool,
                keep: Callable[[StoredDoc], bool]) -> list[Cand]:
        """Up to `cap` candidates `keep` accepts, by descending cosine. The engine query starts at 3x
        the cap and widens while filtered-out documents leave the cap unmet and more may exist."""
        limit = 3 * cap
        while True:
            hits: list[Hit] = core.exact_semantic(self.c, flt, qvec, limit)
            docs = core.readable(self.c, p, [h.key for h in hits])
            kept = [Cand(collection, docs[h.key], h.score, kg) for h in hits if h.key in docs and keep(docs[h.key])]
            if len(kept) >= cap or len(hits) < limit or limit >= MAX_SCAN:
                break
            limit = min(4 * limit, MAX_SCAN)
        out = kept[:cap]
        for cand in out:
            cand.text = cap_text(snippet_text(cand.doc), SNIPPET_LIMIT)  # what is returned is what is hashed
            cand.hash = seed_hash(cand.text)
        return out

    def retrieve(self, p: Principal, prm: Params) -> tuple[list[Cand], dict[str, Any]]:
        started = time.perf_counter()
        qvec = self.embed(prm.query, p.tenant)
        s = self.c.settings
        entities: list[Cand] = []
        observations: list[Cand] = []
        th: list[Cand] = []
        if qvec is not None:  # None: over budget, no candidates
            entities, observations = self.candidates(p, prm, qvec, s.inner_voice_kg_collection, kg=True)
            (th,) = self.candidates(p, prm, qvec, s.inner_voice_thoughts_collection, kg=False)
        kg = sorted(entities + observations, key=lambda c: -c.score)
        floor_used = adapt_floor(prm.floor, self.cfg.min_floor, [kg, th])
        kg_hits, th_hits = dedupe([c for c in kg if c.score >= floor_used], [c for c in th if c.score >= floor_used])
        take_kg, take_t = allocate(prm.top_k, prm.mix, len(kg_hits), len(th_hits))
        picked = sorted(kg_hits[:take_kg] + th_hits[:take_t], key=lambda c: -c.score)[: prm.top_k]
        emb = core.space_embedder(self.c, p.tenant)
        provider, _, model = emb.model_id.partition(":")
        diag: dict[str, Any] = {
            "provider": provider if model else s.embedder, "model": model or emb.model_id, "dim": emb.dim,
            "k_req": prm.top_k, "k_ret": len(picked), "kg_candidates": len(kg), "thought_candidates": len(th),
            "kg_entity_candidates": len(entities), "kg_observation_candidates": len(observations),
            "floor_used": round(floor_used, 6), "latency_ms": int(round((time.perf_counter() - started) * 1000))}
        if not picked:
            diag["no_results"] = True
            diag["reason"] = ("budget" if qvec is None else "no_candidates" if not (kg or th)
                              else "floor_excluded_all")
        if not s.mcp_no_log:  # inner_voice: non-content metrics only at info
            log.info("inner_voice.retrieve", extra={**diag, "floor": prm.floor})
        return picked, diag
