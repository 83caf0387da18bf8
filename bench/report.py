"""Result files in bench/results/: every run writes its JSON (all figures) and a Markdown summary
under a timestamped name, `<name>-YYYYmmdd-HHMMSS.json`/`.md` (kept out of git), and overwrites
`<name>.json`, the benchmark's newest result: the file the curated report is built from and the one
the repository keeps (.gitignore lists those that are committed)."""

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


def latest(name: str) -> Path:
    """The benchmark's newest result, overwritten by each run."""
    return RESULTS / f"{name}.json"


def write(doc: dict[str, Any], markdown: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{doc['name']}-{stamp}.json"
    text = json.dumps(doc, indent=1, sort_keys=True)
    path.write_text(text)
    path.with_suffix(".md").write_text(markdown)
    latest(doc["name"]).write_text(text)
    print(markdown)
    return path
