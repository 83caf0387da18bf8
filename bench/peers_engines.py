"""The in-process peers of `bench peers`: LanceDB, Chroma, qdrant-client local mode, bm25s.

Each peer gets the same document ids, texts and vectors (`Inputs`) and returns a `System`:
ingest seconds (table creation and index build included), its modes and a note saying
exactly what ran. Queries ask for ids only, so the timing is the engine's, not the cost of
materialising vectors and texts that a ranking does not need.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench import ir, report
from bench.datasets import Dataset

DEPTH = 100  # recall@100 needs 100 results
REPEATS = 3
Search = Callable[[str, list[float]], list[str]]  # (query text, query vector) -> ranked doc ids


@dataclass
class Inputs:
    ds: Dataset
    ids: list[str]
    texts: list[str]  # exactly the text vibe-semantic embeds and indexes (title + body)
    vecs: np.ndarray  # float32, one row per id, unit length
    qvecs: dict[str, list[float]]  # judged query id -> vector
    embed_s: float  # time to get `vecs` from the embedding provider, shared by every peer


def timed_run(ds: Dataset, qvecs: dict[str, list[float]], search: Search) -> dict[str, Any]:
    """Every judged query, REPEATS passes after one untimed warm-up query.

    A query's latency is the median of its passes: the machine is shared, and one
    scheduler hiccup should not decide a p95 over a couple of hundred queries.
    """
    queries = ds.judged_queries()
    first = next(iter(queries))
    search(queries[first], qvecs[first])  # lazy index loads and first-call set-up are not query latency
    run: dict[str, list[str]] = {}
    took: dict[str, list[float]] = {q: [] for q in queries}
    for _ in range(REPEATS):
        for qid, text in queries.items():
            t0 = time.perf_counter()
            run[qid] = search(text, qvecs[qid])
            took[qid].append((time.perf_counter() - t0) * 1000)
    per_query = [statistics.median(t) for t in took.values()]
    return {**ir.aggregate(run, ds.qrels), "p50_ms": report.percentile(per_query, 0.5),
            "p95_ms": report.percentile(per_query, 0.95)}


def system(ingest_s: float, embed_s: float | None, modes: dict[str, Any], note: str) -> dict[str, Any]:
    """`embed_s` is None for a system that embeds nothing."""
    return {"ingest_s": round(ingest_s, 2), "embed_s": None if embed_s is None else round(embed_s, 2),
            "modes": modes, "note": note}


# -- bm25s --------------------------------------------------------------------------


class _Stemmer:
    """The Snowball English stemmer (through tantivy), in PyStemmer's shape for bm25s.

    PyStemmer is not installed; tantivy's `stemmer("english")` is the same Snowball algorithm.
    """

    def __init__(self) -> None:
        import tantivy

        builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(tantivy.Filter.stemmer("english"))
        self._analyzer = builder.build()

    def stemWord(self, word: str) -> str:  # noqa: N802 - PyStemmer's names, which bm25s looks for
        return (self._analyzer.analyze(word) or [word])[0]

    def stemWords(self, words: Sequence[str]) -> list[str]:  # noqa: N802
        return [self.stemWord(w) for w in words]


def bm25s_peer(inp: Inputs) -> dict[str, Any]:
    import bm25s

    stem = _Stemmer()
    t0 = time.perf_counter()
    retriever = bm25s.BM25()  # method "lucene", k1=1.5, b=0.75
    retriever.index(bm25s.tokenize(inp.texts, stopwords="en", stemmer=stem, show_progress=False),
                    show_progress=False)
    ingest_s = time.perf_counter() - t0

    def search(q: str, _v: list[float]) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        # bm25s fills k with zero-score documents; they match nothing and are not results
        return [inp.ids[int(i)] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]

    return system(ingest_s, None, {"bm25": timed_run(inp.ds, inp.qvecs, search)},
                  "bm25s BM25 (lucene variant, k1=1.5, b=0.75) over title+body, English stop words, Snowball "
                  "English stemmer; zero-score fillers dropped")


# -- qdrant-client local mode --------------------------------------------------------


def qdrant_peer(inp: Inputs) -> dict[str, Any]:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    t0 = time.perf_counter()
    params = models.VectorParams(size=inp.vecs.shape[1], distance=models.Distance.COSINE)
    client.create_collection("c", vectors_config=params)
    client.upload_collection("c", vectors=inp.vecs, ids=list(range(len(inp.ids))), batch_size=256, wait=True)
    ingest_s = time.perf_counter() - t0

    def search(_q: str, v: list[float]) -> list[str]:
        hits = client.query_points("c", query=v, limit=DEPTH, with_payload=False).points
        return [inp.ids[int(p.id)] for p in hits]

    return system(ingest_s, inp.embed_s, {"vector": timed_run(inp.ds, inp.qvecs, search)},
                  "qdrant-client local mode (:memory:, pure Python/numpy), exact cosine search")


# -- Chroma -------------------------------------------------------------------------


def _chroma_ranked_text(col: Any, v: list[float]) -> str:
    """Whether Chroma's ranked search API (BM25 / hybrid with RRF) runs here; asked, not assumed."""
    from chromadb.execution.expression import Knn
    from chromadb.execution.expression import Search as ChromaSearch

    try:
        col.search(ChromaSearch().rank(Knn(query=v)).limit(DEPTH))
    except NotImplementedError as e:
        return f"its ranked full-text/hybrid API `collection.search` raises NotImplementedError ({e})"
    return "`collection.search` answered but is not benchmarked here"


def chroma_peer(inp: Inputs) -> dict[str, Any]:
    import chromadb

    client = chromadb.EphemeralClient()
    t0 = time.perf_counter()
    col = client.create_collection(f"c{time.time_ns()}", configuration={"hnsw": {"space": "cosine"}},
                                   embedding_function=None)
    for i in range(0, len(inp.ids), 1000):
        col.add(ids=inp.ids[i:i + 1000], embeddings=inp.vecs[i:i + 1000], documents=inp.texts[i:i + 1000])
    ingest_s = time.perf_counter() - t0

    def search(_q: str, v: list[float]) -> list[str]:
        got = col.query(query_embeddings=np.asarray([v], dtype=np.float32), n_results=DEPTH, include=[])
        return list(got["ids"][0])

    modes = {"vector": timed_run(inp.ds, inp.qvecs, search)}
    note = ("Chroma EphemeralClient, HNSW cosine (approximate; default ef), vector only: "
            + _chroma_ranked_text(col, inp.qvecs[next(iter(inp.qvecs))])
            + ", and `where_document` $contains is an unranked substring filter, so there is no BM25 leg to run")
    return system(ingest_s, inp.embed_s, modes, note)


# -- LanceDB ------------------------------------------------------------------------


def _lance_table(inp: Inputs) -> Any:
    import lancedb  # imported by lance_peer before the clock starts
    import pyarrow as pa

    db = lancedb.connect(tempfile.mkdtemp(prefix="lance-"))
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(inp.vecs.reshape(-1)), inp.vecs.shape[1])
    data = pa.table({"id": pa.array(inp.ids), "text": pa.array(inp.texts), "vector": vectors})
    table = db.create_table("c", data=data)
    table.create_fts_index("text")  # native FTS; defaults: lower case, English stemming and stop words
    return table


def _lance_ids(query: Any) -> list[str]:
    return [str(x) for x in query.select(["id"]).limit(DEPTH).to_arrow()["id"].to_pylist()]


def lance_peer(inp: Inputs) -> dict[str, Any]:
    import lancedb  # noqa: F401 - import time is not ingest time

    t0 = time.perf_counter()
    table = _lance_table(inp)
    ingest_s = time.perf_counter() - t0
    searches: dict[str, Search] = {
        "bm25": lambda q, _v: _lance_ids(table.search(q, query_type="fts")),
        "vector": lambda _q, v: _lance_ids(table.search(v, query_type="vector").distance_type("cosine")),
        "hybrid": lambda q, v: _lance_ids(table.search(query_type="hybrid").vector(v).text(q)
                                          .distance_type("cosine")),
    }
    modes = {mode: timed_run(inp.ds, inp.qvecs, s) for mode, s in searches.items()}
    return system(ingest_s, inp.embed_s, modes,
                  "LanceDB (embedded, local directory): native FTS index (BM25, English stemming and stop "
                  "words), flat exact cosine vector search (no ANN index at this size), hybrid with its "
                  "default reranker (RRFReranker, k=60)")


PEERS: dict[str, Callable[[Inputs], dict[str, Any]]] = {
    "LanceDB": lance_peer, "Chroma": chroma_peer, "qdrant-client local": qdrant_peer, "bm25s": bm25s_peer,
}
