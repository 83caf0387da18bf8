"""Long documents: is a section found wherever it sits in its document? Passages on and off, one run.

The corpus is real Markdown anyone with this checkout has: this repository's own pages (README,
docs/, deploy/, the SDKs' READMEs) and the long descriptions of the Python packages installed in
its virtual environment (their `METADATA`, Markdown, 3-60 KB). Each document goes in through the
REST API (one document per file, `title` + `body`), is embedded with the local model, and is then
asked for by each of its section headings (levels 2-3) that no other document of the corpus
shares. A query is "head" when its section starts inside the first VIBE_PASSAGE_CHARS characters
(what one model window reads anyway) and "deep" otherwise. Reported: semantic hit@3 (the
document in the top 3) per bucket, and for hits, how often the named passage is the section's.

    python -m bench.long_docs [--docs 40] [--max-queries-per-doc 6]

The arms differ by one setting (`VIBE_PASSAGE_CHARS`: 1000, and 100,000 for "one text per
document", which the model cuts at its window). Nothing was tuned on this corpus: 1000 was
chosen from the model's window before the first run. Writes bench/results/long-docs.json (the
newest run, which the report reads) and long-docs-<stamp>.json + .md.
"""

from __future__ import annotations

import argparse
import email
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import harness, report

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = "longdocs"
WINDOW_CHARS = 1000
ARMS = {"passages": WINDOW_CHARS, "one text": 100_000}  # the largest setting: every document here is one text
_HEADING = re.compile(r"^(#{2,3})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
MIN_CHARS, MAX_CHARS = 3_000, 60_000
BUCKETS = ("head", "deep", "first third", "middle third", "last third")


@dataclass(frozen=True)
class Query:
    doc_id: str
    text: str
    offset: int  # where its section starts in the body
    length: int  # the body's length

    @property
    def bucket(self) -> str:
        return "head" if self.offset < WINDOW_CHARS else "deep"

    @property
    def third(self) -> str:
        return ("first third", "middle third", "last third")[min(2, 3 * self.offset // max(1, self.length))]


def _repo_pages() -> Iterator[tuple[str, str]]:
    for path in sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("deploy/*.md"),
                        *ROOT.glob("sdk/*/README.md")]):
        if path.is_file():
            yield f"repo:{path.relative_to(ROOT)}", path.read_text(encoding="utf-8", errors="replace")


def _package_pages() -> Iterator[tuple[str, str]]:
    site = Path(sys.prefix) / "lib"
    for meta in sorted(site.glob("python3*/site-packages/*.dist-info/METADATA")):
        msg = email.message_from_string(meta.read_text(encoding="utf-8", errors="replace"))
        if "markdown" not in str(msg.get("Description-Content-Type", "")).lower():
            continue
        body = msg.get_payload()
        if isinstance(body, str):
            yield f"pkg:{msg.get('Name', meta.parent.name)}", body


def corpus(n: int) -> list[tuple[str, str]]:
    """Up to `n` long Markdown documents with at least three sections, repository pages first."""
    out: list[tuple[str, str]] = []
    for name, text in [*_repo_pages(), *_package_pages()]:
        if MIN_CHARS <= len(text) <= MAX_CHARS and len(_HEADING.findall(text)) >= 3:
            out.append((name, text))
        if len(out) >= n:
            break
    return out


def _words(heading: str) -> int:
    """Words with a letter: a changelog's `0.4.2 - 2025-10-07` is not a question anyone types."""
    return sum(any(c.isalpha() for c in w) for w in heading.split())


def queries(docs: list[tuple[str, str]], per_doc: int) -> list[Query]:
    """Each document's distinctive headings (three words or more, in no other document), spread
    over the document: the first, the last and evenly between."""
    found = {name: [(m.group(2).strip(), m.start()) for m in _HEADING.finditer(text)] for name, text in docs}
    seen: dict[str, int] = {}
    for heads in found.values():
        for h in {h.lower() for h, _ in heads}:
            seen[h] = seen.get(h, 0) + 1
    out: list[Query] = []
    for i, (name, text) in enumerate(docs):
        ok = [(h, at) for h, at in found[name] if seen[h.lower()] == 1 and _words(h) >= 3]
        if len(ok) > per_doc:
            step = (len(ok) - 1) / (per_doc - 1)
            ok = [ok[round(j * step)] for j in range(per_doc)]
        out += [Query(f"d{i}", h, at, len(text)) for h, at in ok]
    return out


def _read(s: Any, q: str) -> list[dict[str, Any]]:
    r = s.read(harness.KEY, collection=COLLECTION, q=q, limit=3, semantic={"strategy": "semantic"})
    r.raise_for_status()
    return list(r.json()["results"])


def run_arm(chars: int, docs: list[tuple[str, str]], qs: list[Query], home: Path) -> dict[str, Any]:
    bodies = {f"d{i}": text for i, (_, text) in enumerate(docs)}
    with harness.instance(home, env={"VIBE_PASSAGE_CHARS": str(chars)}) as s:
        harness.ingest(s, COLLECTION, [{"_id": f"d{i}", "title": name.split(":", 1)[1], "body": text}
                                       for i, (name, text) in enumerate(docs)])
        embed_seconds = harness.embed_all(s, COLLECTION)
        tally: dict[str, list[int]] = {b: [0, 0] for b in BUCKETS}
        misses: list[dict[str, Any]] = []
        located = [0, 0]
        for q in qs:
            results = _read(s, q.text)
            hit = next((r for r in results if r["id"] == q.doc_id), None)
            for b in (q.bucket, q.third):
                tally[b][0] += hit is not None
                tally[b][1] += 1
            if hit is None:
                misses.append({"doc": q.doc_id, "query": q.text, "where": q.third, "got": [r["id"] for r in results]})
            if hit is not None and "passage" in hit:
                located[1] += 1
                section = bodies[q.doc_id][hit["passage"]["start"]:hit["passage"]["end"]]
                located[0] += q.text in section or q.text in hit["passage"]["headings"]
    hit3 = {b: round(k / n, 3) if n else None for b, (k, n) in tally.items()}
    return {"passage_chars": chars, "embed_seconds": round(embed_seconds, 1), "hit@3": hit3,
            "queries": {b: n for b, (_, n) in tally.items()},
            "passage_named_the_section": round(located[0] / located[1], 3) if located[1] else None,
            "hits_with_passage": located[1], "misses": misses}


def main(n_docs: int, per_doc: int, arms_wanted: list[str] | None = None) -> Path:
    docs = corpus(n_docs)
    qs = queries(docs, per_doc)
    root = Path(tempfile.mkdtemp(prefix="vibe-longdocs-"))
    arms: dict[str, Any] = {}
    started = time.monotonic()
    try:
        for name, chars in ARMS.items():
            if arms_wanted and name not in arms_wanted:
                continue
            arms[name] = run_arm(chars, docs, qs, root / name.replace(" ", "-"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [[name, *(a["hit@3"][b] for b in BUCKETS), a["embed_seconds"], a["passage_named_the_section"]]
            for name, a in arms.items()]
    md = (f"# Long documents: semantic hit@3 by where the section sits\n\n"
          f"{len(docs)} Markdown documents ({sum(len(t) for _, t in docs) // 1000} KB: "
          f"{sum(n.startswith('repo:') for n, _ in docs)} repository pages, the rest package descriptions), "
          f"{len(qs)} heading queries ({sum(q.bucket == 'head' for q in qs)} head, "
          f"{sum(q.bucket == 'deep' for q in qs)} deep), all-MiniLM-L6-v2, semantic strategy.\n\n"
          + report.table(["arm", *(f"hit@3 {b}" for b in BUCKETS), "embed s", "passage = section"], rows))
    doc = {"name": "long-docs", "docs": [n for n, _ in docs], "queries": len(qs), "arms": arms,
           "machine": harness.machine(), "seconds": round(time.monotonic() - started, 1)}
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--max-queries-per-doc", type=int, default=6)
    ap.add_argument("--arm", action="append", choices=sorted(ARMS), help="run only these arms")
    a = ap.parse_args()
    main(a.docs, a.max_queries_per_doc, a.arm)
