"""Relevance collections in the BEIR layout: `corpus.jsonl`, `queries.jsonl`, `qrels.tsv`."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Dataset:
    name: str
    corpus: dict[str, dict[str, Any]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}, positives only

    def judged_queries(self) -> dict[str, str]:
        """Queries with at least one relevant document (the others cannot be scored)."""
        return {q: t for q, t in self.queries.items() if self.qrels.get(q)}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows, None)  # header: query-id corpus-id score
        for qid, did, score in rows:
            if int(score) > 0:  # binary relevance (see ../shared/data/README.md)
                out.setdefault(qid, {})[did] = 1
    return out


def load(folder: Path) -> Dataset:
    corpus = {str(d["_id"]): {"title": d.get("title") or "", "text": d.get("text") or ""}
              for d in _jsonl(folder / "corpus.jsonl")}
    queries = {str(q["_id"]): str(q["text"]) for q in _jsonl(folder / "queries.jsonl")}
    return Dataset(folder.name, corpus, queries, _qrels(folder / "qrels.tsv"))
