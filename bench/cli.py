"""The benchmarks' command line: `python -m bench <command> ...` from the repository root.

Each command runs one maintained benchmark (its module in bench/ does the work and writes its
results to bench/results/, see bench/report.py). The other modules in bench/ that have a `main`
run on their own: `python -m bench.<module> --help`. The product's `vibe-semantic` command does
not import bench/; benchmarks drive the product through its HTTP API or its Python packages."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Benchmarks of vibe-semantic (results in bench/results/).", no_args_is_help=True,
                  add_completion=False)


def _data_dir(data_dir: Path | None, name: str) -> Path:
    import tempfile

    return data_dir or Path(tempfile.mkdtemp(prefix=f"vibe-bench-{name}-")) / "data"


@app.command("quality")
def bench_quality(
    data: Path = typer.Option(..., "--data", exists=True, file_okay=False, help="a BEIR-layout folder"),
    data_dir: Path = typer.Option(None, "--data-dir", help="instance data dir (default: a fresh temp dir)"),
    embedder: str = typer.Option("local", "--embedder", help="local|hash"),
) -> None:
    """Eager quality: embed everything, then nDCG@10 / recall@100 / MRR@10 per strategy."""
    from bench.quality import main

    main(data, _data_dir(data_dir, "quality"), embedder)


@app.command("global-read")
def bench_global_read(
    data: list[Path] = typer.Option(..., "--data", exists=True, file_okay=False,
                                    help="BEIR-layout folders, each its own collection of one tenant (repeat)"),
    data_dir: Path = typer.Option(None, "--data-dir", help="instance data dir (default: a fresh temp dir)"),
    embedder: str = typer.Option("local", "--embedder", help="local|hash"),
    strategies: str = typer.Option("keyword,hybrid", "--strategies", help="comma-separated"),
    split: int = typer.Option(16, "--split", min=0, help="then each dataset also as this many collections "
                                                           "(latency at many legs; 0: skip)"),
) -> None:
    """Global reads: latency against a single-collection read, quality mixed against each collection alone."""
    from bench.global_read import main

    main(data, _data_dir(data_dir, "global-read"), embedder, [x for x in strategies.split(",") if x], split)


@app.command("rerank")
def bench_rerank(
    data: Path = typer.Option(..., "--data", exists=True, file_okay=False, help="a BEIR-layout folder"),
    url: str = typer.Option(None, "--url", help="a Cohere/TEI-compatible /rerank endpoint"),
    model: str = typer.Option(None, "--model"),
    protocol: str = typer.Option("cohere", "--protocol", help="cohere|tei"),
    embedder: str = typer.Option("hash", "--embedder", help="local|hash"),
    strategy: str = typer.Option("hybrid", "--strategy", help="keyword|hybrid|semantic"),
    candidates: int = typer.Option(50, "--candidates", help="top candidates sent to the reranker"),
    stand_in: bool = typer.Option(False, "--stand-in", help="the test stand-in (word overlap): a smoke run only"),
    data_dir: Path = typer.Option(None, "--data-dir", help="instance data dir (default: a fresh temp dir)"),
) -> None:
    """The reranker's effect: the same candidates' nDCG@10 / recall@100 / MRR@10 with and without it."""
    from bench.rerank import main

    main(data, _data_dir(data_dir, "rerank"), url, model, protocol, embedder, strategy, candidates, stand_in)


@app.command("lazy")
def bench_lazy(
    data: Path = typer.Option(..., "--data", exists=True, file_okay=False, help="a BEIR-layout folder"),
    seeds: str = typer.Option("1,2,3", "--seeds", help="stream seeds, comma-separated"),
    length: int = typer.Option(500, "--length", min=10, help="queries in each stream"),
    settings: str = typer.Option("", "--settings", help="planner settings to compare (default: all)"),
    queries: int | None = typer.Option(None, "--queries", min=1,
                                       help="draw the stream from a fixed sample of this many distinct queries"),
) -> None:
    """Lazy economics: embedded fraction and quality vs eager over a Zipfian query stream."""
    from bench.lazy import SETTINGS, main

    chosen = [x for x in settings.split(",") if x] or list(SETTINGS)
    main(data, [int(x) for x in seeds.split(",")], length, chosen, queries)


@app.command("peers")
def bench_peers(
    data: Path = typer.Option(..., "--data", exists=True, file_okay=False, help="a BEIR-layout folder"),
    distractors: int = typer.Option(0, "--distractors", min=0, help="unjudged documents added (scale)"),
    vectors: str = typer.Option("model", "--vectors", help="model (all-MiniLM-L6-v2) | hash (cheap at scale)"),
    peers: str = typer.Option("", "--peers", help="comma-separated peer names (default: all)"),
) -> None:
    """Peers side by side (LanceDB, Chroma, qdrant-client local, bm25s) on the same data and vectors."""
    from bench.peers import main

    main(data, distractors, vectors, [p.strip() for p in peers.split(",") if p.strip()] or None)


@app.command("latency")
def bench_latency(
    docs: int = typer.Option(100_000, "--docs", min=100),
    queries: int = typer.Option(200, "--queries", min=10),
    runtime: str = typer.Option("auto", "--runtime", help="the local model's runtime: auto|onnx|torch"),
) -> None:
    """First-event and `done` latency over HTTP per strategy at N synthetic docs, as ratios to baselines."""
    from bench.latency import main

    main(docs, queries, runtime)


@app.command("scale")
def bench_scale(
    docs: int = typer.Option(1_000_000, "--docs", min=1000),
    queries: int = typer.Option(60, "--queries", min=5, help="per strategy and checkpoint"),
    chunk: int = typer.Option(2000, "--chunk", min=100, max=5000, help="documents per bulk request"),
) -> None:
    """One embedded instance grown to N documents: ingest rate, first events, RSS and disk per checkpoint."""
    from bench.scale import main

    main(docs, queries, chunk)


@app.command("admin-views")
def bench_admin_views(
    docs: int = typer.Option(1_000_000, "--docs", min=1000, help="the largest size (10k and 100k below it too)"),
    repeats: int = typer.Option(5, "--repeats", min=1, help="requests per view and size"),
    before_up_to: int = typer.Option(1_000_000, "--before-up-to", min=0,
                                     help="time the old per-document /semantic/mismatch up to this size"),
    postgres: bool = typer.Option(False, "--postgres", help="the PostgreSQL store's reports (a private server)"),
) -> None:
    """Every admin and health view timed at growing sizes of one tenant (embedded store, written in bulk)."""
    from bench.admin_views import main, postgres_main

    print(postgres_main(docs, repeats) if postgres else main(docs, repeats, before_up_to))


@app.command("lexical-legs")
def bench_lexical_legs(
    docs: int = typer.Option(100_000, "--docs", min=1000),
    rounds: int = typer.Option(3, "--rounds", min=1, help="interleaved passes over the queries"),
    queries: int = typer.Option(0, "--queries", min=0, help="the first N of the collection's queries (0: all)"),
    quick: bool = typer.Option(False, "--quick", help="10k documents, 2 rounds, 20 queries: under 2 minutes"),
) -> None:
    """The lexical leg on OpenSearch (a private node) against tantivy, both served: first events, keyword answers,
    ingest until searchable."""
    from bench.lexical_legs import main

    main(docs, rounds, queries, quick=quick)


@app.command("throughput")
def bench_throughput(
    docs: int = typer.Option(512, "--docs", min=64),
    pipeline_docs: int = typer.Option(600, "--pipeline-docs", min=64),
) -> None:
    """The local model's runtimes (onnxruntime, torch): query latency, docs/s per batch size, pipeline ratio."""
    from bench.throughput import main

    main(docs, pipeline_docs)


@app.command("noisy-tenant")
def bench_noisy_tenant(
    rounds: int = typer.Option(40, "--rounds", min=5, help="tenant B's write+read rounds per phase"),
    noise_threads: int = typer.Option(1, "--noise-threads", min=1, help="tenant A's threads of each kind"),
    cost: str = typer.Option("weighted", "--cost", help="weighted (the server's) or flat: one token a request"),
) -> None:
    """Tenant B's read and write p50/p95 with tenant A idle vs noisy (admin actions at their limits), as ratios."""
    from bench.noisy_tenant import main

    main(rounds, noise_threads, cost=cost)


@app.command("perf-report")
def bench_perf_report() -> None:
    """bench/results/performance.md and its plots from the newest latency, throughput, scale, peers,
    lexical-legs and long-docs results."""
    from bench.perf_report import main

    main()


@app.command("lifecycle")
def bench_lifecycle(
    data: Path = typer.Option(..., "--data", exists=True, file_okay=False, help="a BEIR-layout folder"),
    days: int = typer.Option(30, "--days", min=1, help="simulated days"),
    docs: int | None = typer.Option(None, "--docs", min=10, help="a seeded sample of this many documents"),
    queries: int | None = typer.Option(None, "--queries", min=1, help="draw from a sample of this many queries"),
    per_day: int = typer.Option(100, "--per-day", min=1, help="hybrid reads per simulated day"),
    hot: int = typer.Option(20, "--hot", min=1, help="Zipf-hot queries each week"),
    tail: float = typer.Option(0.1, "--tail", min=0.0, max=1.0, help="share of reads uniform over all queries"),
    seed: int = typer.Option(1, "--seed"),
    tick_minutes: float = typer.Option(60.0, "--tick-minutes", min=1.0, help="scheduler interval, simulated"),
    evict_idle_days: float = typer.Option(7.0, "--evict-idle-days", min=0.01),
    pin_ttl_days: float = typer.Option(7.0, "--pin-ttl-days", min=0.0),
    half_life_days: float = typer.Option(7.0, "--half-life-days", min=0.01),
    codec: str = typer.Option("float16", "--codec", help="float16|int8"),
    embedder: str = typer.Option("local", "--embedder", help="local (all-MiniLM-L6-v2, cached) | hash"),
    out_dir: Path = typer.Option(None, "--out-dir", help="default: bench/results"),
    schedule: str = typer.Option("", "--schedule",
                                 help="days x reads a day, in order, e.g. 3x1000,17x0,10x100 (default: --per-day)"),
    no_promotion_arm: bool = typer.Option(False, "--no-promotion-arm",
                                          help="also run the scheduler with collection promotion off"),
) -> None:
    """Lifecycle over simulated days: bytes, provider calls and quality vs eager and lazy; cold codecs."""
    from bench.lifecycle import Policy, main, parse_schedule

    policy = Policy(tick_minutes, evict_idle_days, pin_ttl_days, half_life_days, codec=codec)
    main(data, days, docs, queries, per_day, hot, tail, seed, policy, embedder, out_dir,
         parse_schedule(schedule) if schedule else (), no_promotion_arm)


@app.command("reindex-speed")
def bench_reindex_speed(
    seconds_before: float = typer.Option(60.0, "--seconds-before", min=5.0,
                                         help="how long the bucket-paced reindex runs before the admin lane"),
    docs: int = typer.Option(0, "--docs", min=0, help="the first N dev abstracts (0: all of them)"),
    data_dir: Path = typer.Option(None, "--data-dir", help="instance data dir (default: a fresh temp dir)"),
) -> None:
    """An admin reindex with the local model against the model's own rate, and reads during it."""
    from bench.reindex_speed import main

    main(seconds_before, docs, _data_dir(data_dir, "reindex-speed"))


if __name__ == "__main__":  # pragma: no cover
    app(prog_name="python -m bench")
