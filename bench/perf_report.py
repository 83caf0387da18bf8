"""bench/results/performance.md and its plots, from each benchmark's newest result.

    python -m bench perf-report

Reads `latency.json` (bench latency), `perf-throughput.json` (bench throughput), `perf-scale.json`
(bench scale), `peers-<dataset>+<distractors>.json` (bench peers --distractors), `lexical-legs.json`
(bench lexical-legs) and `long-docs.json` (bench.long_docs): the `<name>.json` each run overwrites
(bench/report.py), which the repository keeps. Every figure in the page is copied from them, with
the baseline measured in the same run. Plots: latency CDFs per strategy, throughput vs batch size,
memory and disk vs corpus size, the lexical legs side by side, long documents. Missing inputs are
said to be missing, not filled in; except that without a lexical-legs or long-docs result the page
keeps the section it already has.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.plots import _pyplot
from bench.report import RESULTS

STAMPED = re.compile(r"-\d{8}-\d{6}$")


def newest(name: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest result of the benchmark `name` (a glob for benchmarks named after their data, e.g.
    `peers-*+*`): its `<name>.json`; where the glob matches several, the most recently written.
    Without one (results written before runs kept a `<name>.json`), the newest timestamped file."""
    latest = [p for p in RESULTS.glob(f"{name}.json") if not STAMPED.search(p.stem)]
    if latest:
        path = max(latest, key=lambda p: p.stat().st_mtime)
    else:
        stamped = sorted((p for p in RESULTS.glob(f"{name}-*.json") if STAMPED.search(p.stem)),
                         key=lambda p: p.stem[-15:])  # by the YYYYmmdd-HHMMSS stamp
        if not stamped:
            return None
        path = stamped[-1]
    return path, json.loads(path.read_text())


def _load(xs: Any) -> str:
    return "/".join(f"{x:.1f}" for x in xs) if xs else "?"


def _cdf(ax: Any, xs: list[float], label: str, style: str = "-") -> None:
    s = sorted(xs)
    ax.plot(s, [(i + 1) / len(s) for i in range(len(s))], style, label=label)


def plot_latency(lat: dict[str, Any] | None, scale: dict[str, Any] | None) -> str | None:
    if lat is None and scale is None:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    if lat is not None:
        for name, r in lat["strategies"].items():
            if "samples" in r:
                _cdf(axes[0], r["samples"]["first_ms"], f"{name} first event")
                _cdf(axes[0], r["samples"]["warm_ms"], f"{name} warm JSON", "--")
        axes[0].set_title(f"{lat['docs']:,} docs, local model ({lat.get('runtime', 'torch')}), over HTTP")
    if scale is not None:
        last = scale["points"][-1]
        for name in ("keyword", "semantic", "hybrid", "auto"):
            _cdf(axes[1], last[name]["samples"], f"{name} first event")
        axes[1].set_title(f"{last['docs']:,} docs, hash embedder, over HTTP")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("ms (log)")
        ax.set_ylabel("fraction of queries")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS / "perf-latency-cdf.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_throughput(tp: dict[str, Any] | None) -> str | None:
    if tp is None:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, r in tp["runtimes"].items():
        ax.plot(tp["batches"], [r["docs_per_s"][str(b)] for b in tp["batches"]], "o-", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("documents / s (110 words)")
    ax.set_title("all-MiniLM-L6-v2 document throughput, same run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = RESULTS / "perf-throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_memory(scale: dict[str, Any] | None) -> str | None:
    if scale is None:
        return None
    plt = _pyplot()
    pts = scale["points"]
    docs = [p["docs"] for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(docs, [p["rss_mb"] for p in pts], "o-", label="server RSS")
    ax.plot(docs, [p["peak_rss_mb"] for p in pts], "o--", label="server peak RSS")
    for part in ("store", "lexical", "vectors"):
        ax.plot(docs, [p["disk_mb"][part] for p in pts], "s:", label=f"disk: {part}")
    ax.plot(docs, [p["disk_mb"]["total"] for p in pts], "s-", label="disk: total")
    ax.set_xlabel("documents")
    ax.set_ylabel("MB")
    ax.set_title("memory and disk vs corpus size (embedded profile)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = RESULTS / "perf-memory.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_lexical_legs(doc: dict[str, Any] | None) -> str | None:
    """Left: the keyword read's first event and complete answer per leg (CDFs, all rounds).
    Right: documents findable against time, each leg's chunk times summed (ack + until found)."""
    if doc is None:
        return None
    from bench.lexical_legs import ARMS

    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    colours = {"tantivy": "C0", "opensearch": "C3"}
    for arm in ARMS:
        rounds = doc["samples"]["rounds"]
        for measure, style, label in (("keyword_first_ms", "-", "first SSE event"),
                                      ("keyword_json_ms", "--", "complete answer (JSON)"),
                                      ("engine_ms", ":", "raw adapter query")):
            xs = sorted(x for r in rounds for x in r[measure][arm])
            axes[0].plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], style, color=colours[arm],
                         label=f"{arm}: {label}")
        t, n = [0.0], [0]
        for c in doc["samples"]["ingest"][arm]:
            t.append(t[-1] + c["ack_s"] + c["findable_s"])
            n.append(n[-1] + c["docs"])
        rate = doc["ingest"][arm]["searchable_docs_per_s"]
        axes[1].plot(t, n, "-", color=colours[arm], label=f"{arm}: {rate:,.0f} docs/s")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("ms (log)")
    axes[0].set_ylabel("fraction of queries")
    axes[0].set_title(f"keyword reads, {doc['docs']:,} docs, over HTTP ({doc['queries']} queries x {doc['rounds']})")
    axes[1].set_xlabel("seconds (sum of chunk times: bulk answered, then found by a read)")
    axes[1].set_ylabel("documents findable")
    axes[1].set_title(f"bulk ingest until searchable, chunks of {doc['chunk']}")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS / "perf-lexical-legs.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


LONG_DOCS_MARKS = ("<!-- long-docs -->", "<!-- /long-docs -->")


def plot_long_docs(doc: dict[str, Any] | None) -> str | None:
    """Semantic hit@3 by where the asked-for section sits in its document, per arm."""
    if doc is None:
        return None
    from bench.long_docs import BUCKETS

    plt = _pyplot()
    thirds = [b for b in BUCKETS if b.endswith("third")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.38
    for j, (arm, figures) in enumerate(doc["arms"].items()):
        xs = [i + (j - 0.5) * width for i in range(len(thirds))]
        ax.bar(xs, [figures["hit@3"][b] or 0 for b in thirds], width, label=arm)
    ax.set_xticks(range(len(thirds)), thirds)
    ax.set_ylim(0, 1)
    ax.set_ylabel("semantic hit@3")
    ax.set_title(f"a heading's document in the top 3, by where the section sits ({doc['queries']} queries)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = RESULTS / "perf-long-docs.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _kept_section(marks: tuple[str, str], title: str, command: str) -> str:
    """The report's section between `marks` as it stands, for a rebuild without the result file it
    was made from; a placeholder naming `command` when there is none."""
    start, end = marks
    old = (RESULTS / "performance.md").read_text() if (RESULTS / "performance.md").exists() else ""
    kept = re.search(re.escape(start) + ".*?" + re.escape(end), old, re.S)
    return (kept.group(0) + "\n") if kept else f"{start}\n## {title}\n\nNot measured yet (`{command}`).\n{end}\n"


def _long_docs_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    """Between markers, so a rebuild without its result file keeps it."""
    start, end = LONG_DOCS_MARKS
    if found is None:
        return _kept_section(LONG_DOCS_MARKS, "Long documents", "python -m bench.long_docs")
    from bench import report
    from bench.long_docs import BUCKETS

    path, doc = found
    plot = plot_long_docs(doc)
    rows = [[arm, *(a["hit@3"][b] for b in BUCKETS), a["embed_seconds"], a["passage_named_the_section"]]
            for arm, a in doc["arms"].items()]
    n = doc["arms"].get("passages", {}).get("queries", {})
    table = report.table(["arm", *(f"hit@3 {b}" for b in BUCKETS), "embed s", "passage = section"], rows)
    misses = [m for m in doc["arms"].get("passages", {}).get("misses", []) if m["where"] == "last third"]
    return (f"{start}\n## Long documents: found wherever the answer sits (`{path.name}`)\n\n![{plot}]({plot})\n\n"
            f"`python -m bench.long_docs`: {len(doc['docs'])} real Markdown documents (this repository's pages and the "
            "installed packages' descriptions, 3-60 KB), put through the REST API one per document and embedded with "
            f"all-MiniLM-L6-v2; {doc['queries']} queries, each a section heading no other document has (three words or "
            "more), answered with the semantic strategy. `head`: the section starts within the first 1,000 "
            f"characters (what one model window reads; {n.get('head')} queries), `deep` past them ({n.get('deep')}); "
            "thirds by the section's position. Arms differ only by `VIBE_PASSAGE_CHARS` (1000: passages; 100,000: one "
            "text per document, which the model cuts at its 256 word pieces). `passage = section`: of the hits that "
            "named a passage, those whose passage holds the asked-for heading.\n\n" + table + "\n"
            f"The last third's misses with passages ({len(misses)}) are closing sections with generic names: "
            + ", ".join(f"\"{m['query']}\"" for m in misses[:6]) + (" …" if len(misses) > 6 else "") + ".\n"
            + end + "\n")


LEXICAL_LEGS_MARKS = ("<!-- lexical-legs -->", "<!-- /lexical-legs -->")


def _lexical_legs_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    """Between markers, so a rebuild without its result file keeps it."""
    start, end = LEXICAL_LEGS_MARKS
    if found is None:
        return _kept_section(LEXICAL_LEGS_MARKS, "The lexical leg: OpenSearch against tantivy",
                             "python -m bench lexical-legs")
    from bench import report
    from bench.lexical_legs import ADAPTER_HEAD, INGEST_HEAD, READ_HEAD, adapter_rows, ingest_rows, read_rows

    path, doc = found
    r, i, a = doc["reads"], doc["ingest"], doc["adapter_ingest"]
    took = doc["opensearch_took"]
    load = doc["load_average"]

    def pair(m: str) -> str:
        t, o = r[m]["tantivy"], r[m]["opensearch"]
        spread = f"{t['round_p50_min']}–{t['round_p50_max']} vs {o['round_p50_min']}–{o['round_p50_max']}"
        return (f"{t['p50']} vs {o['p50']} ms p50, **{r[m]['ratio_of_p50s']}x** (per query "
                f"{r[m]['paired_ratio_p50']}x; round medians {spread})")

    deep, page = took["500"], took["10"]
    no_refresh, wait = a["opensearch no refresh"]["docs_per_s"], a["opensearch wait_for"]["docs_per_s"]
    return (f"{start}\n## The lexical leg: OpenSearch {doc['facts']['opensearch']['version']} against tantivy, "
            f"{doc['docs']:,} documents (`{path.name}`)\n\n"
            "![perf-lexical-legs.png](perf-lexical-legs.png)\n\n"
            "Two servers side by side in one run (`python -m bench lexical-legs`, commit "
            f"`{doc['commit']}`), both `vibe-semantic serve` over HTTP in the embedded profile (SQLite store, "
            "qdrant-edge, hash embedder) but for the lexical leg: the embedded tantivy index, or `VIBE_LEXICAL="
            "opensearch` on a private single-node OpenSearch (harness/opensearch_server.py, "
            f"{doc['opensearch_heap']} heap, serial GC, on the same 2 cores). Corpus: {doc['dataset']} "
            f"({doc['docs']:,} documents, half of them readable by the reader), Cranfield's {doc['queries']} real "
            f"questions, {doc['rounds']} rounds in fresh orders; per query both servers back to back, the one "
            "that goes first alternating. Medians (quartiles), p95, the spread of the per-round medians, and the "
            f"OpenSearch ÷ tantivy ratios. Load average {_load(load['before'])} → {_load(load['after'])}: other "
            "engineers' test runs shared the 2 cores, so the absolute figures are pessimistic for both legs; read "
            "the ratios.\n\n"
            f"- **First event of a keyword read**, back to back: {pair('keyword_first_ms')}; one query at a time: "
            f"{pair('keyword_alone_first_ms')}.\n"
            f"- **Complete keyword answer**, the stream's `done`: {pair('keyword_done_ms')}; as one JSON body: "
            f"{pair('keyword_json_ms')}.\n"
            f"- **Where a read's time goes**: the read path asks the leg for its top 500. OpenSearch's own `took` "
            f"for that query is {deep['took_ms']['p50']} ms p50 ({deep['client_ms']['p50']} ms at the client), "
            f"{page['took_ms']['p50']} ms for a top 10 ({page['client_ms']['p50']}); tantivy's whole top-500 query "
            f"in process is {r['engine_ms']['tantivy']['p50']} ms. `/healthz` is {r['healthz_ms']['tantivy']['p50']} "
            f"and {r['healthz_ms']['opensearch']['p50']} ms on the two servers.\n"
            f"- **Bulk ingest until a read finds the last document**: {i['tantivy']['searchable_docs_per_s']:,.0f} vs "
            f"{i['opensearch']['searchable_docs_per_s']:,.0f} docs/s, **{i['ratio_searchable']}x** (per chunk, "
            f"paired, {i['paired_chunk_rate_ratio_p50']}x). The OpenSearch server acknowledges at "
            f"{i['opensearch']['ack_docs_per_s']:,.0f} docs/s (it applies each bulk to the index before answering) "
            f"and a chunk was findable {i['opensearch']['chunk_findable_ms_p50']} ms (p50) after the answer. At the "
            f"adapter level ({a['docs']:,} documents, no HTTP, no store) OpenSearch takes "
            f"{wait:,.0f} docs/s as served (`refresh=wait_for`: each bulk request of up to 1,000 documents returns at "
            f"the next scheduled refresh, 1 s apart) and {no_refresh:,.0f} with `refresh=false` plus one refresh at "
            f"the end ({round(wait / no_refresh, 2)}x): "
            + ("most of the adapter's ingest time is that wait" if wait / no_refresh < 0.5 else
               f"the wait costs {1 - wait / no_refresh:.0%} of the rate")
            + f"; tantivy's adapter takes {a['tantivy']['docs_per_s']:,.0f} docs/s. (The adapter pass runs after the "
            "reads, at whatever load the machine then had: compare its arms with each other only.)\n\n"
            + report.table(READ_HEAD, read_rows(doc)) + "\n" + report.table(INGEST_HEAD, ingest_rows(doc)) + "\n"
            + report.table(ADAPTER_HEAD, adapter_rows(doc)) + f"{end}\n")


def _latency_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    if found is None:
        return "## Latency at 100k documents, local model\n\nNot measured yet (`python -m bench latency`).\n"
    path, lat = found
    b = lat["baselines"]
    rows = "\n".join(f"| {k} | {v['first_p50_ms']} | {v['first_p95_ms']} | {v.get('first_alone_p50_ms', '—')} | "
                     f"{v['first_ratio_to_trivial']} | "
                     f"{v.get('warm_p50_ms', '—')} | {v['done_p50_ms']} | {v['queued_per_query_mean']} |"
                     for k, v in lat["strategies"].items())
    load = lat.get("load_average", {})
    # Documents' throughput is the throughput section's (runtimes side by side at equal priority).
    enc = "; ".join(f"{k} {v['query_p50_ms']} ms p50" for k, v in lat.get("encoders", {}).items())
    return (f"## Latency at {lat['docs']:,} documents, local model (`{path.name}`)\n\n"
            f"Served over HTTP, runtime **{lat.get('runtime', 'torch')}**. Baselines in the same run: "
            f"`/healthz` round trip {b['trivial_p50_ms']} ms p50, the raw BM25 engine query "
            f"{b['engine_p50_ms']} ms p50; query encoder alone: {enc or 'not measured'}. Load average "
            f"{_load(load.get('before'))} → {_load(load.get('after'))}.\n\n"
            "*First event*: back to back, each stream closed at its first event (the previous query's tail "
            "runs beside the next one); *one at a time*: streams read to the end before the next query "
            "(recorded since `latency-20261124-080659`).\n\n"
            "| strategy | first event p50 ms | p95 | one at a time p50 | ÷ /healthz | warm JSON answer p50 | "
            "`done` p50 | queued/query |\n"
            "|---|---|---|---|---|---|---|---|\n" + rows + "\n")


def _peers_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    if found is None:
        return "## Against LanceDB at 100k documents\n\nNot measured yet (`bench peers --distractors`).\n"
    path, doc = found
    rows = []
    for name, sysres in doc["systems"].items():
        for mode, m in sysres["modes"].items():
            rows.append(f"| {name} | {mode} | {m['p50_ms']} | {m['p95_ms']} | {m['nDCG@10']} | {m['recall@100']} |")
    rtt = doc["systems"].get("vibe-semantic", {}).get("healthz_p50_ms")
    return (f"## Against LanceDB at {doc['docs']:,} documents (`{path.name}`)\n\n"
            f"{doc['dataset']}: the judged collection plus unjudged distractors drawn from its own words; "
            f"vectors: {doc['model']} (the same vectors for every system). vibe-semantic is served and measured "
            f"over HTTP (a `/healthz` round trip is {rtt} ms p50 here); the peers run in this process and are "
            "handed the query vectors, vibe-semantic's query-vector cache is warmed first. Top 100; per query the "
            f"median of 3 passes. Load average at the end {_load(doc.get('load_average'))}.\n\n"
            "| system | mode | p50 ms | p95 ms | nDCG@10 | recall@100 |\n"
            "|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def _throughput_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    if found is None:
        return "## The model's runtimes\n\nNot measured yet (`python -m bench throughput`).\n"
    path, tp = found
    head = "| runtime | query p50 ms | " + " | ".join(f"docs/s @{b}" for b in tp["batches"]) + " | min cosine |\n"
    sep = "|---" * (3 + len(tp["batches"])) + "|\n"
    rows = "\n".join(f"| {k} | {v['query_p50_ms']} | " + " | ".join(str(v["docs_per_s"][str(b)]) for b in tp["batches"])
                     + f" | {v['min_cosine_to_torch_fp32']} |" for k, v in tp["runtimes"].items())
    pipes = "\n".join(f"- served pipeline, document thread nice +{p['doc_nice']}: {p['pipeline_docs_per_s']} docs/s vs "
                      f"raw {p['runtime']} {p['raw_docs_per_s']} docs/s = **{p['ratio_to_raw']}x**"
                      for p in (tp["pipeline"] if isinstance(tp["pipeline"], list) else [tp["pipeline"]]))
    return (f"## The model's runtimes (`{path.name}`)\n\n" + head + sep + rows + "\n\n" + pipes
            + f"\n\nLoad average {_load(tp['load_average']['before'])} → {_load(tp['load_average']['after'])}.\n")


def _scale_section(found: tuple[Path, dict[str, Any]] | None) -> str:
    if found is None:
        return "## One million documents\n\nNot measured yet (`python -m bench scale`).\n"
    path, sc = found
    rows = "\n".join(
        f"| {p['docs']:,} | {p['ingest_ack_docs_per_s']} | {p['ingest_searchable_docs_per_s']} | "
        + " | ".join(f"{p[s]['first_p50_ms']}" for s in ("keyword", "semantic", "hybrid", "auto"))
        + f" | {p['trivial_p50_ms']} | {p['rss_mb']} | {p['peak_rss_mb']} | {p['disk_mb']['total']} |"
        for p in sc["points"])
    return (f"## Growing to {sc['docs']:,} documents (`{path.name}`)\n\n"
            "Embedded profile (SQLite + tantivy + qdrant-edge), hash embedder, bulk over HTTP. First-event p50 "
            f"in ms per strategy; RSS/disk in MB. Load average {_load(sc.get('load_average_before'))} → "
            f"{_load(sc['points'][-1].get('load_average'))}.\n\n"
            "| docs | ingest ack docs/s | searchable docs/s | keyword | semantic | hybrid | auto | /healthz | RSS | "
            "peak RSS | disk |\n|---|---|---|---|---|---|---|---|---|---|---|\n" + rows + "\n")


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "**missed**")


def _targets(lat: dict[str, Any] | None, peers: dict[str, Any] | None, tp: dict[str, Any] | None,
             sc: dict[str, Any] | None) -> str:
    """The performance targets next to what the newest runs measured (computed, never typed in)."""
    rows: list[tuple[str, str, bool | None]] = []
    if tp is not None:
        r = tp["runtimes"]
        onnx, torch = r.get("onnx 1 thread", {}), r.get("torch fp32", {})
        if onnx and torch:
            rows.append(("query embeds in ~1.6 ms (onnxruntime)", f"{onnx['query_p50_ms']} ms p50 (torch "
                         f"{torch['query_p50_ms']} ms, {round(torch['query_p50_ms'] / onnx['query_p50_ms'], 1)}x)",
                         onnx["query_p50_ms"] <= 2.0))
        for p in tp["pipeline"] if isinstance(tp["pipeline"], list) else [tp["pipeline"]]:
            rows.append((f"pipeline >= 0.8x the raw model (document thread nice +{p['doc_nice']})",
                         f"{p['ratio_to_raw']}x", p["ratio_to_raw"] >= 0.8))
    if lat is not None:
        onnx, torch = lat.get("encoders", {}).get("onnx"), lat.get("encoders", {}).get("torch")
        if onnx and torch:
            rows.append(("query embeds in ~1.6 ms (onnxruntime; latency run)", f"{onnx['query_p50_ms']} ms p50 "
                         f"(torch {torch['query_p50_ms']} ms)", onnx["query_p50_ms"] <= 2.0))
        for name, v in sorted(lat["strategies"].items()):
            rows.append((f"{lat['docs']:,} docs: first event p50 <= 10 ms ({name})", f"{v['first_p50_ms']} ms",
                         v["first_p50_ms"] <= 10))
            if "first_alone_p50_ms" in v:
                rows.append((f"... one query at a time ({name})", f"{v['first_alone_p50_ms']} ms",
                             v["first_alone_p50_ms"] <= 10))
    if peers is not None:
        ours = peers["systems"].get("vibe-semantic", {}).get("modes", {}).get("hybrid")
        lance = peers["systems"].get("LanceDB", {}).get("modes", {}).get("hybrid")
        if ours and lance:
            rows.append((f"{peers['docs']:,} docs: hybrid answer p50 below LanceDB's ({peers['model']})",
                         f"{ours['p50_ms']} vs {lance['p50_ms']} ms", ours["p50_ms"] < lance["p50_ms"]))
            rows.append(("... with nDCG@10 at least LanceDB's", f"{ours['nDCG@10']} vs {lance['nDCG@10']}",
                         ours["nDCG@10"] >= lance["nDCG@10"]))
    if sc is not None:
        last = sc["points"][-1]
        for name in ("keyword", "semantic", "hybrid", "auto"):
            p50 = last[name]["first_p50_ms"]
            rows.append((f"{last['docs']:,} docs: first event p50 <= 20 ms ({name})", f"{p50} ms", p50 <= 20))
        rows.append((f"{last['docs']:,} docs: bulk ingest >= 3,000 docs/s", f"{last['ingest_searchable_docs_per_s']} "
                     "docs/s to searchable", last["ingest_searchable_docs_per_s"] >= 3000))
    body = "\n".join(f"| {t} | {m} | {_verdict(ok)} |" for t, m, ok in rows)
    return ("## The performance targets against the newest runs\n\nOn 2 cores shared with other work (each section "
            "gives its run's load average) an absolute target can be missed for lack of CPU alone; the sections below "
            "give the same-run baselines.\n\n| target | measured | |\n|---|---|---|\n" + body + "\n")


def main() -> Path:
    lat, tp, sc = newest("latency"), newest("perf-throughput"), newest("perf-scale")
    peers, legs = newest("peers-*+*"), newest("lexical-legs")
    legs_section = _lexical_legs_section(legs)  # before the page is rewritten: it may keep the old one
    long_docs_section = _long_docs_section(newest("long-docs"))
    from bench.global_read import MARKS as GLOBAL_MARKS
    from bench.global_read import section as global_section
    global_read_section = global_section(newest("global-read")) or _kept_section(
        GLOBAL_MARKS, "Global reads", "python -m bench global-read")
    plots = [p for p in (plot_latency(lat[1] if lat else None, sc[1] if sc else None),
                         plot_throughput(tp[1] if tp else None), plot_memory(sc[1] if sc else None)) if p]
    plot_lexical_legs(legs[1] if legs else None)  # shown inside its section
    page = ("# Performance\n\nGenerated by `python -m bench perf-report` from the result files named in each "
            "section; every figure is measured on this machine (2 cores shared with other work: read the ratios to "
            "the same-run baselines before the absolute numbers).\n\n"
            + "".join(f"![{p}]({p})\n\n" for p in plots)
            + _targets(lat[1] if lat else None, peers[1] if peers else None, tp[1] if tp else None,
                       sc[1] if sc else None) + "\n"
            + "\n".join([_latency_section(lat), _peers_section(peers), _throughput_section(tp), _scale_section(sc),
                         legs_section, long_docs_section, global_read_section]))
    out = RESULTS / "performance.md"
    out.write_text(page)
    print(page)
    return out
