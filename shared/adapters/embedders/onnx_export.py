"""ONNX export of a sentence-transformers model, cached in the data dir and checked before use.

The export runs once per (model, weights, library versions), in a child process
(`python -m shared.adapters.embedders.onnx_export MODEL OUT_DIR`) so the serving process keeps
none of its memory: the query encoder's memory stays the ONNX session's.

Two exporters, one cache entry layout. A model with a committed reference file
(`reference/<model>.json`, reference.py: sentence-transformers' own vectors of `PROBES` for
these exact weights) is written by onnx_build.py from its safetensors with numpy, no torch: that
is all-MiniLM-L6-v2, the default, and how a light install (no `export` extra) serves. Any other
model is traced with torch (`export_torch`, the `export` extra: torch + sentence-transformers),
which computes its reference vectors at export time.

A cache entry is a directory `<cache root>/<model>-<key>/` holding `model.onnx` and
`manifest.json`: the file's sha256 (a truncated or corrupted file is re-exported, not loaded)
and the reference vectors of `PROBES`. The runtime compares its own vectors of the probes with
those (cosine >= MIN_COSINE, each probe alone and all of them as one padded batch) every time it
loads the file, so a cached export is verified against sentence-transformers without torch.

The graph computes what the model's sentence-transformers modules compute: transformer, then
the pooling its `1_Pooling/config.json` names (mean or CLS), then L2 normalisation when
`modules.json` lists a Normalize module. Inputs are truncated to its `max_seq_length`.

Both exporters end in the same fused graph: a BERT layer is Attention, SkipLayerNormalization,
BiasGelu and three MatMuls, 62 nodes for all-MiniLM-L6-v2. onnx_build writes it so directly;
the torch path traces with eager attention and then runs onnxruntime's transformer optimizer
(`fuse`), which turns the traced graph's 350 nodes (most of them shape arithmetic) into the
same ops. The default (SDPA) attention traces to a mask pattern the optimizer does not
recognise: only SkipLayerNorm and BiasGelu fused, which changed nothing measurable. With the
fused graph a short query takes 2.41 against 2.71 ms (int8 query graphs, interleaved, 450
calls each) and documents embed at the same rate (21.4 vs 21.3 docs/s on one thread, 42.7 vs
39.2 on two); vectors within cosine 0.9999999 of the traced graph's. A model the optimizer
does not fuse keeps the traced graph: the check against the reference decides either way.

Prebuilt entries: `python -m shared.adapters.embedders.onnx_export --prebuild MODEL` (run by
deploy/Dockerfile at image build time) writes the entry, verified and with its int8 query graph,
under `PREBUILT_ROOT` inside the installation (`<sys.prefix>/share/vibe-semantic/onnx`), beside
the very libraries its cache key names. `entry_dir` prefers such an entry to the data dir's, so
every container of the image (API, each worker process, `--scale worker=N`, on any host) loads
the one export instead of exporting at its start (a private copy per container otherwise:
workers mount no data dir). A prebuilt entry is read-only: it is used without the lock, and one
that fails its check is not re-exported (the runtime falls back to torch where it is installed,
logged). Another model, or other library versions, find no prebuilt entry and are exported into
the data dir as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared.adapters.embedders import reference as references
from shared.adapters.embedders.onnx_pipeline import (
    _VERSIONED,
    PROBES,
    ExportUnsupported,
    PipelineConfig,
    pipeline_config,
    tokenizer_for,
    versions,
)

FORMAT = 3  # bump when the graph or the manifest changes: old cache entries are then ignored
OPSET = 17
MIN_COSINE = 0.999
EXPORT_TIMEOUT_SECONDS = 900.0
# What shapes or runs a graph written from a reference file: torch and transformers play no part.
_BUILT = ("onnx", "onnxruntime", "tokenizers")
_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "config.json", "tokenizer.json", "modules.json")

def cache_key(model_name: str, model_dir: Path) -> str:
    """Model id + its weight files (name and size) + the exporter (the reference file's digest
    when there is one) + the versions of every library that shapes the graph or runs it: a
    change of any of them means a new export, never a stale one."""
    weights = {f: (model_dir / f).stat().st_size for f in _WEIGHTS if (model_dir / f).exists()}
    digest = references.stored_digest(model_name)
    blob = json.dumps({"model": model_name, "format": FORMAT, "opset": OPSET, "reference": digest,
                       "versions": versions(_BUILT if digest else _VERSIONED), "weights": weights}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Inside the installation (the image's /opt/venv), not the data dir: a volume would keep an old
# export across image rebuilds, and a worker mounts none.
PREBUILT_ROOT = Path(sys.prefix) / "share" / "vibe-semantic" / "onnx"


def entry_dir(cache_root: Path, model_name: str, model_dir: Path) -> Path:
    """The prebuilt entry of this exact (model, weights, versions) when the installation has one
    (complete: its manifest is written last), else the entry under `cache_root`."""
    name = f"{Path(model_name).name}-{cache_key(model_name, model_dir)}"
    prebuilt = PREBUILT_ROOT / name
    return prebuilt if (prebuilt / "manifest.json").is_file() else cache_root / name


sha256_of = references.sha256_of


@contextlib.contextmanager
def locked(entry: Path) -> Iterator[None]:
    """Processes sharing a data dir (API, worker pool children) export one at a time; the
    others then find the finished entry."""
    if entry.parent == PREBUILT_ROOT and (entry / "manifest.json").is_file():
        yield  # complete and never written at run time (root-owned in the image): nothing to wait for
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    with (entry.parent / f"{entry.name}.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_manifest(entry: Path) -> dict[str, Any] | None:
    """The manifest when it matches its model file; None for a missing or corrupted entry."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        if manifest.get("format") != FORMAT or sha256_of(entry / "model.onnx") != manifest.get("sha256"):
            return None
        return dict(manifest)
    except (OSError, ValueError):
        return None


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[3])  # where `shared` is importable from
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": path}


def export_in_child(model_name: str, entry: Path) -> dict[str, Any]:
    """Export in a child process (the weights' copies and, on the torch path, torch stay out of
    the caller); returns the new manifest."""
    done = subprocess.run([sys.executable, "-m", "shared.adapters.embedders.onnx_export", model_name, str(entry)],
                          capture_output=True, text=True, env=_child_env(), timeout=EXPORT_TIMEOUT_SECONDS)
    manifest = read_manifest(entry)
    if done.returncode != 0 or manifest is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"ONNX export of {model_name!r} failed (exit {done.returncode}): {' | '.join(tail)}")
    return manifest


# The query encoder's own copy of the graph: the feed-forward and attention-output MatMuls'
# weights (3/4 of the transformer's) as int8 in blocks of 16 along K, symmetric, computed in int8
# per block (onnxruntime's MatMulNBits, accuracy level 4); embeddings, the Q/K/V projections
# (inside the fused Attention) and LayerNorm stay fp32. Adding the attention output's MatMul:
# 2.41 vs 2.50 ms a short query, lowest cosine to the fp32 graph over 681 Cranfield and CISI
# queries, their 2-6-word prefixes and one-token strings 0.99945 vs 0.99939.
# A query is one short sequence, so its time goes to streaming the weights through the caches.
# Measured at equal load, interleaved, 150 two-word queries: 3.36 vs 4.58 ms p50, lowest cosine
# to the fp32 graph 0.99944 (the empty string; probes 0.9995+). Quantising the attention
# MatMuls too was faster (2.92 ms) but the empty string fell to 0.99871; the dynamic int8
# quantisation tried before (activations per tensor) reached only 0.89. Checked against the
# reference vectors of the probes on every load like the export itself.
QUERY_INT8_FILE = "query-w8.onnx"
QUERY_INT8_BLOCK = 16


def query_int8(entry: Path) -> Path:
    """`entry/QUERY_INT8_FILE`, derived from `entry/model.onnx` once (the caller holds the
    entry's lock). Needs `onnx` and `onnx-ir`, which onnxruntime's quantizer imports."""
    import onnx
    from onnxruntime.quantization import matmul_nbits_quantizer as mnb

    out = entry / QUERY_INT8_FILE
    if out.exists():
        return out
    cfg = mnb.DefaultWeightOnlyQuantConfig(block_size=QUERY_INT8_BLOCK, is_symmetric=True, bits=8, accuracy_level=4)
    model = onnx.load(str(entry / "model.onnx"))
    attention = [n.name for n in model.graph.node if n.op_type == "MatMul" and "/attention/self/" in n.name]
    quantizer = mnb.MatMulNBitsQuantizer(model, nodes_to_exclude=attention, algo_config=cfg)
    quantizer.process()
    tmp = entry / f"{out.name}.{os.getpid()}.tmp"
    quantizer.model.save_model_to_file(str(tmp), use_external_data_format=False)
    os.replace(tmp, out)
    return out


# -- the export itself (child process) -------------------------------------------------------


def _module(model: Any, cfg: PipelineConfig) -> Any:
    import torch

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
            if cfg.pooling == "cls":
                vec = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(vec, p=2.0, dim=1) if cfg.normalize else vec

    return Pipeline().eval()


def fuse(path: Path, model_dir: Path) -> dict[str, int]:
    """Fuse the traced BERT graph at `path` in place (onnxruntime's transformer optimizer);
    returns the fused operators' counts, empty when nothing was fused (the file is then left
    as traced)."""
    from onnxruntime.transformers import optimizer

    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") not in ("bert", "roberta", "distilbert", "xlm-roberta", "mpnet"):
        return {}
    fused = optimizer.optimize_model(str(path), model_type="bert", num_heads=int(config["num_attention_heads"]),
                                     hidden_size=int(config["hidden_size"]), opt_level=0)
    stats = {k: int(v) for k, v in fused.get_fused_operator_statistics().items() if v}
    if not stats.get("Attention"):
        return {}  # the pattern was not recognised: the traced graph is kept whole
    fused.save_model_to_file(str(path), use_external_data_format=False)
    return stats


def export(model_name: str, entry: Path) -> None:
    """Write `entry/model.onnx` and `entry/manifest.json`: from the safetensors with numpy when
    the model has a committed reference (a reference file that does not hold raises
    ReferenceRefused: it is never silently replaced by torch), with torch otherwise."""
    from shared.adapters.embedders.local_embedder import model_path

    ref = references.load(model_name, model_path(model_name), PROBES)
    if ref is None:
        export_torch(model_name, entry)
    else:
        export_numpy(model_name, entry, ref)


def export_numpy(model_name: str, entry: Path, ref: references.Reference) -> None:
    """The graph written by onnx_build (no torch), checked later against `ref`'s vectors."""
    from shared.adapters.embedders import onnx_build
    from shared.adapters.embedders.local_embedder import model_path

    model_dir = model_path(model_name)
    cfg = pipeline_config(model_dir)
    entry.mkdir(parents=True, exist_ok=True)
    tmp = entry / f"model.onnx.{os.getpid()}.tmp"
    fusions = onnx_build.build(model_dir, cfg, tmp)
    _commit(entry, tmp, {"model": model_name, "exporter": "numpy", "versions": versions(_BUILT),
                         "pipeline": cfg.__dict__, "fused": fusions, "probes": ref.probes,
                         "reference": ref.vectors,
                         "reference_file": {"name": references.path_for(model_name).name, "digest": ref.digest,
                                            "weights_sha256": ref.weights_sha256}})


def export_torch(model_name: str, entry: Path, fused: bool = True) -> None:
    """Trace the model with torch; its reference vectors are sentence-transformers' at export time.
    `fused=False` keeps the traced graph of the default attention, to compare against the fused one."""
    import numpy as np

    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ExportUnsupported(f"{model_name!r} has no committed reference vectors ({references.path_for(model_name)})"
                                f" and its export needs torch: pip install 'vibe-semantic[export]' ({e})") from e

    from shared.adapters.embedders.local_embedder import model_path

    model_dir = model_path(model_name)
    cfg = pipeline_config(model_dir)
    # Eager attention: the pattern onnxruntime's optimizer fuses (see the module docstring).
    st = SentenceTransformer(str(model_dir), device="cpu",
                             model_kwargs={"attn_implementation": "eager"} if fused else None)
    tok = tokenizer_for(model_dir, cfg.max_seq_length)
    encs = tok.encode_batch(PROBES[:2])
    width = max(len(e.ids) for e in encs)
    dummy = tuple(torch.tensor([getattr(e, f) + [0] * (width - len(e.ids)) for e in encs])
                  for f in ("ids", "attention_mask", "type_ids"))
    entry.mkdir(parents=True, exist_ok=True)
    tmp = entry / f"model.onnx.{os.getpid()}.tmp"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"embedding": {0: "batch"}}
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow on shapes
        torch.onnx.export(_module(st[0].auto_model, cfg), dummy, str(tmp), input_names=names,
                          output_names=["embedding"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        reference = st.encode(PROBES, normalize_embeddings=False, convert_to_numpy=True, show_progress_bar=False)
    fusions = fuse(tmp, model_dir) if fused else {}
    _commit(entry, tmp, {"model": model_name, "exporter": "torch", "versions": versions(),
                         "pipeline": cfg.__dict__, "fused": fusions, "probes": PROBES,
                         "reference": np.asarray(reference, dtype=np.float32).round(7).tolist()})


def _commit(entry: Path, tmp: Path, manifest: dict[str, Any]) -> None:
    """Move the graph into place, then write its manifest: an entry with a manifest is complete."""
    manifest = {"format": FORMAT, "sha256": sha256_of(tmp), **manifest}
    os.replace(tmp, entry / "model.onnx")
    mtmp = entry / f"manifest.json.{os.getpid()}.tmp"
    mtmp.write_text(json.dumps(manifest))
    os.replace(mtmp, entry / "manifest.json")


def prebuild(model_name: str) -> Path:
    """Export `model_name` into PREBUILT_ROOT (in this process: nothing runs beside it at build
    time), then load it as a server does (`onnx_embedder.verify_prebuilt`, in a child process:
    the loader is the layer above this module), which verifies it against the reference vectors
    and derives the int8 query graph, so nothing is left to write at run time. Raises when
    either is not usable."""
    from shared.adapters.embedders.local_embedder import model_path

    entry = PREBUILT_ROOT / f"{Path(model_name).name}-{cache_key(model_name, model_path(model_name))}"
    if read_manifest(entry) is None:
        export(model_name, entry)
    done = subprocess.run([sys.executable, "-m", "shared.adapters.embedders.onnx_embedder", model_name],
                          capture_output=True, text=True, env=_child_env(), timeout=EXPORT_TIMEOUT_SECONDS)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the prebuilt ONNX export of {model_name!r} did not verify: {' | '.join(tail)}")
    return entry


if __name__ == "__main__":
    if sys.argv[1] == "--prebuild":
        print(prebuild(sys.argv[2]))
    elif "--traced" in sys.argv[3:]:
        export_torch(sys.argv[1], Path(sys.argv[2]), fused=False)
    elif "--torch" in sys.argv[3:]:
        export_torch(sys.argv[1], Path(sys.argv[2]))
    else:
        export(sys.argv[1], Path(sys.argv[2]))
