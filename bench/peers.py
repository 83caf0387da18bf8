"""Peers side by side: same machine, same run, same data, same embedding vectors.

    vibe-semantic bench peers --data ../shared/data/cranfield

vibe-semantic is served and driven over HTTP (eager: everything embedded); LanceDB (its
full-text index, vectors, and its hybrid query), Chroma (vectors), qdrant-client's local
mode (vectors) and bm25s (BM25) run in this process. Every system gets the vectors of the
real all-MiniLM-L6-v2 from one cache (bench/embed_server.py), computed on exactly the text
vibe-semantic embeds, so differences come from the engines and fusion, not the model.
Ingest time (index build included) is reported apart from embedding time.
"""

from __future__ import annotations

import importlib.metadata
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness, ir, report
from bench.datasets import Dataset, load
from bench.embed_server import CachedModel, model_server
from bench.quality import COLLECTION, corpus_docs
from shared.text.hashing import doc_text
from shared.text.redaction import redact, select_fields

DEPTH = 100
Search = Callable[[str, list[float]], list[str]]


def embed_text(doc: dict[str, Any]) -> str:
    """What vibe-semantic's job handler sends to the embedder for this document."""
    fields = {k: v for k, v in doc.items() if k != "_id"}
    return redact(doc_text(select_fields(fields, None), None))[0]


def timed_run(ds: Dataset, qvecs: dict[str, list[float]], search: Search) -> dict[str, Any]:
    run: dict[str, list[str]] = {}
    took: list[float] = []
    for qid, text in ds.judged_queries().items():
        t0 = time.perf_counter()
        run[qid] = search(text, qvecs[qid])
        took.append((time.perf_counter() - t0) * 1000)
    return {**ir.aggregate(run, ds.qrels), "p50_ms": report.percentile(took, 0.5),
            "p95_ms": report.percentile(took, 0.95)}


# -- vibe-semantic over HTTP ---------------------------------------------------------


def _reader(s: Any, strategy: str) -> Search:
    return lambda q, _v: harness.read_ids(s, COLLECTION, q, strategy, DEPTH)


def vibe(ds: Dataset, base_url: str, qvecs: dict[str, list[float]]) -> dict[str, Any]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": base_url, "VIBE_EMBED_MODEL": "all-MiniLM-L6-v2"}
    with harness.instance(Path(tempfile.mkdtemp(prefix="vibe-peers-")) / "data", "openai", env) as s:
        ingest_s = harness.ingest(s, COLLECTION, corpus_docs(ds))
        embed_s = harness.embed_all(s, COLLECTION)
        rows = {mode: timed_run(ds, qvecs, _reader(s, strategy))
                for mode, strategy in (("bm25", "keyword"), ("vector", "semantic"), ("hybrid", "hybrid"))}
        trivial = []
        for _ in range(100):
            t0 = time.perf_counter()
            s.client.get("/healthz")
            trivial.append((time.perf_counter() - t0) * 1000)
    return {"ingest_s": round(ingest_s, 2), "embed_s": round(embed_s, 2), "modes": rows,
            "note": f"over HTTP; a trivial round trip is {report.percentile(trivial, 0.5)} ms p50"}


# -- in-process peers ---------------------------------------------------------------


class _Stemmer:
    """The Snowball English stemmer (through tantivy), in PyStemmer's shape for bm25s."""

    def __init__(self) -> None:
        import tantivy

        builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(tantivy.Filter.stemmer("english"))
        self._analyzer = builder.build()

    def stemWord(self, word: str) -> str:  # noqa: N802 - PyStemmer's names, which bm25s looks for
        return (self._analyzer.analyze(word) or [word])[0]

    def stemWords(self, words: Sequence[str]) -> list[str]:  # noqa: N802
        return [self.stemWord(w) for w in words]


def bm25s_peer(ds: Dataset, texts: list[str], ids: list[str], qvecs: dict[str, list[float]]) -> dict[str, Any]:
    import bm25s

    stem = _Stemmer()
    t0 = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)
    ingest_s = time.perf_counter() - t0

    def search(q: str, _v: list[float]) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stem, show_progress=False)
        docs, _ = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        return [ids[int(i)] for i in docs[0]]

    return {"ingest_s": round(ingest_s, 2), "modes": {"bm25": timed_run(ds, qvecs, search)},
            "note": "BM25 (k1=1.5, b=0.75 defaults), English stop words, the Snowball English stemmer"}


def qdrant_peer(ds: Dataset, vecs: np.ndarray, ids: list[str], qvecs: dict[str, list[float]]) -> dict[str, Any]:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    t0 = time.perf_counter()
    params = models.VectorParams(size=vecs.shape[1], distance=models.Distance.COSINE)
    client.create_collection("c", vectors_config=params)
    client.upload_collection("c", vectors=vecs, ids=list(range(len(ids))), batch_size=256)
    ingest_s = time.perf_counter() - t0

    def search(_q: str, v: list[float]) -> list[str]:
        return [ids[int(p.id)] for p in client.query_points("c", query=v, limit=DEPTH).points]

    return {"ingest_s": round(ingest_s, 2), "modes": {"vector": timed_run(ds, qvecs, search)},
            "note": "qdrant-client local mode (:memory:), exact search"}


def chroma_peer(ds: Dataset, texts: list[str], vecs: np.ndarray, ids: list[str],
                qvecs: dict[str, list[float]]) -> dict[str, Any]:
    import chromadb

    client = chromadb.EphemeralClient()
    t0 = time.perf_counter()
    col = client.create_collection(f"c{time.time_ns()}", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    for i in range(0, len(ids), 1000):
        col.add(ids=ids[i:i + 1000], embeddings=vecs[i:i + 1000].tolist(), documents=texts[i:i + 1000])
    ingest_s = time.perf_counter() - t0

    def search(_q: str, v: list[float]) -> list[str]:
        return list(col.query(query_embeddings=np.asarray([v], dtype=np.float32), n_results=DEPTH)["ids"][0])

    return {"ingest_s": round(ingest_s, 2), "modes": {"vector": timed_run(ds, qvecs, search)},
            "note": "Chroma EphemeralClient, HNSW cosine (its full-text filter is a substring match, not ranked)"}


def lance_peer(ds: Dataset, texts: list[str], vecs: np.ndarray, ids: list[str],
               qvecs: dict[str, list[float]]) -> dict[str, Any]:
    import lancedb

    db = lancedb.connect(tempfile.mkdtemp(prefix="lance-"))
    t0 = time.perf_counter()
    rows = [{"id": i, "text": t, "vector": v} for i, t, v in zip(ids, texts, vecs.tolist(), strict=True)]
    table = db.create_table("c", data=rows)
    table.create_fts_index("text")
    ingest_s = time.perf_counter() - t0

    def run(query: Any) -> list[str]:
        return [str(r["id"]) for r in query.limit(DEPTH).to_list()]

    modes = {
        "bm25": timed_run(ds, qvecs, lambda q, _v: run(table.search(q, query_type="fts"))),
        "vector": timed_run(ds, qvecs, lambda _q, v: run(table.search(v, query_type="vector"))),
        "hybrid": timed_run(ds, qvecs, lambda q, v: run(table.search(query_type="hybrid").vector(v).text(q))),
    }
    return {"ingest_s": round(ingest_s, 2), "modes": modes,
            "note": "LanceDB: native FTS index (stemming, stop words), brute-force vectors, hybrid with its "
                    "default reranker (RRF)"}


# -- the run ------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    names = ("lancedb", "chromadb", "qdrant-client", "bm25s", "tantivy", "qdrant-edge-py")
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "absent"
    return out


def main(data: Path) -> Path:
    ds = load(data)
    docs = corpus_docs(ds)
    ids, texts = [str(d["_id"]) for d in docs], [embed_text(d) for d in docs]
    with model_server() as server:
        model: CachedModel = server.embedder  # type: ignore[assignment]
        t0 = time.perf_counter()
        vecs = np.asarray(model.embed(texts), dtype=np.float32)
        embed_s = time.perf_counter() - t0
        queries = ds.judged_queries()
        qvecs = dict(zip(queries, model.embed(list(queries.values())), strict=True))
        systems = {"vibe-semantic": vibe(ds, server.base_url, qvecs)}
    systems["LanceDB"] = lance_peer(ds, texts, vecs, ids, qvecs)
    systems["Chroma"] = chroma_peer(ds, texts, vecs, ids, qvecs)
    systems["qdrant-client local"] = qdrant_peer(ds, vecs, ids, qvecs)
    systems["bm25s"] = bm25s_peer(ds, texts, ids, qvecs)
    doc = {"name": f"peers-{ds.name}", "machine": harness.machine(), "dataset": ds.name, "docs": len(ids),
           "queries": len(queries), "versions": _versions(), "peer_embedding_s_cached": round(embed_s, 2),
           "systems": systems}
    return report.write(doc, _markdown(doc))


def _rows(doc: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, sysres in doc["systems"].items():
        for mode, m in sysres["modes"].items():
            rows.append([name, mode, sysres["ingest_s"], sysres.get("embed_s", ""), m["p50_ms"], m["p95_ms"],
                         m["nDCG@10"], m["recall@100"], m["MRR@10"]])
    return rows


def _winners(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Who wins each quality and latency column, said plainly."""
    out = []
    for col, name, best in ((6, "nDCG@10", max), (7, "recall@100", max), (8, "MRR@10", max), (4, "p50 ms", min)):
        top = best(rows, key=lambda r: r[col])
        out.append(f"- {name}: **{top[0]} ({top[1]})** with {top[col]}")
    return out


def _markdown(doc: dict[str, Any]) -> str:
    head = ["system", "mode", "ingest s", "embed s (vibe, via provider)", "p50 ms", "p95 ms", "nDCG@10",
            "recall@100", "MRR@10"]
    rows = _rows(doc)
    notes = "\n".join(f"- {k}: {v['note']}" for k, v in doc["systems"].items())
    return (f"# Peers: {doc['dataset']} ({doc['docs']} docs, {doc['queries']} judged queries)\n\n"
            "Same vectors for every system (all-MiniLM-L6-v2, one cache). vibe-semantic is measured over HTTP "
            "(its latency includes the round trip); peers in-process.\n\n" + report.table(head, rows)
            + "\nBest per column:\n" + "\n".join(_winners(rows)) + "\n\nNotes:\n" + notes + "\n"
            + f"\nVersions: {doc['versions']}\n")
