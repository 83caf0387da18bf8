"""`reindex` (seed 002 §4.5): index local folders of Markdown/text files into a collection.

Locations: a non-empty `paths` wins over `path`; with neither, the server's working
directory (CON-004..006). Every location must lie inside an allowed root
(`VIBE_MCP_REINDEX_ROOTS`, default the working directory): a remote caller of /mcp must not
be able to read arbitrary server files. All locations are validated before anything is
written, so a bad one changes nothing.

Chunks are ordinary documents of the collection (id `<file id>~<chunk index>`, fields
`path`, `heading_path`, `chunk_index`, `content`, and a `meta` object with the file hash,
which nothing indexes), written through DocumentService like any PUT, so tenant and ACL
filtering inside the engines applies to them. A file whose hash equals the stored one is
skipped unless `force`; a file that shrank loses its surplus chunks. Vectors are produced at
once by the EmbedHandler (core.embed_now), as seed 002's reindex embeds at index time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from services.api.writes import check_collection
from services.mcp import core
from services.mcp.chunking import markdown_chunks
from services.mcp.errors import invalid
from services.mcp.search import CHUNK_SEP
from shared.model import DocKey, Principal, StoredDoc
from services.wiring import Container

SUFFIXES = {".md", ".markdown", ".txt"}


def locations(path: str | None, paths: Sequence[str] | None, cwd: Path) -> list[Path]:
    """Seed 002 precedence: non-empty `paths`, else `path`, else the working directory."""
    chosen = list(paths) if paths else ([path] if path else [str(cwd)])
    return [(cwd / p).resolve() for p in chosen]


def check_locations(locs: list[Path], roots: Sequence[Path]) -> None:
    for loc in locs:
        if not loc.exists():
            raise invalid(f"no such file or folder: {loc}")
        if not any(loc == r or r in loc.parents for r in roots):
            raise invalid(f"{loc} is outside the allowed reindex roots")


def files_of(loc: Path, skip: Path) -> list[Path]:
    if loc.is_file():
        return [loc] if loc.suffix.lower() in SUFFIXES else []
    out = []
    for f in sorted(loc.rglob("*")):
        rel = f.relative_to(loc).parts
        if any(part.startswith(".") for part in rel) or skip == f or skip in f.parents:
            continue
        if f.is_file() and f.suffix.lower() in SUFFIXES:
            out.append(f)
    return out


def file_id(f: Path) -> str:
    return blake3.blake3(str(f).encode()).hexdigest()[:20]


@dataclass
class Tally:
    indexed: int = 0
    skipped: int = 0
    chunks: int = 0
    embedded: int = 0
    paths: list[str] = field(default_factory=list)


class Reindexer:
    def __init__(self, c: Container, cwd: Path | None = None):
        self.c = c
        self.cwd = cwd or Path.cwd()

    def roots(self) -> list[Path]:
        return [r.resolve() for r in self.c.settings.mcp_reindex_roots] or [self.cwd.resolve()]

    def run(self, p: Principal, path: str | None, paths: list[str] | None, force: bool,
            collection: str | None) -> dict[str, Any]:
        col = collection or self.c.settings.mcp_collection
        check_collection(col)
        locs = locations(path, paths, self.cwd)
        check_locations(locs, self.roots())
        tally = Tally()
        for loc in locs:
            self._location(p, col, loc, force, tally)
            tally.paths.append(str(loc))
        out: dict[str, Any] = {"indexed_files": tally.indexed, "skipped_files": tally.skipped,
                               "embedding_model": self.c.embedder.model_id,
                               "embedding_backend": self.c.settings.embedder,
                               "collection": col, "chunks": tally.chunks, "embedded_chunks": tally.embedded}
        if paths:
            out["indexed_paths"] = tally.paths
        return out

    def _location(self, p: Principal, col: str, loc: Path, force: bool, tally: Tally) -> None:
        base = loc if loc.is_dir() else loc.parent
        for f in files_of(loc, self.c.settings.data_dir.resolve()):
            raw = f.read_bytes()
            if len(raw) > self.c.settings.mcp_max_file_bytes:
                tally.skipped += 1
                continue
            digest = blake3.blake3(raw).hexdigest()
            fid = file_id(f)
            old = self.c.store.get_doc(DocKey(p.tenant, col, f"{fid}{CHUNK_SEP}0"))
            if not force and old is not None and old.fields.get("meta", {}).get("file_hash") == digest:
                tally.skipped += 1
                continue
            docs = self._docs(p, col, fid, str(f.relative_to(base)), raw.decode("utf-8", "replace"), digest)
            self._write(p, col, fid, docs, old)
            tally.indexed += 1
            tally.chunks += len(docs)
            tally.embedded += core.embed_now(self.c, docs)

    def _docs(self, p: Principal, col: str, fid: str, rel: str, text: str, digest: str) -> list[StoredDoc]:
        s = self.c.settings
        chunks = markdown_chunks(text, s.mcp_chunk_chars, s.mcp_chunk_overlap)
        meta = {"file_hash": digest, "chunk_count": len(chunks)}
        return [self.c.docs.parse(p, col, f"{fid}{CHUNK_SEP}{ch.index}", {
            "path": rel, "heading_path": ch.heading_path, "chunk_index": ch.index, "content": ch.content,
            "meta": meta}) for ch in chunks]

    def _write(self, p: Principal, col: str, fid: str, docs: list[StoredDoc], old: StoredDoc | None) -> None:
        if docs:
            self.c.docs.put(docs)
        before = int(old.fields.get("meta", {}).get("chunk_count", 0)) if old is not None else 0
        for i in range(len(docs), before):  # the file shrank: its tail chunks go
            self.c.docs.delete(DocKey(p.tenant, col, f"{fid}{CHUNK_SEP}{i}"))
