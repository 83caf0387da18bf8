"""Cold store in files: one small file per {tenant, space, content hash}, in the
data dir or on a volume every process mounts (the distributed profile's workers rehydrate).

A file is a 12-byte header (magic, codec, dimension, int8 scale) and the codes:
- `float16`: 2 bytes a dimension; cosine to the original >= 0.9999 for unit vectors;
- `int8`: 1 byte a dimension with one float32 scale per vector (symmetric, max-abs), which
  keeps the ranking (recall@10 measured in `bench lifecycle`).
Writes go to a temporary name and are renamed into place, so a reader sees a whole file or
none; a torn or foreign file decodes to None and the caller re-embeds instead of trusting it.
Tenants are hashed into the path, so file names reveal no tenant; no text and no ACL is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np

MAGIC = b"VC"
_HEADER = struct.Struct("<2sBxIf")  # magic, codec, pad, dim, scale
CODECS = {"float16": 1, "int8": 2}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def encode(vector: Sequence[float], codec: str) -> bytes:
    v = np.asarray(vector, dtype=np.float32)
    if codec == "float16":
        return _HEADER.pack(MAGIC, CODECS[codec], len(v), 1.0) + v.astype("<f2").tobytes()
    if codec == "int8":
        peak = float(np.max(np.abs(v))) if len(v) else 0.0
        scale = peak / 127.0 if peak > 0 else 1.0
        codes = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
        return _HEADER.pack(MAGIC, CODECS[codec], len(v), scale) + codes.tobytes()
    raise ValueError(f"unknown cold codec {codec!r}")


def decode(raw: bytes) -> list[float] | None:
    if len(raw) < _HEADER.size:
        return None
    magic, codec, dim, scale = _HEADER.unpack_from(raw)
    body = raw[_HEADER.size:]
    if magic != MAGIC:
        return None
    if codec == CODECS["float16"] and len(body) == 2 * dim:
        return np.frombuffer(body, dtype="<f2").astype(np.float32).tolist()
    if codec == CODECS["int8"] and len(body) == dim:
        return (np.frombuffer(body, dtype=np.int8).astype(np.float32) * np.float32(scale)).tolist()
    return None


def tenant_key(tenant: str) -> str:
    """A tenant as the cold store names it (a directory here, a column in the packed table):
    a digest, so no name on disk reveals a tenant."""
    return hashlib.sha256(tenant.encode()).hexdigest()[:24]


def space_dir(space: str) -> str:
    """The directory of a space: one per space, never shared (a space holds one model and
    dimension, so a retired space's vectors never meet another model's). A name of file-safe
    characters is its own directory (so existing directories keep their names); any other
    (`core@v2`) gets the safe form plus a digest of the exact name after a `+`, which no
    file-safe name contains: `core@v2` and `core_v2` cannot share a directory."""
    safe = _SAFE.sub("_", space)
    return space if safe == space else f"{safe}+{hashlib.sha256(space.encode()).hexdigest()[:12]}"


def legacy_space_dir(space: str) -> str:
    """The directory of a space in the layout that did not keep names apart: its file-safe form
    alone, which `core@v2` and `core_v2` shared."""
    return _SAFE.sub("_", space)


def _named(stem: str, digest_dir: str) -> str | None:
    """The content hash a cold file named `stem` in `digest_dir` was written for (`hashes`)."""
    scheme, sep, rest = stem.partition("_")
    found = [h for h in (stem, f"{scheme}:{rest}" if sep else "")
             if h and _SAFE.sub("_", h) == stem and hashlib.sha256(h.encode()).hexdigest()[:2] == digest_dir]
    return found[0] if len(found) == 1 else None


class FileColdStore:
    def __init__(self, root: Path, codec: str = "float16"):
        if codec not in CODECS:
            raise ValueError(f"unknown cold codec {codec!r}; choose one of {sorted(CODECS)}")
        self.root = root
        self.codec = codec

    def _path(self, tenant: str, space: str, content_hash: str) -> Path:
        tenant_dir = tenant_key(tenant)
        name = _SAFE.sub("_", content_hash)
        digest = hashlib.sha256(content_hash.encode()).hexdigest()
        return self.root / space_dir(space) / tenant_dir / digest[:2] / f"{name}.{self.codec}"

    def put(self, tenant: str, space: str, content_hash: str, vector: Sequence[float]) -> tuple[str, int]:
        path = self._path(tenant, space, content_hash)
        data = encode(vector, self.codec)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own per writer: two threads of one process (a tick and POST
        # /semantic/evict) putting the same vector must not rename each other's temporary away.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return str(path.relative_to(self.root)), len(data)

    def get(self, tenant: str, space: str, content_hash: str) -> list[float] | None:
        for codec in (self.codec, *(c for c in CODECS if c != self.codec)):  # the codec may have changed
            path = self._path(tenant, space, content_hash).with_suffix(f".{codec}")
            try:
                return decode(path.read_bytes())
            except OSError:
                continue
        return None

    def delete(self, tenant: str, space: str, content_hash: str) -> None:
        for codec in CODECS:
            self._path(tenant, space, content_hash).with_suffix(f".{codec}").unlink(missing_ok=True)

    def hashes(self, tenant: str, space: str, after: str, limit: int) -> list[str]:
        """A page of the content hashes whose files the tenant's space holds (every codec; a
        listing of its directory per page). A file name keeps the hash's file-safe form only, so a
        name is read back where the digest directory confirms it: the name itself (a file-safe
        hash) or `scheme:` + the rest (the service's `blake3:<hex>`, named `blake3_<hex>`); a file
        that fits neither or both is not listed, so never deleted by a sweep."""
        found: set[str] = set()
        try:
            with os.scandir(self.root / space_dir(space) / tenant_key(tenant)) as dirs:
                for d in dirs:
                    if not d.is_dir(follow_symlinks=False):
                        continue
                    with os.scandir(d.path) as files:
                        for f in files:
                            stem, _, codec = f.name.rpartition(".")
                            if f.name.startswith(".") or codec not in CODECS:
                                continue  # a writer's temporary, or a foreign file
                            h = _named(stem, d.name)
                            if h is not None and h > after:
                                found.add(h)
        except FileNotFoundError:  # nothing evicted there yet
            return []
        return sorted(found)[:limit]

    def close(self) -> None:
        """Nothing held open."""

    def adopt_legacy(self, spaces: Collection[str], taken: Callable[[str], bool]) -> dict[str, int]:
        """Move the cold files that `spaces` (every space the store knows) wrote in the layout
        that did not keep names apart to their current directory: there a name that is not
        file-safe (`core@v2`) wrote them to its safe form (`core_v2`), where they are not read (a
        touch re-embeds instead of
        rehydrating) nor deleted (retention, pruning). A legacy directory is adopted only when
        one space claims it: not when two known spaces share the safe form, nor when
        `taken(safe form)` says a file-safe space of that name exists (its files live there
        now), since which file was whose cannot be told. Each tenant directory is renamed only
        where the current directory has none for that tenant: files written since win, and a
        rename is atomic, so two processes starting together move each directory once.
        Returns the tenant directories moved, by space."""
        claims: dict[str, set[str]] = {}
        for space in spaces:
            claims.setdefault(legacy_space_dir(space), set()).add(space)
        moved: dict[str, int] = {}
        for legacy, owners in sorted(claims.items()):
            space = next(iter(owners))
            old = self.root / legacy
            if len(owners) > 1 or space_dir(space) == legacy or not old.is_dir() or taken(legacy):
                continue
            n = self._adopt(old, self.root / space_dir(space))
            if n:
                moved[space] = n
        return moved

    @staticmethod
    def _adopt(old: Path, new: Path) -> int:
        n = 0
        for tenant in sorted(old.iterdir()):
            if (new / tenant.name).exists():
                continue  # written since the change: kept; the old files stay where they are
            new.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tenant, new / tenant.name)
            except OSError:  # another process moved it or wrote there meanwhile
                continue
            n += 1
        with contextlib.suppress(OSError):  # not empty when a tenant's current files won
            old.rmdir()
        return n
