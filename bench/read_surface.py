"""What the results-page options of `/v1/read` cost, through the HTTP API of a
served instance (hash embedder, keyword strategy: the options' own cost, not the model's).

    .venv/bin/python -m bench.read_surface --docs 20000 --queries 200

Per query, after one untimed read, in a random order, in one run (the figures read as ratios
to the plain read):
  - plain: `{"collection", "q", "limit": 20}`;
  - fields: the same with `include.fields: true` (the documents the page re-check loaded);
  - filter: the same with a range + equality filter (inside the engine query);
  - page2: the next page through the first answer's `nextCursor`;
  - sse_first: time to the first SSE event (`retry:` + `id:` framing) of the plain query.
Writes bench/results/read-surface-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.spine import WORDS, percentile
from harness.server import Served, served

KEY = "k-alice"
HEAD = {"Authorization": f"Bearer {KEY}", "Accept": "application/json"}


def _docs(n: int, rng: random.Random) -> list[dict[str, Any]]:
    return [{"_id": f"d{i}", "title": " ".join(rng.choices(WORDS, k=4)), "body": " ".join(rng.choices(WORDS, k=40)),
             "year": rng.randint(1950, 2025), "lang": rng.choice(["en", "de", "fr"]),
             "tags": rng.sample(["aero", "heat", "structures", "info"], k=2)} for i in range(n)]


def _timed(s: Served, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    r = s.client.post("/v1/read", json=body, headers=HEAD)
    took = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, r.text
    return took, r.json()


def _first_event(s: Served, body: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    with s.client.stream("POST", "/v1/read", json=body,
                         headers={"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"}) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                return (time.perf_counter() - t0) * 1000
    raise RuntimeError("no event")


def run(docs: int, queries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {"docs": docs, "queries": queries, "seed": seed, "platform": platform.platform()}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp) / "data", validate=False) as s:
        batch = _docs(docs, rng)
        for i in range(0, docs, 1000):
            assert s.bulk(KEY, "bench", batch[i:i + 1000]).status_code == 200
        qs = [" ".join(rng.choices(WORDS, k=2)) for _ in range(queries)]
        times: dict[str, list[float]] = {k: [] for k in ("plain", "fields", "filter", "page2", "sse_first")}
        for q in qs[:10]:  # warm-up
            _timed(s, {"collection": "bench", "q": q, "semantic": {"strategy": "keyword"}})
        for q in qs:
            base = {"collection": "bench", "q": q, "limit": 20, "semantic": {"strategy": "keyword"}}
            _, first = _timed(s, base)  # untimed: its cursor, and every variant then runs on warm caches
            variants: list[tuple[str, dict[str, Any]]] = [
                ("plain", base), ("fields", {**base, "include": {"fields": True}}),
                ("filter", {**base, "filter": {"year": {"gte": 1990, "lt": 2010}, "lang": "en"}}),
                ("sse_first", base)]
            if first["nextCursor"]:
                variants.append(("page2", {**base, "cursor": first["nextCursor"]}))
            rng.shuffle(variants)  # no variant always runs first
            for name, body in variants:
                times[name].append(_first_event(s, body) if name == "sse_first" else _timed(s, body)[0])
        for name, xs in times.items():
            out[name] = {"n": len(xs), "p50_ms": round(statistics.median(xs), 3),
                         "p95_ms": round(percentile(xs, 0.95), 3)}
        plain = out["plain"]["p50_ms"]
        out["ratio_p50_to_plain"] = {k: round(out[k]["p50_ms"] / plain, 3) for k in times if k != "plain"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    result = run(a.docs, a.queries, a.seed)
    path = Path(__file__).parent / "results" / f"read-surface-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
