"""First-event latency of two commits in one run.

    python -m bench.first_event_ab --docs 100000 --queries 100 --baseline <git ref> [--current HEAD]

One corpus is ingested once (by the baseline) and copied for each; two servers run side by side on the copies, each from
a detached `git worktree` of its commit (committed code only: uncommitted edits in the checkout
are in neither), same venv, same local model through the same runtime. Each query goes to both, in alternating order,
so the load of the machine (2 shared cores here) and each server's background embedding of
the documents earlier queries touched fall on both alike. Per strategy: p50/p95 of the time
to the first SSE event for each, and the median of the paired differences; each server's
`/healthz` round trip and the load average are recorded alongside. Every sample is kept.

`--current-env NAME=VALUE` (repeatable): settings for the current server only, to compare a
setting on one commit (`--baseline HEAD --current HEAD --current-env VIBE_EMBED_DOC_NICE=19`).

`--embedded N` (default 200): before the copies are made, N other keyword reads as JSON touch
their candidates and the seed server embeds them (its queue drained): each server then starts
with vectors to search (~1,900 at the default), as a collection in use has. Without them a
semantic first page is empty and a hybrid query's tail fuses with nothing, which measured
semantic 7.5 against 12 ms back to back (same code; bench/latency.py reached that state
through its keyword phases).

`--sequential R`: instead, one server at a time, R rounds in the order baseline, current,
current, baseline, ... each on a fresh copy of the corpus, every round sending the same
queries. Use it for changes that move background work in time (the foreground gate): with both
servers up, one server's deferred work lands in the other's measurements. Pairs are the same
query in the same round.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import report
from bench.latency import ENV, READER, STRATEGIES, drain, trivial_ms, warm_json_ms
from bench.spine import first_event_ms, synthetic_docs, zipf_vocabulary
from harness.server import KEYS, REPO, Served, served


def worktree(ref: str, where: Path) -> str:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), ref], check=True,
                   capture_output=True)
    return subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": report.percentile(xs, 0.5), "p95_ms": report.percentile(xs, 0.95)}


def _paired(samples: dict[str, list[float]], cur: str, base: str, load_before: tuple[float, ...],
            load_after: tuple[float, ...]) -> dict[str, Any]:
    """Both arms' percentiles and the paired differences (the same query, current − baseline)."""
    diffs = [a - b for a, b in zip(samples[cur], samples[base], strict=True)]
    return {**{n: _summary(v) for n, v in samples.items()},
            "paired_diff_p50_ms": round(statistics.median(diffs), 3),
            f"{cur}_faster_share": round(sum(d < 0 for d in diffs) / len(diffs), 3),
            "load_average": {"before": load_before, "after": load_after},
            "samples": {n: [round(x, 3) for x in v] for n, v in samples.items()}}


def measure(servers: dict[str, Served], qs: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = list(servers)
    for strategy, queries in qs.items():
        samples: dict[str, list[float]] = {n: [] for n in names}
        load_before = os.getloadavg()
        for i, q in enumerate(queries):
            for n in names if i % 2 == 0 else names[::-1]:
                samples[n].append(first_event_ms(servers[n], q, strategy))
        out[strategy] = _paired(samples, names[0], names[1], load_before, os.getloadavg())
        print(strategy, {k: v for k, v in out[strategy].items() if k != "samples"}, flush=True)
    return out


def _sequential(root: Path, envs: dict[str, dict[str, str]], names: list[str], warm: list[str],
                qs: dict[str, list[str]], rounds: int) -> tuple[dict[str, Any], dict[str, float]]:
    """One server at a time on a fresh copy of the corpus, in the order b, c, c, b, b, c, ..."""
    base, cur = names[1], names[0]
    order = [n for r in range(rounds) for n in ((base, cur) if r % 2 == 0 else (cur, base))]
    samples: dict[str, dict[str, list[float]]] = {st: {n: [] for n in names} for st in qs}
    loads: dict[str, list[tuple[float, ...]]] = {st: [] for st in qs}
    trivial: dict[str, list[float]] = {n: [] for n in names}
    for i, n in enumerate(order):
        run = root / f"run-{i}"
        shutil.copytree(root / "seed", run)
        with served(run / "data", env=envs[n], keys=KEYS, repo=root / f"code-{n}") as s:
            for q in warm:
                first_event_ms(s, q, "keyword")
            for strategy, queries in qs.items():
                loads[strategy].append(os.getloadavg())
                samples[strategy][n] += [first_event_ms(s, q, strategy) for q in queries]
            trivial[n] += trivial_ms(s, 50)
        shutil.rmtree(run, ignore_errors=True)
    out: dict[str, Any] = {}
    for strategy, by in samples.items():
        out[strategy] = {**_paired(by, cur, base, loads[strategy][0], loads[strategy][-1]), "rounds": order}
        print(strategy, {k: v for k, v in out[strategy].items() if k != "samples"}, flush=True)
    return out, {n: report.percentile(v, 0.5) for n, v in trivial.items()}


def main(docs: int, queries: int, baseline: str, current: str, runtime: str, sequential: int = 0,
         current_env: dict[str, str] | None = None, embedded: int = 200) -> Path:
    rng = random.Random(11)
    vocab = zipf_vocabulary(20_000, rng)
    corpus = synthetic_docs(docs, rng, 60, vocab)
    warm = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(20)]
    qs = {st: [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(queries)] for st in STRATEGIES}
    touch = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(embedded)]
    root = Path(tempfile.mkdtemp(prefix="vibe-first-ab-"))
    env = {**ENV, "VIBE_EMBED_RUNTIME": runtime}
    envs = {"current": {**env, **(current_env or {})}, "baseline": env}
    commits = {n: worktree(ref, root / f"code-{n}") for n, ref in (("current", current), ("baseline", baseline))}
    try:
        with served(root / "seed" / "data", env=env, keys=KEYS, repo=root / "code-baseline") as s:
            for i in range(0, len(corpus), 1000):
                s.bulk("k-admin-a", "syn", corpus[i:i + 1000]).raise_for_status()
            for q in touch:
                warm_json_ms(s, q, "keyword")
            drain(s)
        for n in commits:  # both servers start from a copy: neither is the one that wrote the files
            if not sequential:
                shutil.copytree(root / "seed", root / n)
        if sequential:
            res, trivial = _sequential(root, envs, list(commits), warm, qs, sequential)
        else:
            with ExitStack() as stack:
                servers = {n: stack.enter_context(served(root / n / "data", env=envs[n], keys=KEYS,
                                                         repo=root / f"code-{n}")) for n in commits}
                for s in servers.values():
                    for q in warm:
                        first_event_ms(s, q, "keyword")
                res = measure(servers, qs)
                trivial = {n: report.percentile(trivial_ms(s), 0.5) for n, s in servers.items()}
    finally:
        for n in commits:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root / f"code-{n}")],
                           check=False)
        shutil.rmtree(root, ignore_errors=True)
    doc = {"name": "first-event-ab", "docs": docs, "queries_per_strategy": queries, "runtime": runtime,
           "reader": READER, "current": {"ref": current, "commit": commits["current"]},
           "baseline": {"ref": baseline, "commit": commits["baseline"]}, "healthz_p50_ms": trivial,
           "mode": f"sequential, {sequential} rounds" if sequential else "interleaved",
           "current_env": current_env or {}, "embedded_by_keyword_reads": embedded,
           "strategies": res}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    head = ["strategy", "current p50", "current p95", "baseline p50", "baseline p95", "paired diff p50",
            "current faster", "load average before → after"]
    rows = [[k, v["current"]["p50_ms"], v["current"]["p95_ms"], v["baseline"]["p50_ms"], v["baseline"]["p95_ms"],
             v["paired_diff_p50_ms"], v["current_faster_share"],
             f"{'/'.join(f'{x:.1f}' for x in v['load_average']['before'])} → "
             f"{'/'.join(f'{x:.1f}' for x in v['load_average']['after'])}"]
            for k, v in doc["strategies"].items()]
    cur, base = doc["current"], doc["baseline"]
    settings = doc.get("current_env") or {}
    extra = " with " + " ".join(f"{k}={v}" for k, v in settings.items()) if settings else ""
    return (f"# First SSE event: {cur['ref']} ({cur['commit'][:10]}){extra} against {base['ref']} "
            f"({base['commit'][:10]})\n\n"
            f"{doc['docs']} synthetic documents, local model ({doc['runtime']}), the candidates of "
            f"{doc.get('embedded_by_keyword_reads', 0)} other keyword reads embedded, {doc['queries_per_strategy']} "
            + ("queries per strategy, each sent to both servers in alternating order. `/healthz` p50: "
               if doc.get("mode", "interleaved") == "interleaved" else
               f"queries per strategy, one server at a time ({doc['mode']}; order "
               f"{', '.join(next(iter(doc['strategies'].values()))['rounds'])}). `/healthz` p50: ")
            + ", ".join(f"{k} {v} ms" for k, v in doc["healthz_p50_ms"].items()) + ". Times in ms.\n\n"
            + report.table(head, rows))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--baseline", required=True, help="git ref of the code to compare against")
    ap.add_argument("--current", default="HEAD", help="git ref of the code measured")
    ap.add_argument("--runtime", default="onnx")
    ap.add_argument("--current-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the current server only (repeatable)")
    ap.add_argument("--sequential", type=int, default=0, metavar="ROUNDS",
                    help="one server at a time, this many rounds (0: both up, queries interleaved)")
    ap.add_argument("--embedded", type=int, default=200, metavar="N",
                    help="keyword reads whose candidates are embedded before the servers start (0: none)")
    a = ap.parse_args()
    t0 = time.time()
    extra = dict(e.split("=", 1) for e in a.current_env)
    print(main(a.docs, a.queries, a.baseline, a.current, a.runtime, a.sequential, extra, a.embedded),
          f"{time.time() - t0:.0f} s")
