"""JSONL ingest through the bulk API with a rich progress bar (CLI `ingest`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from shared.names import is_collection_name


def _batches(file: Path, size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    with file.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                batch.append(json.loads(line))
            except ValueError as e:
                raise SystemExit(f"{file}:{n}: not JSON: {e}") from None
            if len(batch) >= size:
                yield batch
                batch = []
    if batch:
        yield batch


def _count_lines(file: Path) -> int:
    with file.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


class _Rate(ProgressColumn):
    """Documents per second, whole (rich's speed is a raw float, and None before the first batch)."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:,.0f} docs/s" if task.speed else "- docs/s")


def ingest_file(file: Path, collection: str, base: str, key: str, batch: int) -> dict[str, Any]:
    if not is_collection_name(collection):  # refused before any file is read or request sent
        raise SystemExit(f"invalid collection name {collection[:64]!r}: 1 to 128 characters of "
                         "A-Z a-z 0-9 . _ -, starting with a letter or digit")
    total = _count_lines(file)
    accepted = rejected = 0
    errors: list[dict[str, Any]] = []
    cols = (TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), _Rate(),
            TimeRemainingColumn())
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600) as client, \
            Progress(*cols) as progress:
        task = progress.add_task("docs", total=total)
        for docs in _batches(file, batch):
            r = client.post(f"/v1/collections/{collection}/docs:bulk", json={"docs": docs})
            if r.status_code >= 300:
                raise SystemExit(f"bulk failed with {r.status_code}: {r.text[:300]}")
            out = r.json()
            accepted += out["accepted"]
            rejected += out["rejected"]
            errors += [x for x in out["results"] if "error" in x][:10]
            progress.advance(task, len(docs))
    return {"accepted": accepted, "rejected": rejected, "errors": errors[:10]}
