"""Peers side by side: same machine, same run, same data, same embedding vectors.

    python -m bench peers --data ../shared/data/cranfield

vibe-semantic is served and driven over HTTP (eager: everything embedded); LanceDB (its
full-text index, vectors, and its hybrid query), Chroma (vectors), qdrant-client's local
mode (vectors) and bm25s (BM25) run in this process (bench/peers_engines.py). Every system
gets the vectors of the real all-MiniLM-L6-v2 from one provider (bench/embed_server.py, the
OpenAI embeddings protocol over a disk cache), computed on exactly the text vibe-semantic
embeds, so differences come from the engines and fusion, not the model. Ingest time (index
build included) is reported apart from embedding time.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import harness, report
from bench.datasets import Dataset, load
from bench.embed_server import model_server
from bench.lazy import COMMON_ENV
from bench.peers_engines import DEPTH, PEERS, REPEATS, Inputs, Search, timed_run
from bench.quality import COLLECTION, corpus_docs
from shared.adapters.embedders.onnx_export import versions
from shared.text.hashing import doc_text
from shared.text.redaction import redact, select_fields

MODEL = COMMON_ENV["VIBE_EMBED_MODEL"]
BATCH = 32  # vibe-semantic's default embed batch (Settings.embed_batch_size): peers embed alike
VIBE = "vibe-semantic"
VIBE_MODES = {"bm25": "keyword", "vector": "semantic", "hybrid": "hybrid"}


def embed_text(doc: dict[str, Any]) -> str:
    """What vibe-semantic's job handler sends to the embedder for this document."""
    fields = {k: v for k, v in doc.items() if k != "_id"}
    return redact(doc_text(select_fields(fields, None), None))[0]


def _round_trips(call: Callable[[], object], n: int = 200) -> float:
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        took.append((time.perf_counter() - t0) * 1000)
    return report.percentile(took, 0.5)


# -- the shared vectors, through the same provider vibe-semantic uses ----------------------


def _provider_embed(client: httpx.Client, texts: list[str]) -> list[list[float]]:
    r = client.post("/embeddings", json={"model": MODEL, "input": texts})
    r.raise_for_status()
    return [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])]


def prepare(ds: Dataset, base_url: str) -> Inputs:
    """Document vectors once, in vibe-semantic's batch size, timed; query vectors likewise (untimed)."""
    docs = corpus_docs(ds)
    ids, texts = [str(d["_id"]) for d in docs], [embed_text(d) for d in docs]
    with httpx.Client(base_url=base_url, timeout=600) as client:
        t0 = time.perf_counter()
        vecs = [v for i in range(0, len(texts), BATCH) for v in _provider_embed(client, texts[i:i + BATCH])]
        embed_s = time.perf_counter() - t0
        queries = ds.judged_queries()
        qvecs = dict(zip(queries, _provider_embed(client, list(queries.values())), strict=True))
    return Inputs(ds, ids, texts, np.asarray(vecs, dtype=np.float32), qvecs, embed_s)


def provider_query_p50(inp: Inputs, base_url: str) -> float:
    """One query through the provider: what a cold query vector costs any of the systems."""
    texts = iter(list(inp.ds.judged_queries().values()) * 2)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        return _round_trips(lambda: _provider_embed(client, [next(texts)]), n=len(inp.qvecs))


# -- vibe-semantic over HTTP ---------------------------------------------------------------


def _reader(s: Any, strategy: str) -> Search:
    return lambda q, _v: harness.read_ids(s, COLLECTION, q, strategy, DEPTH)


def _embed_everything(s: Any) -> tuple[float, dict[str, Any]]:
    """Reindex until every eligible document is ready (documents too short to embed are denied)."""
    embed_s = harness.embed_all(s, COLLECTION)
    cov = harness.coverage(s, COLLECTION)
    if cov["ready"] + cov["states"]["denied"] != cov["total"]:
        raise RuntimeError(f"vibe-semantic coverage is not 100% after reindex: {cov}")
    return embed_s, cov


def _warm_query_vectors(s: Any, ds: Dataset) -> None:
    # The peers are handed query vectors; vibe-semantic's query-vector cache is filled first
    # so that no mode (whichever runs first) pays the provider for them either.
    for text in ds.judged_queries().values():
        harness.read_ids(s, COLLECTION, text, "semantic", 1)


def vibe(inp: Inputs, base_url: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    env = env or {**COMMON_ENV, "VIBE_OPENAI_BASE_URL": base_url}
    with harness.instance(Path(tempfile.mkdtemp(prefix="vibe-peers-")) / "data", env["VIBE_EMBEDDER"], env) as s:
        ingest_s = harness.ingest(s, COLLECTION, corpus_docs(inp.ds))
        embed_s, cov = _embed_everything(s)
        _warm_query_vectors(s, inp.ds)
        modes = {mode: timed_run(inp.ds, inp.qvecs, _reader(s, strategy)) for mode, strategy in VIBE_MODES.items()}
        healthz = _round_trips(lambda: s.client.get("/healthz").raise_for_status())
    return {"ingest_s": round(ingest_s, 2), "embed_s": round(embed_s, 2), "modes": modes, "healthz_p50_ms": healthz,
            "coverage": cov,
            "note": "served instance (embedded profile, 1 process), driven over HTTP: bulk ingest, "
                    f"POST /semantic/reindex until coverage is 100% ({cov['ready']} embedded, "
                    f"{cov['states']['denied']} ineligible: {cov.get('skipped')}), POST /v1/read with strategy "
                    "keyword / semantic / hybrid, limit 100; query vectors from its cache (warmed)"}


# -- the run -------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    names = ("vibe-semantic", "lancedb", "chromadb", "qdrant-client", "bm25s", "tantivy", "qdrant-edge-py",
             "pyarrow", "numpy", "sentence-transformers", "ir-measures")
    return versions(names)


def _commit() -> str:
    root = Path(__file__).resolve().parents[1]
    git = ["git", "-C", str(root)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    return f"{head}{' (uncommitted changes)' if dirty else ''}"


def run_systems(inp: Inputs, base_url: str, peers: Sequence[str] | None = None,
                env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    systems = {VIBE: vibe(inp, base_url, env)}
    for name, peer in PEERS.items():  # after vibe-semantic's server has stopped: nothing else running
        if peers is None or name.lower() in {p.lower() for p in peers}:  # `--peers lancedb,bm25s`
            systems[name] = peer(inp)
            print(f"{name:20} {systems[name]['modes']}")
    return systems


def with_distractors(ds: Dataset, n: int, seed: int = 5) -> Dataset:
    """The judged collection plus `n` unjudged documents drawn from its own word distribution
    (bags of its words, title 6 + text 40): both legs see realistic near-misses, and the
    collection reaches the size whose latency is measured. Judgments are unchanged."""
    if n <= 0:
        return ds
    words = [w for d in ds.corpus.values() for w in f"{d['title']} {d['text']}".split() if w.isalpha()]
    rng = random.Random(seed)
    corpus = dict(ds.corpus)
    for i in range(n):
        corpus[f"x{i}"] = {"title": " ".join(rng.choices(words, k=6)), "text": " ".join(rng.choices(words, k=40))}
    return Dataset(f"{ds.name}+{n}", corpus, ds.queries, ds.qrels)


def prepare_hash(ds: Dataset, dim: int = 384) -> Inputs:
    """Every system gets the hash embedder's vectors (cheap at 100k documents on 2 cores);
    vibe-semantic computes the very same ones itself with VIBE_EMBEDDER=hash."""
    from shared.adapters.embedders.hash_embedder import HashEmbedder

    emb = HashEmbedder(dim)
    docs = corpus_docs(ds)
    ids, texts = [str(d["_id"]) for d in docs], [embed_text(d) for d in docs]
    t0 = time.perf_counter()
    vecs = np.asarray(emb.embed(texts), dtype=np.float32)
    embed_s = time.perf_counter() - t0
    qvecs = {q: emb.embed_query(t) for q, t in ds.judged_queries().items()}
    return Inputs(ds, ids, texts, vecs, qvecs, embed_s)


def main(data: Path, distractors: int = 0, vectors: str = "model", peers: Sequence[str] | None = None) -> Path:
    ds = with_distractors(load(data), distractors)
    params = {"depth": DEPTH, "embed_batch": BATCH, "warm_up_queries": 1, "distractors": distractors,
              "vectors": vectors, "latency": f"per query, median of {REPEATS} passes; p50/p95 over queries"}
    if vectors == "hash":
        inp = prepare_hash(ds)
        env = {**COMMON_ENV, "VIBE_EMBEDDER": "hash", "VIBE_EMBED_DIM": "384"}
        systems, query_embed_p50, model = run_systems(inp, "", peers, env), 0.0, "hash:v1@384"
    else:
        with model_server() as server:
            inp = prepare(ds, server.base_url)
            query_embed_p50 = provider_query_p50(inp, server.base_url)
            systems, model = run_systems(inp, server.base_url, peers), MODEL
    doc = {"name": f"peers-{ds.name}", "machine": harness.machine(), "dataset": ds.name, "docs": len(inp.ids),
           "queries": len(inp.qvecs), "commit": _commit(), "versions": _versions(), "model": model,
           "parameters": params, "load_average": os.getloadavg(),
           "provider_query_embed_p50_ms": query_embed_p50, "systems": systems}
    return report.write(doc, markdown(doc))


# -- the summary (every claim in it is computed from the figures) ---------------------------

COLUMNS: list[tuple[str, str, Callable[..., Any]]] = [
    ("ingest s", "ingest_s", min), ("index/embedding s", "embed_s", min), ("p50 ms", "p50_ms", min),
    ("p95 ms", "p95_ms", min), ("nDCG@10", "nDCG@10", max), ("recall@100", "recall@100", max),
    ("MRR@10", "MRR@10", max),
]


def rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, res in doc["systems"].items():
        for mode, m in res["modes"].items():
            out.append({"system": name, "mode": mode, "ingest_s": res["ingest_s"], "embed_s": res["embed_s"], **m})
    return out


def _best(rs: Sequence[dict[str, Any]], key: str, pick: Callable[..., Any]) -> tuple[Any, list[dict[str, Any]]]:
    scored = [r for r in rs if r[key] is not None]
    top = pick(r[key] for r in scored)
    return top, [r for r in scored if r[key] == top]


def _label(r: dict[str, Any], key: str) -> str:
    return r["system"] if key in ("ingest_s", "embed_s") else f"{r['system']} ({r['mode']})"


def _verdict(rs: Sequence[dict[str, Any]], col: str, key: str, pick: Callable[..., Any]) -> str:
    top, holders = _best(rs, key, pick)
    names = sorted({_label(r, key) for r in holders})
    peers = [r for r in holders if r["system"] != VIBE]
    ours = _best([r for r in rs if r["system"] == VIBE], key, pick)
    others = _best([r for r in rs if r["system"] != VIBE], key, pick)
    if not peers:
        return (f"- {col}: vibe-semantic wins with {top} ({', '.join(names)}); best peer "
                f"{others[0]} ({', '.join(sorted({_label(r, key) for r in others[1]}))})")
    if len(peers) < len(holders):
        return f"- {col}: **a peer ties vibe-semantic** at {top}: {', '.join(names)}"
    return (f"- {col}: **a peer wins: {', '.join(names)} with {top}**; vibe-semantic's best is {ours[0]} "
            f"({', '.join(sorted({_label(r, key) for r in ours[1]}))})")


def _per_mode(rs: Sequence[dict[str, Any]]) -> str:
    head = ["mode"] + [c for c, k, _ in COLUMNS if k not in ("ingest_s", "embed_s")]
    table = []
    for mode in dict.fromkeys(r["mode"] for r in rs):
        same = [r for r in rs if r["mode"] == mode]
        cells = [" = ".join(sorted({r["system"] for r in _best(same, k, f)[1]}))
                 for _, k, f in COLUMNS if k not in ("ingest_s", "embed_s")]
        table.append([mode, *cells])
    return report.table(head, table)


def _cell(v: Any) -> str:
    return "—" if v is None else str(v)


def _latency_note(doc: dict[str, Any]) -> str:
    ours = doc["systems"][VIBE]
    rtt = ours["healthz_p50_ms"]
    net = ", ".join(f"{mode} {round(m['p50_ms'] - rtt, 2)}" for mode, m in ours["modes"].items())
    return (f"vibe-semantic's latencies are measured over HTTP and include a round trip; a trivial `GET /healthz` "
            f"round trip is **{rtt} ms p50** on this machine — subtract it to compare with the in-process peers "
            f"(vibe-semantic p50 minus it: {net} ms). The table and the verdicts above use the raw figures. "
            f"No system pays for query embedding in these latencies (peers are handed the query vectors; "
            f"vibe-semantic's query-vector cache is warmed first)"
            + (f"; one query through the embedding provider costs {doc['provider_query_embed_p50_ms']} ms p50."
               if _hash_vectors(doc) is None else ".") + _scale_note(doc))


def _hash_vectors(doc: dict[str, Any]) -> str | None:
    """The sentence that replaces the provider's description when every system got hash vectors."""
    if doc.get("parameters", {}).get("vectors") != "hash":
        return None
    return (f"Same machine, same run, same data, same vectors ({doc['model']}: the deterministic hash embedder, "
            "computed in this process for the peers and by vibe-semantic itself with VIBE_EMBEDDER=hash, so the "
            "vectors are identical and cheap at this size; their quality is far below a real model's, for every "
            "system alike). ")


def _scale_note(doc: dict[str, Any]) -> str:
    n = doc.get("parameters", {}).get("distractors", 0)
    if not n:
        return ""
    return (f" The collection is the judged set plus {n} unjudged distractors drawn from its own words "
            "(`--distractors`), so both legs meet near-misses at this size; judgments are unchanged.")


APPROXIMATE = ("Chroma",)  # HNSW; the other vector searches here are exact


def _same_vectors_note(rs: Sequence[dict[str, Any]]) -> str:
    vec = {r["system"]: (r["nDCG@10"], r["recall@100"]) for r in rs if r["mode"] == "vector"}
    exact = {k: v for k, v in vec.items() if k not in APPROXIMATE}
    verdict = ("The exact searches agree, as the same vectors should make them"
               if len(set(exact.values())) == 1 else "**The exact searches disagree: the vectors are not the same**")
    return (f"Vector-only (nDCG@10, recall@100): {vec}. {verdict}; an approximate index ({', '.join(APPROXIMATE)}) "
            "moves documents in and out of the top 100 by chance, which is not a quality difference.")


def markdown(doc: dict[str, Any]) -> str:
    rs = rows(doc)
    head = ["system", "mode"] + [c for c, _, _ in COLUMNS]
    table = [[r["system"], r["mode"], *(_cell(r[k]) for _, k, _ in COLUMNS)] for r in rs]
    verdicts = "\n".join(_verdict(rs, c, k, f) for c, k, f in COLUMNS)
    notes = "\n".join(f"- {k}: {v['note']}" for k, v in doc["systems"].items())
    return (f"# Peers: {doc['dataset']} ({doc['docs']} docs, {doc['queries']} judged queries, top {DEPTH})\n\n"
            + (_hash_vectors(doc) or f"Same machine, same run, same data, same vectors ({doc['model']} through one "
               "OpenAI-protocol provider with a disk cache). ")
            + "vibe-semantic is served and measured over HTTP; the peers run in-process. "
            f"Latency: each query's median of {REPEATS} passes, then p50/p95 over the queries. "
            "*ingest s*: loading the documents, index build included (vectors already computed for the peers). "
            "*index/embedding s*: vibe-semantic = `POST /semantic/reindex` until coverage is 100% (queue, worker, "
            "provider calls, commit, vector index; polled every 0.5 s); peers = fetching the same vectors from the "
            "same provider in batches of 32 (one figure shared by every peer; with hash vectors: computing them). "
            "Both are served from the vector cache, so neither is the model's speed (see `bench spine`).\n\n"
            + report.table(head, table) + "\n## Who wins each column\n\n" + verdicts + "\n\n"
            "## Who wins each column within a mode\n\n" + _per_mode(rs) + "\n## Latency\n\n" + _latency_note(doc)
            + "\n\n" + _same_vectors_note(rs) + "\n\n## What ran\n\n" + notes + "\n\n"
            f"Versions: {doc['versions']}; vibe-semantic commit {doc['commit']}; machine {doc['machine']}\n")
