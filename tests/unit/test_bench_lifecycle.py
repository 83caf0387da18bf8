"""Smoke test of `bench lifecycle`: a tiny simulation with the hash embedder writes its JSON,
evicts, rehydrates without a provider call, and never re-embeds evicted content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

bench_lifecycle = pytest.importorskip("bench.lifecycle")

TOPICS = ["wing lift drag airfoil", "boundary layer shear flow", "heat transfer conduction slab",
          "shock wave supersonic nozzle", "buckling cylinder shell load", "turbulent jet mixing"]


def _dataset(root: Path) -> Path:
    folder = root / "tiny"
    folder.mkdir()
    docs, qrels = [], ["query-id\tcorpus-id\tscore"]
    for i in range(36):
        topic = TOPICS[i % len(TOPICS)]
        docs.append({"_id": f"d{i}", "title": f"{topic} study {i}", "text": f"{topic} measured in case {i} " * 3})
    for q in range(len(TOPICS)):
        qrels += [f"q{q}\td{i}\t1" for i in range(q, 36, len(TOPICS))][:3]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": f"q{q}", "text": t})
                                                     for q, t in enumerate(TOPICS)))
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_tiny_simulation_writes_its_results(tmp_path: Path) -> None:
    # Hot set of 2 of 6 queries, no tail: other topics' vectors go idle; pins off so they can go.
    policy = bench_lifecycle.Policy(tick_minutes=240, evict_idle_days=1.0, pin_ttl_days=0.0, half_life_days=1.0)
    path = bench_lifecycle.main(_dataset(tmp_path), days=9, per_day=6, hot=2, tail=0.0, seed=3, policy=policy,
                                embedder="hash", out_dir=tmp_path / "out")
    assert path.exists() and path.name.startswith("lifecycle-tiny-9d-")
    assert path.with_suffix(".md").exists() and path.with_suffix(".png").exists()
    doc = json.loads(path.read_text())
    life, lazy = doc["arms"]["lifecycle"], doc["arms"]["lazy"]
    assert [p["day"] for p in life["points"]] == list(range(1, 10))
    assert sum(p["queries"] for p in life["points"]) == 54
    assert doc["eager"]["provider_docs_total"] == 36
    # the scheduler off never evicts; on, it does, and what comes back is rehydrated, not re-embedded
    assert lazy["ticks"]["evicted"] == 0 and lazy["points"][-1]["cold_bytes"] == 0
    assert life["ticks"]["evicted"] > 0
    assert life["points"][-1]["embedded_bytes"] < lazy["points"][-1]["embedded_bytes"]
    assert life["points"][-1]["re_embedded_total"] == 0
    assert life["points"][-1]["provider_docs_total"] <= lazy["points"][-1]["provider_docs_total"]
    check = life["rehydration_check"]
    assert check["cold_docs"] > 0 and check["rehydrated"] == check["cold_docs"] == check["ready_after"]
    assert check["provider_calls"] == 0 and check["provider_docs"] == 0
    assert doc["codecs"]["float16"]["cosine_min"] >= 0.999
    assert all(0.0 <= p["ratio_done"] <= 2.0 for p in life["points"])


def test_burst_promotes_backfills_then_demotes(tmp_path: Path) -> None:
    # One busy day (300 reads: past the product's 20 queries / 50 hits in 2 h), then quiet: the
    # collection is promoted and backfilled on day 1 and demoted 7 quiet days later (defaults).
    policy = bench_lifecycle.Policy(tick_minutes=60, evict_idle_days=30.0, pin_ttl_days=0.0, half_life_days=1.0)
    schedule = bench_lifecycle.parse_schedule("1x300,9x0")
    assert schedule == ((1, 300), (9, 0))
    path = bench_lifecycle.main(_dataset(tmp_path), days=10, per_day=6, hot=3, tail=0.0, seed=3, policy=policy,
                                embedder="hash", out_dir=tmp_path / "out", schedule=schedule,
                                no_promotion_arm=True)
    assert "-s1x300-9x0-" in path.name and path.with_suffix(".png").exists()
    doc = json.loads(path.read_text())
    life, nopro, lazy = doc["arms"]["lifecycle"], doc["arms"]["lifecycle, no promotion"], doc["arms"]["lazy"]
    assert [p["queries"] for p in life["points"]] == [300] + [0] * 9
    actions = [(e["action"], e["at_day"]) for e in life["events"]]
    assert [a for a, _ in actions] == ["promote", "demote"]
    assert actions[0][1] < 1 and 7 <= actions[1][1] < 9
    assert life["points"][0]["mode"] == "eager" and life["points"][-1]["mode"] == "lazy"
    # the backfill embedded the whole corpus on day 1; staying lazy embedded only what reads touched
    assert life["points"][0]["provider_docs_total"] == 36 == life["points"][0]["ready_docs"]
    assert nopro["events"] == [] and nopro["points"][0]["provider_docs_total"] < 36
    assert lazy["events"] == [] and all(p["mode"] == "lazy" for p in lazy["points"])
    # days without reads have no quality figure (not 0)
    assert all(p["ratio_done"] is None for p in life["points"][1:])
    assert "promote at day" in path.with_suffix(".md").read_text()
