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
    for name, runs in doc["runs"].items():
        last = runs[0]["points"][-1]
        ax.scatter(last["embedded_fraction"], last["ratio_done"])
        ax.annotate(name, (last["embedded_fraction"], last["ratio_done"]), fontsize=7)
    ax.set_xlabel("fraction of corpus embedded")
    ax.set_ylabel("quality ratio to eager hybrid")
    frontier = RESULTS / f"{stem}-frontier.png"
    fig.savefig(frontier, dpi=110, bbox_inches="tight")
    plt.close("all")
    return [str(Path(p).name) for p in (curve, frontier)]
