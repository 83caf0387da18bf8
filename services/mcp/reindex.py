"""`reindex` (Rifflux-compatible): index local folders of Markdown/text files into a collection.

Roots: reindex reads only inside `VIBE_MCP_REINDEX_ROOTS`; with none
configured (the default) it is off and says so (`feature_disabled`). The server's working
directory is never a root by itself: a remote caller of /mcp must not be able to read
whatever folder the server happened to start in.

Locations: a non-empty `paths` wins over `path`; with neither, the server's working
directory (CON-004..006), which must then lie inside a root like any location. A location
that does not exist and one outside the roots get the same answer, naming only what the
caller sent (never a resolved path), so the tool does not reveal which server paths exist.
All locations are validated, and their files listed (at most VIBE_MCP_REINDEX_MAX_FILES),
before anything is written, so a bad one changes nothing.

Symlinks: a file or folder is judged by where it really is. A symlink whose target lies
inside an allowed root is indexed under the link's path; one whose target leaves every root
(or enters the data dir) is skipped and counted in `skipped_files`. The file is opened
without following a final symlink, and the opened descriptor's real path is checked again
(/proc/self/fd), so swapping a symlink in between the listing and the read gains nothing.

Chunks are ordinary documents of the collection (id `<file id>~<chunk index>`, fields
`path`, `heading_path`, `chunk_index`, `content`, `folder_id` and a `meta` object with the file
hash, which nothing indexes), written through DocumentService like any PUT, so tenant and ACL
filtering inside the engines applies to them. A file whose hash equals the stored one is
skipped unless `force`; a file that shrank loses its surplus chunks. Vectors are produced at
once by the EmbedHandler (core.embed_now), as Rifflux's reindex embeds at index time.

Folders: every folder read gets a stable integer id (`folder_id(path)`, from its absolute
path), and each chunk's `folder_id` lists the ids of its file's folder and of every enclosing
folder up to the indexed location, innermost first, so `scope.folder_ids` of a search finds a
folder's files and its subfolders' (services/mcp/scope.py). Integers, because that is what
SurfSense folder ids are, and because numbers are filterable but never embedded or matched as
words. A file indexed before it had folder ids is rewritten by the next reindex, not skipped.

`prune_missing` (default true): a file this tool indexed from inside a scanned folder (its
absolute path is kept in the chunks' `meta.file`) that is no longer there loses all its
chunks, so search stops finding deleted files. Only folders scanned in this call are pruned,
and only documents the caller can read.

`background`: validation (roots, locations, the file limit) runs first and answers at once;
then the work runs on a per-process worker thread and the call returns a `job_id`, which
`reindex_status` reports (services/mcp/jobs.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from services.container import Container
from services.core.documents import check_collection
from services.core.overwrite import delete_checked, put_checked
from services.mcp import core
from services.mcp.chunking import markdown_chunks
from services.mcp.errors import FEATURE_DISABLED, ToolFailure, invalid
from services.mcp.scope import CHUNK_SEP, file_chunk_keys, file_heads, file_source
from shared.errors import ErrorCode, VibeError
from shared.model import DocKey, Principal, StoredDoc

SUFFIXES = {".md", ".markdown", ".txt"}


def chosen(path: str | None, paths: Sequence[str] | None) -> list[str] | None:
    """Rifflux precedence: non-empty `paths`, else `path`; None = the working directory. An
    empty `path` is not an omitted one: it is refused, never read as the working directory."""
    return list(paths) if paths else ([path] if path is not None else None)


def locations(path: str | None, paths: Sequence[str] | None, cwd: Path) -> list[Path]:
    return [(cwd / p).resolve() for p in (chosen(path, paths) or [str(cwd)])]


def inside(p: Path, roots: Sequence[Path]) -> bool:
    return any(p == r or r in p.parents for r in roots)


@dataclass(frozen=True)
class Roots:
    """The folders one tenant's reindex may read: its own (VIBE_MCP_REINDEX_TENANT_ROOTS) and
    the shared ones (VIBE_MCP_REINDEX_ROOTS), less every folder bound to another tenant inside
    them: the deepest root around a path decides whose it is. So one tenant's key cannot index
    another tenant's root, not even through a shared or own root that holds it."""

    mine: tuple[Path, ...]
    others: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.mine)

    def allows(self, p: Path) -> bool:
        around = [r for r in self.mine if p == r or r in p.parents]
        if not around:
            return False
        deepest = max(around, key=lambda r: len(r.parts))
        return not any((p == o or o in p.parents) and deepest in o.parents for o in self.others)


def as_roots(roots: Roots | Sequence[Path]) -> Roots:
    return roots if isinstance(roots, Roots) else Roots(tuple(roots))


def _unknown(given: str) -> ToolFailure:
    """One answer for a path that does not exist and one the caller may not read."""
    return invalid(f"{given[:256]!r} is not a file or folder inside the allowed reindex roots")


def check_locations(given: Sequence[str] | None, cwd: Path, roots: Roots | Sequence[Path]) -> list[Path]:
    """Resolved locations, each an existing file or folder inside a root; None = the working
    directory (refused without naming it: a remote caller has no business knowing it)."""
    roots = as_roots(roots)
    out = []
    for g in given if given is not None else [str(cwd)]:
        try:
            loc = (cwd / g).resolve()
            ok = roots.allows(loc) and loc.exists()
        except (OSError, RuntimeError, ValueError):  # symlink loops, NUL bytes, unreadable parents
            ok = False
        if not ok and given is None:
            # safe default: the folder a server happened to start in is not readable by a remote
            # caller unless an operator made it a root
            raise invalid("reindex without path or paths reads the server's working directory, which is not "
                          "inside the allowed reindex roots; pass path or paths, or add the working directory "
                          "to VIBE_MCP_REINDEX_ROOTS (or VIBE_MCP_REINDEX_TENANT_ROOTS for one tenant)")
        if not ok:
            raise _unknown(g)
        out.append(loc)
    return out


def files_of(loc: Path, skip: Path, limit: int) -> list[Path]:
    """Candidate files under `loc` (hidden parts and the data dir excluded), in order; at most
    `limit + 1`, which the caller refuses. Folders reached through a symlink are not entered
    (pathlib's rglob never follows them); symlinked files are judged when read."""
    if loc.is_file():
        return [loc] if loc.suffix.lower() in SUFFIXES else []
    out: list[Path] = []
    for f in sorted(loc.rglob("*")):
        rel = f.relative_to(loc).parts
        if any(part.startswith(".") for part in rel) or skip == f or skip in f.parents:
            continue
        if f.suffix.lower() in SUFFIXES and f.is_file():
            out.append(f)
            if len(out) > limit:
                break
    return out


def read_inside(f: Path, roots: Roots | Sequence[Path], skip: Path, max_bytes: int) -> bytes | None:
    """The file's bytes when it really lies inside a root (and outside the data dir), is a
    regular file and is at most `max_bytes`; None otherwise."""
    roots = as_roots(roots)
    try:
        real = f.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not roots.allows(real) or inside(real, [skip]):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        proc = Path(f"/proc/self/fd/{fd}")
        if proc.parent.is_dir():  # Linux: where the opened file really is, after any swap
            now = Path(os.readlink(proc))
            if not roots.allows(now) or inside(now, [skip]):
                return None
        chunks, size = [], 0
        while size <= max_bytes:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            size += len(b)
        return b"".join(chunks) if size <= max_bytes else None
    except OSError:
        return None
    finally:
        os.close(fd)


def file_id(f: Path) -> str:
    return blake3.blake3(str(f).encode()).hexdigest()[:20]


def folder_id(d: Path) -> int:
    """A folder's id: 53 bits of a hash of its absolute path (exact in JSON and in a double)."""
    return int.from_bytes(blake3.blake3(b"folder\0" + str(d).encode()).digest()[:8], "big") >> 11


def folder_ids(f: Path, base: Path) -> list[int]:
    """The ids of `f`'s folder and of each enclosing folder up to `base`, innermost first."""
    out, d = [], f.parent
    while True:
        out.append(folder_id(d))
        if d == base or base not in d.parents:
            return out
        d = d.parent


@dataclass
class Tally:
    indexed: int = 0
    skipped: int = 0
    chunks: int = 0
    embedded: int = 0
    pruned: int = 0
    paths: list[str] = field(default_factory=list)


@dataclass
class Plan:
    """A validated reindex call: what will be read, into which collection."""

    collection: str
    listed: list[tuple[Path, list[Path]]]
    roots: Roots
    force: bool
    prune_missing: bool
    multi: bool  # `paths` was given: the answer lists `indexed_paths`


class Reindexer:
    def __init__(self, c: Container, cwd: Path | None = None):
        self.c = c
        self.cwd = cwd or Path.cwd()

    def roots(self, tenant: str | None = None) -> Roots:
        """`tenant`'s roots (None: the shared ones only)."""
        s = self.c.settings
        shared = [r.resolve() for r in s.mcp_reindex_roots]
        bound = {t: [r.resolve() for r in rs] for t, rs in s.mcp_reindex_tenant_roots.items()}
        mine = [*shared, *bound.get(tenant or "", [])] if tenant is not None else shared
        others = [r for t, rs in bound.items() if t != tenant for r in rs if r not in mine]
        return Roots(tuple(dict.fromkeys(mine)), tuple(dict.fromkeys(others)))

    def validate(self, path: str | None, paths: list[str] | None) -> list[str] | None:
        s = self.c.settings
        if paths is not None and len(paths) > s.mcp_reindex_max_paths:
            raise invalid(f"paths has {len(paths)} entries; the limit is {s.mcp_reindex_max_paths}")
        given = chosen(path, paths)
        for g in given or []:
            if not isinstance(g, str) or not g.strip():
                raise invalid("a path must be a non-empty string")
            if len(g) > s.mcp_max_path_chars:
                raise invalid(f"a path is longer than {s.mcp_max_path_chars} characters")
        return given

    def plan(self, path: str | None, paths: list[str] | None, force: bool, collection: str | None,
             prune_missing: bool = True, tenant: str | None = None) -> Plan:
        """Everything that can refuse the call, before anything is written. `tenant`: the
        caller's, whose roots it may read (None: the shared roots only)."""
        roots = self.roots(tenant)
        if not roots:
            raise ToolFailure(FEATURE_DISABLED, "reindex is off on this server for this tenant: set "
                              "VIBE_MCP_REINDEX_ROOTS (shared) or VIBE_MCP_REINDEX_TENANT_ROOTS (per tenant) to "
                              "the folders it may read (a JSON list, one path, or paths separated by "
                              f"{os.pathsep!r})")
        given = self.validate(path, paths)
        col = collection or self.c.settings.mcp_collection
        check_collection(col)
        locs = check_locations(given, self.cwd, roots)
        skip = self.c.settings.data_dir.resolve()
        limit = self.c.settings.mcp_reindex_max_files
        listed = [(loc, files_of(loc, skip, limit)) for loc in locs]
        if sum(len(files) for _, files in listed) > limit:
            raise invalid(f"the locations hold more than {limit} files; reindex fewer at a time")
        return Plan(col, listed, roots, force, prune_missing, bool(paths))

    def run(self, p: Principal, path: str | None, paths: list[str] | None, force: bool,
            collection: str | None, prune_missing: bool = True) -> dict[str, Any]:
        return self.execute(p, self.plan(path, paths, force, collection, prune_missing, p.tenant))

    def execute(self, p: Principal, plan: Plan) -> dict[str, Any]:
        col = plan.collection
        tally = Tally()
        for loc, files in plan.listed:
            self._location(p, col, loc, files, plan.roots, plan.force, tally)
            tally.paths.append(str(loc))
        if plan.prune_missing:
            self._prune(p, col, [loc for loc, _ in plan.listed if loc.is_dir()],
                        {str(f) for _, files in plan.listed for f in files}, tally)
        out: dict[str, Any] = {"indexed_files": tally.indexed, "skipped_files": tally.skipped,
                               "embedding_model": (model := self.c.active_model(p.tenant)),
                               "embedding_backend": model.partition(":")[0] or self.c.settings.embedder,
                               "collection": col, "chunks": tally.chunks, "embedded_chunks": tally.embedded,
                               "pruned_files": tally.pruned}
        if plan.multi:
            out["indexed_paths"] = tally.paths
        return out

    def _prune(self, p: Principal, col: str, folders: list[Path], present: set[str], tally: Tally) -> None:
        """Files indexed from inside a scanned folder that are gone lose all their chunks."""
        if not folders:
            return
        for head in list(file_heads(self.c, p.tenant, col)):
            src = file_source(head)
            if not src or src in present or not head.readable_by(p):
                continue
            if not any(Path(src) == f or f in Path(src).parents for f in folders) or Path(src).exists():
                continue
            for key in file_chunk_keys(head):
                delete_checked(self.c.store, self.c.docs, p, key)  # a chunk it may not read stays
            tally.pruned += 1

    def _location(self, p: Principal, col: str, loc: Path, files: list[Path], roots: Roots, force: bool,
                  tally: Tally) -> None:
        base = loc if loc.is_dir() else loc.parent
        skip = self.c.settings.data_dir.resolve()
        for f in files:
            raw = read_inside(f, roots, skip, self.c.settings.mcp_max_file_bytes)
            if raw is None:  # too big, not a regular file, or really outside the roots
                tally.skipped += 1
                continue
            digest = blake3.blake3(raw).hexdigest()
            fid = file_id(f)
            old = self.c.store.get_doc(DocKey(p.tenant, col, f"{fid}{CHUNK_SEP}0"))
            meta = old.fields.get("meta", {}) if old is not None and old.readable_by(p) else {}
            folders = folder_ids(f, base)
            if (not force and meta.get("file_hash") == digest and meta.get("file") == str(f)
                    and old is not None and old.fields.get("folder_id") == folders):
                tally.skipped += 1
                continue
            docs = self._docs(p, col, fid, str(f.relative_to(base)), raw.decode("utf-8", "replace"), digest,
                              str(f), folders)
            try:
                self._write(p, col, fid, docs, old)
            except VibeError as e:
                if e.code != ErrorCode.FORBIDDEN:
                    raise
                tally.skipped += 1  # chunks another writer stored for readers this key is not among
                continue
            tally.indexed += 1
            tally.chunks += len(docs)
            tally.embedded += core.embed_now(self.c, docs)

    def _docs(self, p: Principal, col: str, fid: str, rel: str, text: str, digest: str,
              source: str, folders: list[int]) -> list[StoredDoc]:
        s = self.c.settings
        chunks = markdown_chunks(text, s.mcp_chunk_chars, s.mcp_chunk_overlap)
        meta = {"file_hash": digest, "chunk_count": len(chunks), "file": source}
        return [self.c.docs.parse(p, col, f"{fid}{CHUNK_SEP}{ch.index}", {
            "path": rel, "heading_path": ch.heading_path, "chunk_index": ch.index, "content": ch.content,
            "folder_id": folders, "meta": meta}) for ch in chunks]

    def _write(self, p: Principal, col: str, fid: str, docs: list[StoredDoc], old: StoredDoc | None) -> None:
        """The file's chunks, under the HTTP API's overwrite rule (services/core/overwrite.py): a
        chunk that exists and that this key may not read refuses the whole file (`forbidden`)."""
        if docs:
            put_checked(self.c.store, self.c.docs, p, docs)
        before = int(old.fields.get("meta", {}).get("chunk_count", 0)) if old is not None and old.readable_by(p) else 0
        for i in range(len(docs), before):  # the file shrank: its tail chunks go (those this key may read)
            delete_checked(self.c.store, self.c.docs, p, DocKey(p.tenant, col, f"{fid}{CHUNK_SEP}{i}"))
