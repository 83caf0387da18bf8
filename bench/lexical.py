"""The lexical leg alone, in process: ranking quality of the analysis and the cost of filters.

    .venv/bin/python -m bench.lexical --data ../shared/data [--docs 100000]

1. Quality. nDCG@10, recall@100 and MRR@10 on Cranfield and CISI for the
   embedded adapter as shipped (TantivyLexicalIndex, shared/adapters/analysis.py), the previous
   analysis (simple tokenizer, Lucene's 33 stop words, title + body: schema version 2) and bm25s
   over the same title + text (the peer of `bench peers`), all in this run. The analysis was
   chosen on Cranfield alone (the ablation rows below are Cranfield only); CISI is held out and
   reported, never tuned on.
2. Filters at scale. A synthetic corpus of `--docs` documents (texts drawn
   from both collections, metadata fields with known selectivity) in the adapter; p50/p95 of
   keyword searches (limit 500, the planner's candidate depth) with no metadata filter and with
   eq / in / range / id allow-list filters, and their ratio to the unfiltered search measured in
   the same run.
   With `--opensearch URL` (or `auto`: a private node from deploy/opensearch-dev), the
   distributed profile's adapter (OpenSearchLexicalIndex, the same analysis in the index template)
   ranks the same documents beside it: both profiles must rank alike (within 0.01 nDCG@10); and
   each language's analyzer is compared with tantivy's token by token on real prose.
3. Languages in one tenant. Each set's nDCG@10 alone and beside a French
   collection ten times its size (the other set's texts, `VIBE_COLLECTION_LANGUAGES`): a
   language's BM25 statistics must not move with another language's documents.

Writes bench/results/lexical-<timestamp>.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import tantivy
from tantivy import Filter, Occur, Query, SchemaBuilder, TextAnalyzerBuilder, Tokenizer

from bench import harness, ir, report
from bench.datasets import Dataset, load
from shared.adapters import analysis
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import FieldCondition, SearchFilter

DEPTH = 100
Ranker = Callable[[str], list[str]]


# -- rankers -----------------------------------------------------------------------------------


def _stored(ds: Dataset, collection: str = "c", times: int = 1) -> list[StoredDoc]:
    items = list(ds.corpus.items())
    return [StoredDoc(DocKey("t", collection, f"{did}~{n}" if times > 1 else did),
                      {"title": d["title"], "text": d["text"]}, [PUBLIC_PRINCIPAL], None, "h", 0.0)
            for n in range(times) for did, d in items]


def shipped(ds: Dataset, root: Path, beside: Sequence[StoredDoc] = (),
            languages: analysis.LanguageMap = analysis.ENGLISH_ONLY) -> Ranker:
    """The embedded adapter itself, as the read path calls it (with `beside`: other documents
    in the same tenant, another collection)."""
    idx = TantivyLexicalIndex(root, languages=languages)
    docs = [*_stored(ds), *beside]
    for i in range(0, len(docs), 5000):
        idx.apply(docs[i:i + 5000], [])
    flt = SearchFilter("t", ("c",), (PUBLIC_PRINCIPAL,))
    return lambda q: [h.key.doc_id for h in idx.search(flt, q, DEPTH)]


@contextlib.contextmanager
def on_opensearch(ds: Dataset, url: str) -> Iterator[Ranker]:
    """The distributed profile's adapter on a real server, as the read path calls it; its
    indices (a private prefix) are deleted afterwards."""
    from opensearchpy import OpenSearch

    from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex

    idx = OpenSearchLexicalIndex(OpenSearch(hosts=[url], timeout=120), prefix=f"vibe-bench-{uuid.uuid4().hex[:8]}-",
                                 refresh="true")
    try:
        docs = _stored(ds)
        for i in range(0, len(docs), 1000):
            idx.apply(docs[i:i + 1000], [])
        flt = SearchFilter("t", ("c",), (PUBLIC_PRINCIPAL,))
        yield lambda q: [h.key.doc_id for h in idx.search(flt, q, DEPTH)]
    finally:
        idx.drop()
        idx.close()


@contextlib.contextmanager
def opensearch_url(arg: str | None) -> Iterator[str | None]:
    """`--opensearch`: a server's URL, `auto` for a private dev node (deploy/opensearch-dev), or
    nothing (no OpenSearch rows)."""
    if arg != "auto":
        yield arg
        return
    from harness.opensearch_server import opensearch_node

    with opensearch_node() as node:
        yield node.url


def _chunks(texts: Sequence[str], size: int = 20_000) -> list[str]:
    """Texts joined by newlines, about `size` characters a request (`_analyze` answers at most
    10,000 tokens)."""
    out: list[str] = []
    start = chars = 0
    for i, t in enumerate(texts):
        chars += len(t)
        if chars >= size:
            out.append("\n".join(texts[start:i + 1]))
            start, chars = i + 1, 0
    return [*out, "\n".join(texts[start:])] if start < len(texts) else out


def analysis_parity(url: str, per_language: int = 100_000) -> dict[str, Any]:
    """Each language's analyzer on the server against tantivy's, token by token, on real prose:
    both English collections and, for the other languages, the machine's gettext catalogs
    (harness/analysis_samples.py). Stemming maps one token to one and the pipeline before
    it is the same in both (the contract suite asserts it), so the streams align; a text whose
    streams do not is counted apart."""
    from collections import Counter as Tally

    from opensearchpy import OpenSearch

    from harness.analysis_samples import real_texts
    from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex, index_name

    every = analysis.LanguageMap.parse("en", {code: code for code in analysis.LANGUAGES})
    idx = OpenSearchLexicalIndex(OpenSearch(hosts=[url], timeout=120), prefix=f"vibe-parity-{uuid.uuid4().hex[:8]}-",
                                 languages=every)
    out: dict[str, Any] = {}
    try:
        idx.apply([StoredDoc(DocKey("t", "c", "1"), {"title": "x"}, [PUBLIC_PRINCIPAL], None, "h", 0.0)], [])
        name = index_name("t", idx.prefix)
        for lang in every.languages():
            ours, texts = analysis.tantivy_analyzer(lang), real_texts(lang.code, per_language)
            pairs: Tally[tuple[str, str]] = Tally()
            tokens = unaligned = 0
            for text in _chunks(texts):
                server = [t["token"] for t in idx.client.indices.analyze(
                    index=name, body={"analyzer": lang.analyzer, "text": text})["tokens"]]
                mine = ours.analyze(text)
                if len(server) != len(mine):
                    unaligned += 1
                    continue
                tokens += len(mine)
                pairs.update((a, b) for a, b in zip(server, mine, strict=True) if a != b)
            differ = sum(pairs.values())
            out[lang.code] = {"texts": len(texts), "tokens": tokens, "differing_tokens": differ,
                              "differing_pct": round(100 * differ / max(tokens, 1), 2), "distinct": len(pairs),
                              "unaligned_chunks": unaligned,
                              "top": [f"{a} / {b} ({n})" for (a, b), n in pairs.most_common(5)]}
            print(lang.code, {k: v for k, v in out[lang.code].items() if k != "top"}, flush=True)
    finally:
        idx.drop()
        idx.close()
    return out


FRENCH_BESIDE = analysis.LanguageMap.parse("en", {"fr": "french"})


def mixed_languages(data: Path, names: Sequence[str], times: int = 10) -> dict[str, Any]:
    out: dict[str, Any] = {"times": times, "sets": {}}
    for name in names:
        ds, other = load(data / name), load(data / next(n for n in names if n != name))
        beside = _stored(other, "fr", times=max(1, times * len(ds.corpus) // len(other.corpus)))
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            out["sets"][name] = {
                "alone": score(ds, shipped(ds, Path(a), languages=FRENCH_BESIDE)),
                "beside_french": score(ds, shipped(ds, Path(b), beside, FRENCH_BESIDE)),
                "french_docs": len(beside)}
    return out


def _analyzer(stop: str) -> tantivy.TextAnalyzer:
    b = TextAnalyzerBuilder(Tokenizer.simple()).filter(Filter.remove_long(40)).filter(Filter.lowercase())
    b = b.filter(Filter.stopword("english") if stop == "lucene33" else Filter.custom_stopword(list(analysis.STOPWORDS)))
    return b.filter(Filter.stemmer("english")).build()


def variant(ds: Dataset, stop: str, boosts: dict[str, float]) -> Ranker:
    """A stand-alone tantivy index with one analysis/field choice (ablation and the previous
    analysis: stop "lucene33", boosts title 1 + body 1). `ds.corpus` may be large (timings)."""
    an = _analyzer(stop)
    sb = SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw")
    for f in boosts:
        sb.add_text_field(f, tokenizer_name="x", index_option="freq")
    schema = sb.build()
    index = tantivy.Index(schema)
    index.register_tokenizer("x", an)
    w = index.writer(50_000_000, 1)
    for did, d in ds.corpus.items():
        vals = {"title": d["title"], "body": d["text"], "all": [d["title"], d["text"]]}
        w.add_document(tantivy.Document(key=did, **{f: vals[f] for f in boosts}))
    w.commit()
    index.reload()
    searcher = index.searcher()

    def rank(q: str) -> list[str]:
        terms = Counter(an.analyze(q))
        if not terms:
            return []
        should = [(Occur.Should, Query.boost_query(Query.term_query(schema, f, t), b * n))
                  for t, n in terms.items() for f, b in boosts.items()]
        res = searcher.search(Query.boolean_query(should), DEPTH)
        return [searcher.doc(a)["key"][0] for _, a in res.hits]
    return rank


def bm25s_ranker(ds: Dataset) -> Ranker:
    import bm25s

    from bench.peers_engines import _Stemmer

    ids = list(ds.corpus)
    stem = _Stemmer()
    texts = [f"{d['title']}\n{d['text']}" for d in ds.corpus.values()]
    retriever = bm25s.BM25()  # method "lucene", k1=1.5, b=0.75
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)

    def rank(q: str) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        return [ids[int(i)] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]
    return rank


def score(ds: Dataset, rank: Ranker) -> dict[str, float]:
    return ir.aggregate({qid: rank(text) for qid, text in ds.judged_queries().items()}, ds.qrels)


PREVIOUS: dict[str, Any] = {"stop": "lucene33", "boosts": {"title": 1.0, "body": 1.0}}
SHIPPED: dict[str, Any] = {"stop": "nltk", "boosts": analysis.FIELD_BOOSTS}
ABLATION: dict[str, dict[str, Any]] = {  # Cranfield only: how the shipped choice was made
    "previous": PREVIOUS,
    "+ longer stop list (and single letters)": {**PREVIOUS, "stop": "nltk"},
    "previous + all field (title/body/all 0.5/0.5/1)": {**PREVIOUS, "boosts": {"title": 0.5, "body": 0.5, "all": 1.0}},
    "one field (all)": {**PREVIOUS, "boosts": {"all": 1.0}},
    "stop list + one field (all)": {"stop": "nltk", "boosts": {"all": 1.0}},
    "stop list + title/body/all (0.5/0.5/1): analyses the body twice": {
        "stop": "nltk", "boosts": {"title": 0.5, "body": 0.5, "all": 1.0}},
    "stop list + title/all (1/1)": {"stop": "nltk", "boosts": {"title": 1.0, "all": 1.0}},
    "stop list + title/all (0.5/1): shipped": SHIPPED,
}


OPENSEARCH_ROW = "shipped, OpenSearch 2.19 (distributed profile)"


def quality(data: Path, tuning: str, held_out: str, opensearch: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"tuned_on": tuning, "held_out": held_out, "sets": {}}
    for name in (tuning, held_out):
        ds = load(data / name)
        with tempfile.TemporaryDirectory() as tmp:
            rows: dict[str, Any] = {"shipped (vibe-semantic)": score(ds, shipped(ds, Path(tmp) / "lex"))}
        if opensearch:
            with on_opensearch(ds, opensearch) as rank:
                rows[OPENSEARCH_ROW] = score(ds, rank)
        rows |= {"previous analysis": score(ds, variant(ds, **PREVIOUS)), "bm25s": score(ds, bm25s_ranker(ds))}
        if name == tuning:
            rows["ablation"] = {label: score(ds, variant(ds, **cfg)) for label, cfg in ABLATION.items()}
        out["sets"][name] = {"docs": len(ds.corpus), "queries": len(ds.judged_queries()), **rows}
        print(name, {k: v["nDCG@10"] for k, v in rows.items() if k != "ablation"}, flush=True)
    return out


# -- filters at scale ---------------------------------------------------------------------------


def _synthetic(sets: Sequence[Dataset], n: int, seed: int = 7) -> list[StoredDoc]:
    rng = random.Random(seed)
    pool = [d for ds in sets for d in ds.corpus.values()]
    tags = [f"tag{i}" for i in range(20)]
    docs = []
    for i in range(n):
        d = rng.choice(pool)
        fields = {"title": d["title"], "text": d["text"], "lang": ("en", "de", "fr", "es")[i % 4],
                  "year": 1950 + rng.randrange(75), "price": round(rng.uniform(0, 1000), 2),
                  "tags": rng.sample(tags, 3)}
        docs.append(StoredDoc(DocKey("t", "c", str(i)), fields, [PUBLIC_PRINCIPAL], None, "h", 0.0))
    return docs


def filters_at_scale(data: Path, n: int, queries: int = 60) -> dict[str, Any]:
    sets = [load(data / name) for name in ("cranfield", "cisi")]
    docs = _synthetic(sets, n)
    rng = random.Random(3)
    qs = rng.sample([q for ds in sets for q in ds.judged_queries().values()], queries)
    some = tuple(DocKey("t", "c", str(i)) for i in rng.sample(range(n), 200))
    cases: dict[str, tuple[FieldCondition, ...] | tuple[DocKey, ...]] = {
        "none": (),
        "eq lang=en (25%)": (FieldCondition("lang", "eq", ("en",)),),
        "in tags (2 of 20, ~29%)": (FieldCondition("tags", "in", ("tag1", "tag2")),),
        "range year [1990, 2000) (~13%)": (FieldCondition("year", "range", gte=1990, lt=2000),),
        "range price (123.45, 133.45] (1%)": (FieldCondition("price", "range", gt=123.45, lte=133.45),),
        "eq + range": (FieldCondition("lang", "eq", ("de",)), FieldCondition("year", "range", gte=2000)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        idx = TantivyLexicalIndex(Path(tmp) / "lex")
        t0 = time.perf_counter()
        for i in range(0, n, 5000):
            idx.apply(docs[i:i + 5000], [])
        build_s = time.perf_counter() - t0
        out: dict[str, Any] = {"docs": n, "queries": queries, "limit": 500, "build_seconds": round(build_s, 1),
                               "cases": {}}

        flts = {label: SearchFilter("t", ("c",), (PUBLIC_PRINCIPAL,),
                                    tuple(c for c in conds if isinstance(c, FieldCondition)))
                for label, conds in cases.items()}
        flts["ids allow-list (200 keys)"] = SearchFilter("t", ("c",), (PUBLIC_PRINCIPAL,), (), some)
        for q in qs[:10]:
            for flt in flts.values():
                idx.search(flt, q, 500)  # warm
        took: dict[str, list[float]] = {label: [] for label in flts}
        hits: Counter[str] = Counter()
        order = list(flts)
        for q in qs:  # cases interleaved per query: the machine's noise falls on all of them alike
            rng.shuffle(order)
            for label in order:
                t = time.perf_counter()
                hits[label] += len(idx.search(flts[label], q, 500))
                took[label].append((time.perf_counter() - t) * 1000)
        for label in flts:
            out["cases"][label] = {"p50_ms": report.percentile(took[label], 0.5),
                                   "p95_ms": report.percentile(took[label], 0.95),
                                   "mean_hits": round(hits[label] / len(qs), 1)}
        idx.close()
    base = out["cases"]["none"]["p50_ms"] or 1e-9
    for row in out["cases"].values():
        row["p50_vs_none"] = round(row["p50_ms"] / base, 2)
    print(out, flush=True)
    return out


def analysis_cost(data: Path, n: int, queries: int = 60) -> dict[str, Any]:
    """Build time and query time of the previous and the shipped analysis on the same synthetic
    corpus, stand-alone tantivy indexes (no filters), queries interleaved, limit 500."""
    global DEPTH
    sets = [load(data / name) for name in ("cranfield", "cisi")]
    docs = _synthetic(sets, n)
    ds = Dataset("synthetic", {d.key.doc_id: {"title": d.fields["title"], "text": d.fields["text"]} for d in docs},
                 {}, {})
    rng = random.Random(5)
    long_qs = rng.sample([q for s in sets for q in s.judged_queries().values()], queries)
    qs = {"long (the collections' queries)": long_qs, "short (their first 3 words)":
          [" ".join(q.split()[:3]) for q in long_qs]}
    out: dict[str, Any] = {"docs": n, "limit": 500}
    rankers: dict[str, Ranker] = {}
    depth, DEPTH = DEPTH, 500
    try:
        for label, cfg in (("previous", PREVIOUS), ("shipped", SHIPPED)):
            t0 = time.perf_counter()
            rankers[label] = variant(ds, **cfg)
            out[f"build_seconds_{label}"] = round(time.perf_counter() - t0, 1)
        for kind, texts in qs.items():
            took: dict[str, list[float]] = {k: [] for k in rankers}
            for q in texts[:10]:
                for r in rankers.values():
                    r(q)
            for q in texts:
                for k in rng.sample(list(rankers), len(rankers)):
                    t = time.perf_counter()
                    rankers[k](q)
                    took[k].append((time.perf_counter() - t) * 1000)
            out[kind] = {k: {"p50_ms": report.percentile(v, 0.5), "p95_ms": report.percentile(v, 0.95)}
                         for k, v in took.items()}
    finally:
        DEPTH = depth
    print(out, flush=True)
    return out


def _markdown(doc: dict[str, Any]) -> str:
    q = doc["quality"]
    parts = [f"# Lexical leg\n\nTuned on **{q['tuned_on']}** only; **{q['held_out']}** is held out. "
             "Same run, same text (title + body) for every row.\n"]
    for name, s in q["sets"].items():
        rows = [(k, v["nDCG@10"], v["recall@100"], v["MRR@10"]) for k, v in s.items()
                if isinstance(v, dict) and k != "ablation"]
        parts.append(f"## {name} ({s['docs']} docs, {s['queries']} queries)\n\n"
                     + report.table(["system", "nDCG@10", "recall@100", "MRR@10"], rows))
        if "ablation" in s:
            abl = [(k, v["nDCG@10"], v["recall@100"]) for k, v in s["ablation"].items()]
            parts.append(f"\nAblation on {name} (the tuning set):\n\n"
                         + report.table(["analysis", "nDCG@10", "recall@100"], abl))
    f = doc["filters"]
    timing = [(k, v["p50_ms"], v["p95_ms"], v["p50_vs_none"], v["mean_hits"]) for k, v in f["cases"].items()]
    parts.append(f"\n## Filters inside the query, tantivy, {f['docs']:,} docs (limit {f['limit']}, "
                 f"{f['queries']} queries, cases interleaved; index built in {f['build_seconds']} s)\n\n"
                 + report.table(["filter", "p50 ms", "p95 ms", "p50 / none", "mean hits"], timing))
    par = doc.get("parity")
    if par:
        prows = [(code, v["texts"], v["tokens"], v["differing_tokens"], v["differing_pct"], v["distinct"],
                 "; ".join(v["top"])) for code, v in par.items()]
        parts.append("\n## Analysis parity, OpenSearch against tantivy, token by token (real prose: the English "
                     "collections, the machine's gettext catalogs)\n\n"
                     + report.table(["language", "texts", "tokens", "differing", "%", "distinct",
                                     "most frequent (OpenSearch / tantivy)"], prows))
    m = doc.get("languages")
    if m:
        rows = [(name, v["alone"]["nDCG@10"], v["beside_french"]["nDCG@10"], v["french_docs"])
                for name, v in m["sets"].items()]
        parts.append(f"\n## Languages in one tenant: each set alone and beside a French collection about "
                     f"{m['times']}x its size (one tantivy index per language)\n\n"
                     + report.table(["set", "nDCG@10 alone", "beside French", "French docs"], rows))
    c = doc.get("cost")
    if c:
        cost: list[tuple[str, Any, Any]] = [("build seconds", c["build_seconds_previous"], c["build_seconds_shipped"])]
        cost += [(f"{kind} p50 / p95 ms", f"{v['previous']['p50_ms']} / {v['previous']['p95_ms']}",
                  f"{v['shipped']['p50_ms']} / {v['shipped']['p95_ms']}")
                 for kind, v in c.items() if isinstance(v, dict)]
        parts.append(f"\n## Cost of the analysis, {c['docs']:,} docs (stand-alone tantivy, limit {c['limit']})\n\n"
                     + report.table(["", "previous", "shipped"], cost))
    return "\n".join(parts)


def main(data: Path, docs: int, tuning: str = "cranfield", held_out: str = "cisi",
         opensearch: str | None = None) -> Path:
    with opensearch_url(opensearch) as url:
        measured = quality(data, tuning, held_out, url)
        parity = analysis_parity(url) if url else None
    doc = {"name": "lexical", "machine": harness.machine(), "quality": measured, "parity": parity,
           "filters": filters_at_scale(data, docs) if docs else None,
           "cost": analysis_cost(data, docs) if docs else None,
           "languages": mixed_languages(data, [tuning, held_out]),
           "analysis": {"token_pattern": analysis.TOKEN_PATTERN, "stopwords": len(analysis.STOPWORDS),
                        "boosts": analysis.FIELD_BOOSTS, "k1": analysis.K1, "b": analysis.B}}
    if doc["filters"] is None:
        doc["filters"] = {"docs": 0, "queries": 0, "limit": 0, "build_seconds": 0, "cases": {}}
    return report.write(doc, _markdown(doc))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--docs", type=int, default=100_000, help="synthetic corpus size for the filter timings (0: skip)")
    ap.add_argument("--opensearch", default=None,
                    help="also rank through the OpenSearch adapter: a server URL, or `auto` for a private dev node")
    args = ap.parse_args()
    main(args.data, args.docs, opensearch=args.opensearch)
