"""Result files: every run writes JSON (all figures) and a Markdown summary to bench/results/."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(xs: Sequence[float], p: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(p * len(s)))], 2)


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write(doc: dict[str, Any], markdown: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{doc['name']}-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
    path.with_suffix(".md").write_text(markdown)
    print(markdown)
    return path
