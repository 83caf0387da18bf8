"""PNG plots next to the JSON results (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import RESULTS


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _mean_last(runs: list[dict[str, Any]], key: str) -> float:
    return sum(r["points"][-1][key] for r in runs) / len(runs)


def lazy(doc: dict[str, Any]) -> list[str]:
    plt = _pyplot()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = doc["name"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, runs) in enumerate(doc["runs"].items()):
        pts = runs[0]["points"]
        xs = [p["queries_served"] for p in pts]
        color = f"C{i}"  # one colour per setting: quality solid, embedded fraction dashed
        ax.plot(xs, [p["ratio_done"] for p in pts], color=color, label=f"{name} quality")
        ax.plot(xs, [p["embedded_fraction"] for p in pts], "--", color=color, label=f"{name} embedded")
    ax.set_xlabel("queries served")
    ax.set_ylabel("ratio to eager / fraction embedded")
    ax.legend(fontsize=6, ncol=2)
    curve = RESULTS / f"{stem}-curve.png"
    fig.savefig(curve, dpi=110, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(5, 4))
    families = {"naive fixed-K": lambda n: n.startswith("fixed-"),
                "depth": lambda n: n.startswith("depth-") and "+" not in n,
                "depth + neighbours": lambda n: "+" in n}
    for (family, member), marker in zip(families.items(), "so^", strict=True):
        pts = sorted((_mean_last(runs, "embedded_fraction"), _mean_last(runs, "ratio_done"), name)
                     for name, runs in doc["runs"].items() if member(name))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=family,
                linestyle="-" if family == "depth" else "")
        for x, y, name in pts:
            ax.annotate(name, (x, y), fontsize=7)
    if "oracle_fraction" in doc:
        ax.axvline(doc["oracle_fraction"], linestyle=":", color="grey", label="oracle (eager top pages)")
    ax.legend(fontsize=7)
    ax.set_xlabel("fraction of corpus embedded")
    ax.set_ylabel("quality ratio to eager hybrid")
    frontier = RESULTS / f"{stem}-frontier.png"
    fig.savefig(frontier, dpi=110, bbox_inches="tight")
    plt.close("all")
    return [str(Path(p).name) for p in (curve, frontier)]
