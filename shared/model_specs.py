"""The models a space may name (`POST /semantic/spaces {"model", "dim"?}`), parsed into a
bounded form before anything is built.

Unchecked, a model string would reach the embedder builders as given: `hash:v1@50000000` would
build a hash embedder of 50M dimensions (4.5 GB per read), and `local:<name>` would be read as a
folder of the server. Here every model is checked by its text alone, so a refusal never depends
on (and never reveals) what exists on the server:

- `hash:v1@<dim>` (or `hash:` with `dim`): 1 to `MAX_DIM` dimensions;
- `openai:<model>`: a model name of the provider (`[A-Za-z0-9._:/@-]`, up to 128 characters);
- `local:<model>`: only a model the operator listed in `VIBE_LOCAL_MODELS` (the configured
  `VIBE_EMBED_MODEL` is always allowed); never a path that was not listed.

A bare name means the configured embedder's kind.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

# The bound the spaces API puts on `dim`, also for dimensions spelled in the model id.
MAX_DIM = 8192
MAX_MODEL_CHARS = 200
_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$")
_HASH_NAME = re.compile(r"^(?:v1)?(?:@(\d{1,9}))?$")

Kind = Literal["hash", "openai", "local"]


@dataclass(frozen=True)
class ModelSpec:
    kind: Kind
    name: str  # hash: "v1"; openai/local: the model's name
    dim: int | None  # hash: always set; others: what the caller asked for, if anything

    @property
    def text(self) -> str:
        """The spec as a model string (`hash:v1@64`, `openai:<name>`, `local:<name>`)."""
        return f"hash:v1@{self.dim}" if self.kind == "hash" else f"{self.kind}:{self.name}"


def _dim(dim: int | None) -> int | None:
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM):
        raise ValueError(f"dim must be an integer from 1 to {MAX_DIM}")
    return dim


def parse_model(model: str, dim: int | None, default_kind: str, default_dim: int,
                local_allowed: Collection[str]) -> ModelSpec:
    """The spec of `model`, or ValueError with a message safe to show the caller."""
    if not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL_CHARS or not model.isprintable():
        raise ValueError(f"model must be 1-{MAX_MODEL_CHARS} printable characters")
    dim = _dim(dim)
    kind, _, name = model.partition(":") if ":" in model else (default_kind, "", model)
    if kind == "hash":
        return _hash(name, dim, default_dim)
    if kind == "local":
        listed = _listed(name, local_allowed)
        if listed is None:
            # decided by the text alone: says nothing of which folders or models the server has
            raise ValueError(f"local model {name[:80]!r} is not allowed here; the operator lists the local "
                             "models spaces may use in VIBE_LOCAL_MODELS")
        return ModelSpec("local", listed, dim)
    if kind == "openai":
        if not _PROVIDER_NAME.match(name):
            raise ValueError("an openai model name is 1-128 letters, digits, '.', '_', ':', '/', '@' or '-'")
        return ModelSpec("openai", name, dim)
    raise ValueError(f"unknown model kind {kind[:20]!r}; use hash:, openai: or local:")


def _listed(name: str, allowed: Collection[str]) -> str | None:
    """The listed model `name` names: itself, or the listed path whose last part it is (a local
    model's id keeps only that part: `local:<folder name>`, as a space's row records it)."""
    if name in allowed:
        return name
    return next((a for a in sorted(allowed) if PurePath(a).name == name and name), None)


def _hash(name: str, dim: int | None, default_dim: int) -> ModelSpec:
    m = _HASH_NAME.match(name)
    if m is None:
        raise ValueError("a hash model is hash:v1@<dimensions>")
    size = int(m.group(1)) if m.group(1) else (dim or default_dim)
    if not 1 <= size <= MAX_DIM:
        raise ValueError(f"a hash model has 1 to {MAX_DIM} dimensions")
    if dim is not None and dim != size:
        raise ValueError(f"dim {dim} contradicts the model's {size} dimensions")
    return ModelSpec("hash", "v1", size)


def local_allowlist(configured: str, listed: Collection[str]) -> frozenset[str]:
    """The local models spaces may name: the operator's list and the configured model (with the
    alias of the packaged default)."""
    out = {configured, *listed}
    if "all-MiniLM-L6-v2" in out or "sentence-transformers/all-MiniLM-L6-v2" in out:
        out |= {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
    return frozenset(out)
