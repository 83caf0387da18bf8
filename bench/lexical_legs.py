"""The lexical leg on OpenSearch against tantivy, both served, in one run.

    python -m bench lexical-legs --docs 100000 --rounds 3     # the report's run
    python -m bench lexical-legs --quick                      # < 2 minutes: 10k docs, 2 rounds

Two `vibe-semantic serve` processes (uvicorn on a socket, embedded profile: SQLite store,
qdrant-edge, in-process queue, hash embedder), identical but for the lexical leg: one with the
embedded tantivy index, one with `VIBE_LEXICAL=opensearch` + `VIBE_OPENSEARCH_URL` on a private
single-node OpenSearch 2.19 started by this benchmark (harness/opensearch_server.py, the
node the contract suite uses). Everything is measured through the HTTP API, as a user sees it.

Corpus: Cranfield (../shared/data, bench/datasets.py) scaled up to `--docs` with unjudged
distractors drawn from its own words (bench/peers.py `with_distractors`), each document readable
by one of two groups (the ACL filter is inside every engine query); queries: Cranfield's 225 real
questions (about nine words, heavier for BM25 than the two-word synthetic queries of bench scale).

Ingest: bulks of `--chunk` documents, request bodies encoded before the clock starts. The last
document of every chunk carries a unique marker word; after each bulk is acknowledged the
benchmark asks a keyword read for that word until it finds the document, so a chunk's time is
"sent -> answered -> findable" and `documents / sum of chunk times` is the rate until a query finds
the last one. The chunks alternate which server goes first, so the load of the machine (2 cores
shared with other work) falls on both alike; each chunk is a paired sample.

Reads, in `--rounds` rounds (each a fresh order of the queries), per query both servers in
alternating order, one pass per kind: the first SSE event of a keyword and of a hybrid read
(stream closed at that event, next query at once: bench latency's back-to-back figure); a keyword
stream read to its `done` event, the next query after it (its first event "one at a time", and
`done`, the complete answer); the complete keyword answer as one JSON body. Same-run baselines:
`/healthz` round trip per server and the raw adapter query (the same filtered BM25 top 500 in this
process: TantivyLexicalIndex on the server's index, OpenSearchLexicalIndex on the node). Medians,
quartiles and p95 over all samples; the spread of the per-round medians; the OpenSearch/tantivy
ratio of medians and the median of the per-query ratios.

The timing client does not check answers against /openapi.json (harness/server.py does by
default): that check's jsonschema validation would sit inside the clock. Results go to
bench/results/lexical-legs.json (a `--quick` run to lexical-legs-quick.json, so a smoke run never
replaces the report's input) and timestamped raw files; `python -m bench perf-report` turns
lexical-legs.json into a section of bench/results/performance.md with a plot.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from bench import report
from bench.datasets import load
from bench.harness import machine
from bench.latency import timed_stream
from bench.peers import with_distractors
from bench.scale import ENV
from bench.spine import first_event_ms
from harness.opensearch_server import OpenSearchNode, get_json
from harness.server import KEYS, REPO, Served, served
from shared.ports import LexicalIndex, SearchFilter

ARMS = ("tantivy", "opensearch")
READER = "k-alice"  # principals user:alice, group:eng: half of the corpus is readable
COLLECTION = "syn"  # bench.spine.first_event_ms reads this collection
FILTER = SearchFilter("ta", (COLLECTION,), ("*", "user:alice", "group:eng"))  # what the server asks for k-alice
CANDIDATES = 500  # Settings.lexical_candidates: the BM25 depth the read path asks the leg for
DATA = REPO.parent / "shared" / "data" / "cranfield"
QUICK = {"docs": 10_000, "rounds": 2, "queries": 20}


def corpus(n: int, data: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """`n` documents (the judged collection first, then distractors) and the collection's queries."""
    base = load(data)
    ds = with_distractors(base, max(0, n - len(base.corpus)))
    rng = random.Random(17)
    docs = [{"_id": doc_id, "title": d["title"], "text": d["text"], "_acl": [rng.choice(["group:eng", "group:sales"])]}
            for doc_id, d in list(ds.corpus.items())[:n]]
    return docs, list(ds.queries.values())


def marker(chunk: int) -> str:
    # Letters then digits: one token for both analyzers, and no English stemmer rule ends in a digit.
    return f"vbmark{chunk:05d}"


def bodies(docs: list[dict[str, Any]], chunk: int) -> list[tuple[bytes, str, str, int]]:
    """(request body, marker word, marked document id, documents) per chunk; the marked document
    is the chunk's last and readable by the READER, so finding it means the whole chunk is in."""
    out = []
    for i, start in enumerate(range(0, len(docs), chunk)):
        part = [dict(d) for d in docs[start:start + chunk]]
        last = part[-1]
        last["title"] = f"{last['title']} {marker(i)}"
        last["_acl"] = ["group:eng"]
        out.append((orjson.dumps({"docs": part}), marker(i), str(last["_id"]), len(part)))
    return out


def findable_s(s: Served, word: str, doc_id: str, timeout: float = 300) -> float:
    """Seconds until a keyword read for `word` returns `doc_id` (polled every 10 ms)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        r = s.read(READER, collection=COLLECTION, q=word, limit=1, semantic={"strategy": "keyword"})
        r.raise_for_status()
        if [x["id"] for x in r.json()["results"]] == [doc_id]:
            return time.perf_counter() - t0
        time.sleep(0.01)
    raise TimeoutError(f"{doc_id} not findable by {word!r} after {timeout} s")


def send(s: Served, body: bytes) -> float:
    t0 = time.perf_counter()
    r = s.call("POST", f"/v1/collections/{COLLECTION}/docs:bulk", "k-admin-a", content=body,
               headers={"Content-Type": "application/json"})
    took = time.perf_counter() - t0
    if r.status_code != 200 or r.json()["rejected"]:
        raise RuntimeError(f"bulk failed: {r.status_code} {r.text[:300]}")
    return took


def ingest(servers: dict[str, Served], chunks: list[tuple[bytes, str, str, int]]) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {a: [] for a in servers}
    for i, (body, word, doc_id, n) in enumerate(chunks):
        for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
            ack = send(servers[arm], body)
            found = findable_s(servers[arm], word, doc_id)
            out[arm].append({"docs": n, "ack_s": round(ack, 4), "findable_s": round(found, 4)})
        if (i + 1) % 10 == 0 or i + 1 == len(chunks):
            done = sum(c["docs"] for c in out[ARMS[0]])
            rates = (f"{a} {done / sum(c['ack_s'] + c['findable_s'] for c in out[a]):,.0f} docs/s" for a in ARMS)
            print(f"ingested {done:,}: " + ", ".join(rates), flush=True)
    return out


def json_answer_ms(s: Served, q: str) -> float:
    """The complete keyword answer: one `application/json` body, read to its end."""
    t0 = time.perf_counter()
    r = s.read(READER, collection=COLLECTION, q=q, limit=10, semantic={"strategy": "keyword"})
    r.raise_for_status()
    return (time.perf_counter() - t0) * 1000


def healthz_ms(s: Served) -> float:
    t0 = time.perf_counter()
    s.client.get("/healthz").raise_for_status()
    return (time.perf_counter() - t0) * 1000


def engines(data_dirs: dict[str, Path], url: str) -> dict[str, Callable[[str], object]]:
    """The raw adapter query of each arm, in this process (no HTTP, no read path around it)."""
    from opensearchpy import OpenSearch

    from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex
    from shared.adapters.tantivy_lexical import TantivyLexicalIndex

    tan = TantivyLexicalIndex(data_dirs["tantivy"] / "lexical")
    osx = OpenSearchLexicalIndex(OpenSearch(hosts=[url], timeout=30))
    return {"tantivy": lambda q: tan.search(FILTER, q, CANDIDATES),
            "opensearch": lambda q: osx.search(FILTER, q, CANDIDATES)}


def _timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


MEASURES = ("keyword_first_ms", "keyword_alone_first_ms", "keyword_done_ms", "keyword_json_ms", "hybrid_first_ms",
            "engine_ms", "healthz_ms")


def _stream(s: Served, q: str) -> dict[str, float]:
    """A keyword stream read to its `done`, the next query after it (bench latency's "alone")."""
    t = timed_stream(s, q, "keyword")
    return {"keyword_alone_first_ms": t["first_ms"], "keyword_done_ms": t["done_ms"]}


def reads(servers: dict[str, Served], raw: dict[str, Callable[[str], object]], queries: list[str],
          rounds: int) -> list[dict[str, Any]]:
    """Per round and measure, {arm: samples in query order}: both arms answer the same query back
    to back, the arm that goes first alternating by query and by round. One pass per row of
    `passes`, each over every query, so a pass's requests follow only their own kind."""
    passes: list[Callable[[str, str], dict[str, float]]] = [
        # Back to back, each stream closed at its first event: the previous query's tail (its
        # touch and the rest of its stream) runs beside the next query, as in bench latency.
        lambda arm, q: {"keyword_first_ms": first_event_ms(servers[arm], q, "keyword")},
        lambda arm, q: _stream(servers[arm], q),
        lambda arm, q: {"keyword_json_ms": json_answer_ms(servers[arm], q)},
        lambda arm, q: {"hybrid_first_ms": first_event_ms(servers[arm], q, "hybrid")},
        lambda arm, q: {"engine_ms": _timed(lambda: raw[arm](q))},
        lambda arm, q: {"healthz_ms": healthz_ms(servers[arm])},
    ]
    out = []
    for r in range(rounds):
        order = queries[:]
        random.Random(100 + r).shuffle(order)
        res: dict[str, Any] = {"load_before": os.getloadavg()}
        for run in passes:
            for j, q in enumerate(order):
                for arm in ARMS if (j + r) % 2 == 0 else ARMS[::-1]:
                    for measure, ms in run(arm, q).items():
                        res.setdefault(measure, {a: [] for a in ARMS})[arm].append(round(ms, 3))
        res["load_after"] = os.getloadavg()
        print(f"round {r + 1}/{rounds}: " + "; ".join(
            f"{m} " + "/".join(f"{statistics.median(res[m][a]):.2f}" for a in ARMS) for m in MEASURES), flush=True)
        out.append(res)
    return out


def summary(xs: list[float]) -> dict[str, float]:
    return {"p25": report.percentile(xs, 0.25), "p50": round(statistics.median(xs), 3),
            "p75": report.percentile(xs, 0.75), "p95": report.percentile(xs, 0.95), "n": len(xs)}


def summarise_reads(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in MEASURES:
        per: dict[str, Any] = {}
        for arm in ARMS:
            xs = [x for r in rounds for x in r[m][arm]]
            meds = [round(statistics.median(r[m][arm]), 3) for r in rounds]
            per[arm] = summary(xs) | {"round_p50s": meds, "round_p50_min": min(meds), "round_p50_max": max(meds)}
        pairs = [o / t for r in rounds for o, t in zip(r[m]["opensearch"], r[m]["tantivy"], strict=True) if t > 0]
        per["ratio_of_p50s"] = round(per["opensearch"]["p50"] / per["tantivy"]["p50"], 2)
        per["paired_ratio_p50"] = round(statistics.median(pairs), 2)
        per["paired_ratio_p25"], per["paired_ratio_p75"] = (round(report.percentile(pairs, p), 2) for p in (0.25, 0.75))
        out[m] = per
    return out


def summarise_ingest(chunks: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm, cs in chunks.items():
        docs = sum(c["docs"] for c in cs)
        ack, find = sum(c["ack_s"] for c in cs), sum(c["findable_s"] for c in cs)
        rates = [c["docs"] / (c["ack_s"] + c["findable_s"]) for c in cs]
        out[arm] = {"docs": docs, "ack_docs_per_s": round(docs / ack, 1),
                    "searchable_docs_per_s": round(docs / (ack + find), 1), "findable_s_total": round(find, 2),
                    "chunk_docs_per_s": {k: round(v, 1) for k, v in summary(rates).items()},
                    "chunk_findable_ms_p50": round(statistics.median(c["findable_s"] for c in cs) * 1000, 1)}
    # Per chunk (same documents, back to back): tantivy's time / OpenSearch's, i.e. OpenSearch's rate
    # as a share of tantivy's.
    pairs = [(t["ack_s"] + t["findable_s"]) / (o["ack_s"] + o["findable_s"])
             for o, t in zip(chunks["opensearch"], chunks["tantivy"], strict=True)]
    rate = {a: out[a]["searchable_docs_per_s"] for a in ARMS}
    out["ratio_searchable"] = round(rate["opensearch"] / rate["tantivy"], 2)
    out["paired_chunk_rate_ratio_p50"] = round(statistics.median(pairs), 2)
    return out


def opensearch_took(url: str, queries: list[str]) -> dict[str, Any]:
    """Where a raw OpenSearch query's time goes: the node's own `took` (query + fetch phases) and
    the client's time, for the read path's depth (500: the top 500 ids with their key doc values)
    and for a page (10), per query alternating which goes first."""
    from opensearchpy import OpenSearch

    from shared.adapters.opensearch_lexical import index_name, search_body

    client = OpenSearch(hosts=[url], timeout=30)
    index = index_name(FILTER.tenant)
    out: dict[str, dict[str, list[float]]] = {str(n): {"took_ms": [], "client_ms": []} for n in (CANDIDATES, 10)}
    for j, q in enumerate(queries):
        for n in (CANDIDATES, 10) if j % 2 == 0 else (10, CANDIDATES):
            t0 = time.perf_counter()
            resp = client.search(index=index, body=search_body(FILTER, q, n), routing=FILTER.tenant)
            out[str(n)]["client_ms"].append((time.perf_counter() - t0) * 1000)
            out[str(n)]["took_ms"].append(float(resp["took"]))
    client.close()
    return {n: {k: summary(v) for k, v in m.items()} for n, m in out.items()}


ADAPTER_ARMS = ("tantivy", "opensearch wait_for", "opensearch no refresh")


def adapter_ingest(docs: list[dict[str, Any]], chunk: int, chunks: int, url: str, root: Path) -> dict[str, Any]:
    """Where the served ingest's time goes, at the adapter level: the same chunks applied in this
    process (no HTTP, no store) to tantivy, to OpenSearch as the server does (`refresh=wait_for`:
    each bulk request returns after the next scheduled refresh, 1 s apart) and to OpenSearch with
    `refresh=false` plus one explicit refresh at the end (searchable only then). Arms alternate
    per chunk; each on its own index."""
    from opensearchpy import OpenSearch

    from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex
    from shared.adapters.tantivy_lexical import TantivyLexicalIndex
    from shared.model import DocKey, StoredDoc

    client = OpenSearch(hosts=[url], timeout=60)
    legs: dict[str, LexicalIndex] = {"tantivy": TantivyLexicalIndex(root / "adapter-tantivy"),
            "opensearch wait_for": OpenSearchLexicalIndex(client, prefix="bench-wait-", refresh="wait_for"),
            "opensearch no refresh": OpenSearchLexicalIndex(client, prefix="bench-norefresh-", refresh="false")}
    took: dict[str, list[float]] = {a: [] for a in ADAPTER_ARMS}
    for i, start in enumerate(range(0, min(len(docs), chunk * chunks), chunk)):
        part = [StoredDoc(DocKey("ta", COLLECTION, str(d["_id"])), {"title": d["title"], "text": d["text"]},
                          list(d["_acl"]), None, str(d["_id"]), 0.0) for d in docs[start:start + chunk]]
        for arm in ADAPTER_ARMS if i % 2 == 0 else ADAPTER_ARMS[::-1]:
            t0 = time.perf_counter()
            legs[arm].apply(part, [])
            took[arm].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    client.indices.refresh(index="bench-norefresh-*")
    final_refresh = time.perf_counter() - t0
    n = min(len(docs), chunk * chunks)
    out: dict[str, Any] = {"docs": n, "chunk": chunk, "final_refresh_s": round(final_refresh, 3)}
    for arm in ADAPTER_ARMS:
        total = sum(took[arm]) + (final_refresh if arm == "opensearch no refresh" else 0.0)
        out[arm] = {"docs_per_s": round(n / total, 1), "chunk_s": summary(took[arm]),
                    "samples_s": [round(x, 4) for x in took[arm]]}
    for leg in legs.values():
        leg.close()
    return out


def _commit() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def _opensearch_facts(url: str) -> dict[str, Any]:
    info: dict[str, Any] = get_json(url)
    stats: dict[str, Any] = get_json(f"{url}/_stats/docs,store")["_all"]["primaries"]  # type: ignore[index]
    return {"version": info["version"]["number"],
            "docs": stats["docs"]["count"], "store_mb": round(stats["store"]["size_in_bytes"] / 1e6, 1)}


def _tantivy_mb(data_dir: Path) -> float:
    return round(sum(p.stat().st_size for p in (data_dir / "lexical").rglob("*") if p.is_file()) / 1e6, 1)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(docs: int, rounds: int, queries: int = 0, chunk: int = 2000, data: Path = DATA, heap: str = "1g",
         quick: bool = False, adapter_chunks: int = 10) -> Path:
    if quick:
        docs, rounds, queries, adapter_chunks = QUICK["docs"], QUICK["rounds"], QUICK["queries"], 2
    started = time.perf_counter()
    # `kill` ends the run like Ctrl-C, through the finally blocks: the node and both servers run in
    # sessions of their own and would outlive a plain SIGTERM (a background job ignores SIGINT).
    signal.signal(signal.SIGTERM, _interrupt)
    all_docs, qs = corpus(docs, data)
    qs = qs[:queries] if queries else qs
    print(f"encoding {len(all_docs):,} documents' request bodies (not timed)", flush=True)
    chunks = bodies(all_docs, chunk)
    root = Path(tempfile.mkdtemp(prefix="vibe-lexical-legs-"))
    load0 = os.getloadavg()
    try:
        with ExitStack() as stack:
            node = OpenSearchNode(root / "opensearch", 0, heap).start()
            stack.callback(node.stop)
            envs = {"tantivy": {**ENV, "VIBE_LEXICAL": "embedded"},
                    "opensearch": {**ENV, "VIBE_LEXICAL": "opensearch", "VIBE_OPENSEARCH_URL": node.url}}
            servers = {a: stack.enter_context(served(root / a / "data", env=envs[a], keys=KEYS, validate=False))
                       for a in ARMS}
            ingested = ingest(servers, chunks)
            facts = {"opensearch": _opensearch_facts(node.url),
                     "tantivy_index_mb": _tantivy_mb(root / "tantivy" / "data")}
            raw = engines({a: root / a / "data" for a in ARMS}, node.url)
            # Warm-up, not measured: every query once per arm (connections, page cache, and the JIT of
            # the node: its first pass over the quick run's queries was ~2x slower than the second).
            for q in qs:
                for arm in ARMS:
                    json_answer_ms(servers[arm], q)
                    raw[arm](q)
            measured = reads(servers, raw, qs, rounds)
            took = opensearch_took(node.url, qs)
            print("OpenSearch took p50 ms (top 500 / top 10):", took[str(CANDIDATES)]["took_ms"]["p50"],
                  took["10"]["took_ms"]["p50"], flush=True)
            adapter = adapter_ingest(all_docs, chunk, adapter_chunks, node.url, root)
            print("adapter ingest:", {a: adapter[a]["docs_per_s"] for a in ADAPTER_ARMS}, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {"name": "lexical-legs-quick" if quick else "lexical-legs", "machine": machine(), "commit": _commit(),
           "docs": len(all_docs),
           "dataset": f"{data.name} + distractors", "queries": len(qs), "rounds": rounds, "chunk": chunk,
           "quick": quick, "env": ENV, "opensearch_heap": heap, "facts": facts,
           "ingest": summarise_ingest(ingested), "reads": summarise_reads(measured), "adapter_ingest": adapter,
           "opensearch_took": took,
           "load_average": {"before": load0, "after": os.getloadavg()},
           "seconds": round(time.perf_counter() - started, 1),
           "samples": {"ingest": ingested, "rounds": measured}}
    return report.write(doc, markdown(doc))


LABELS = {"keyword_first_ms": "keyword: first SSE event, back to back",
          "keyword_alone_first_ms": "keyword: first SSE event, one at a time",
          "keyword_done_ms": "keyword: `done` event (complete answer, SSE)",
          "keyword_json_ms": "keyword: complete answer as JSON",
          "hybrid_first_ms": "hybrid: first SSE event, back to back",
          "engine_ms": "raw adapter query (top 500, in process)", "healthz_ms": "`/healthz` round trip"}


def read_rows(doc: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for m in MEASURES:
        r = doc["reads"][m]
        t, o = r["tantivy"], r["opensearch"]
        rows.append([LABELS[m], f"{t['p50']} ({t['p25']}–{t['p75']})", t["p95"],
                     f"{t['round_p50_min']}–{t['round_p50_max']}", f"{o['p50']} ({o['p25']}–{o['p75']})", o["p95"],
                     f"{o['round_p50_min']}–{o['round_p50_max']}", f"**{r['ratio_of_p50s']}**",
                     f"{r['paired_ratio_p50']} ({r['paired_ratio_p25']}–{r['paired_ratio_p75']})"])
    return rows


READ_HEAD = ["ms", "tantivy p50 (p25–p75)", "p95", "round p50s", "OpenSearch p50 (p25–p75)", "p95", "round p50s",
             "OpenSearch ÷ tantivy (p50s)", "per-query ratio p50 (p25–p75)"]
INGEST_HEAD = ["lexical leg", "acknowledged docs/s", "until the last is found, docs/s",
               "per-chunk docs/s p50 (p25–p75)", "ack → findable per chunk, ms p50", "index size MB"]


def ingest_rows(doc: dict[str, Any]) -> list[list[Any]]:
    size = {"tantivy": doc["facts"]["tantivy_index_mb"], "opensearch": doc["facts"]["opensearch"]["store_mb"]}
    rows = []
    for arm in ARMS:
        g = doc["ingest"][arm]
        c = g["chunk_docs_per_s"]
        rows.append([arm, g["ack_docs_per_s"], g["searchable_docs_per_s"], f"{c['p50']} ({c['p25']}–{c['p75']})",
                     g["chunk_findable_ms_p50"], size[arm]])
    return rows


ADAPTER_HEAD = ["adapter, in process", "docs/s (until searchable)", "per chunk s p50 (p25–p75)"]


def adapter_rows(doc: dict[str, Any]) -> list[list[Any]]:
    a = doc["adapter_ingest"]
    end = f" + one refresh at the end ({a['final_refresh_s']} s)"
    return [[arm + (end if arm == "opensearch no refresh" else ""), a[arm]["docs_per_s"],
             f"{a[arm]['chunk_s']['p50']} ({a[arm]['chunk_s']['p25']}–{a[arm]['chunk_s']['p75']})"]
            for arm in ADAPTER_ARMS]


def markdown(doc: dict[str, Any]) -> str:
    i = doc["ingest"]
    load = doc["load_average"]
    version = doc["facts"]["opensearch"]["version"]
    return (f"# Lexical leg: OpenSearch {version} against tantivy, {doc['docs']:,} documents\n\n"
            f"Both served over HTTP (embedded profile, hash embedder), commit `{doc['commit']}`; {doc['dataset']}, "
            f"{doc['queries']} queries × {doc['rounds']} rounds, both servers per query in alternating order. "
            f"Load average {load['before']} → {load['after']}.\n\n" + report.table(READ_HEAD, read_rows(doc))
            + f"\nIngest, bulks of {doc['chunk']}, chunks alternating which server goes first; OpenSearch ÷ tantivy "
              f"until the last is found: **{i['ratio_searchable']}**, per chunk (paired) "
              f"{i['paired_chunk_rate_ratio_p50']}.\n\n"
            + report.table(INGEST_HEAD, ingest_rows(doc))
            + f"\nThe same first {doc['adapter_ingest']['docs']:,} documents applied by the adapters alone, chunks "
              "alternating:\n\n" + report.table(ADAPTER_HEAD, adapter_rows(doc))
            + "\nThe raw OpenSearch query, the node's own `took` against the client's time (p50 ms): "
            + "; ".join(f"top {n}: took {v['took_ms']['p50']}, client {v['client_ms']['p50']}"
                        for n, v in doc["opensearch_took"].items()) + ".\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=0, help="first N of the collection's queries (0: all)")
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--heap", default="1g", help="the OpenSearch node's JVM heap")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK['docs']:,} documents, {QUICK['rounds']} rounds, "
                                                         f"{QUICK['queries']} queries: under 2 minutes")
    a = ap.parse_args()
    print(main(a.docs, a.rounds, a.queries, a.chunk, a.data, a.heap, a.quick))
