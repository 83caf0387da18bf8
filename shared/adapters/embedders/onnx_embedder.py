"""The local model through onnxruntime: queries off torch.

A query is one short sequence; torch's per-call overhead dominates it, onnxruntime with one
intra-op thread embeds it in a fraction of the time (bench/throughput.py measures both) and
leaves the other core to the lexical leg and to document embedding. Documents go through
onnxruntime too unless `VIBE_EMBED_DOC_RUNTIME=torch` (bench/throughput.py measures both
runtimes' throughput per batch size on the machine at hand).

`build_local` chooses at start-up (`VIBE_EMBED_RUNTIME=auto|onnx|torch`): `auto` uses the
ONNX export when it loads and verifies against sentence-transformers' reference vectors, and
otherwise falls back to the torch embedder with a log line (where the `export` extra installed
torch; a start-up error naming both causes where it did not); `onnx` makes a failure a start-up
error. Never a switch at call time. The vectors are the torch model's (cosine >= 0.999,
checked), so the model id is the same and a store keeps its vectors whichever runtime embeds.
Serving imports no torch on this path: the export of a model with committed reference vectors
is written with numpy (onnx_build.py), and the check reads the vectors from the manifest.

Queries go through their own copy of the graph with the feed-forward and attention-output
weights in int8 blocks (`VIBE_EMBED_QUERY_WEIGHTS=int8`, onnx_export.query_int8: ~27% faster per
query, cosine >= 0.999 to torch, checked at every load; fp32 when it does not verify). Both
graphs are Attention/SkipLayerNorm/BiasGelu ops: written so by onnx_build, or fused so from a
torch trace by onnx_export.fuse.
Tried and left out (same machine, same run): int8 dynamic quantization embeds a query 2.3x
faster but its vectors are as far as cosine 0.89 from torch's (0.95 mean on CISI queries);
int8 Q/K/V projections too (unfused graph: 2.34 ms, lowest cosine 0.99856 on "?"), and
int8 weights computed in fp32 (accuracy level 1 or 2: 18.7 ms, the weights dequantised per call).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.adapters.embedders import onnx_export as ox
from shared.adapters.embedders.local_embedder import model_path
from shared.adapters.embedders.onnx_pipeline import tokenizer_for
from shared.ports import Embedder, EmbedderError
from shared.threads import lower_priority

if TYPE_CHECKING:

    from shared.config import Settings

log = logging.getLogger("vibe.embedder")


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning pool threads burn a core between calls; on a small shared machine that core is
    # the one the read path needs.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    nb = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.asarray(np.sum(na * nb, axis=1))


class OnnxEmbedder:
    runtime = "onnx"
    precision = "fp32"

    def __init__(self, model_name: str, onnx_file: Path, model_dir: Path, cfg: ox.PipelineConfig,
                 batch_size: int = 32, threads: int = 0, documents: Embedder | None = None, doc_nice: int = 5):
        self._name = model_name
        self.batch_size = max(1, batch_size)
        self._tok = tokenizer_for(model_dir, cfg.max_seq_length)
        self.onnx_file = onnx_file
        self.query_file = onnx_file  # use_query_model() may give queries their own graph
        self._threads = threads or max(1, (os.cpu_count() or 1) - 1)
        self._doc_nice = doc_nice
        self._fork_lock = threading.Lock()
        self._start()
        self._names = [i.name for i in self._query.get_inputs()]
        self._dim = int(self._run(self._query, ["dim"]).shape[1])
        self._documents = documents  # torch for documents when configured so

    def _start(self) -> None:
        """Sessions and the document thread of this process. A forked child (a prefork worker
        pool) gets its own: neither onnxruntime's thread pools nor an executor's thread survive
        a fork, and a child waiting on a thread it does not have would wait for ever."""
        self._pid = os.getpid()
        # One intra-op thread per query: measured both ways on 2 shared cores the second thread
        # helped in one run and hurt in another; one keeps a core for the lexical leg.
        self._query = _session(self.query_file, 1)
        # Every document batch runs on this one low-priority thread (whichever worker asked):
        # at most `threads` cores go to documents, the rest stay with the read path.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="vibe-embed-docs",
                                        initializer=lower_priority(self._doc_nice))
        self._docs = (self._query if self._threads == 1 and self.query_file == self.onnx_file
                      else self._pool.submit(_session, self.onnx_file, self._threads).result())

    def _here(self) -> None:
        if os.getpid() != self._pid:
            with self._fork_lock:
                if os.getpid() != self._pid:
                    self._start()

    @property
    def model_id(self) -> str:
        return f"local:{Path(self._name).name}"  # same vectors as the torch embedder (verified)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def document_runtime(self) -> str:
        return "torch" if self._documents is not None else "onnx"

    def _feed(self, ids: list[list[int]], masks: list[list[int]], types: list[list[int]]) -> dict[str, np.ndarray]:
        width = max(len(x) for x in ids)
        arrays = {"input_ids": ids, "attention_mask": masks, "token_type_ids": types}
        out = {}
        for name in self._names:
            a = np.zeros((len(ids), width), dtype=np.int64)
            for row, seq in enumerate(arrays[name]):
                a[row, : len(seq)] = seq
            out[name] = a
        return out

    def _run(self, session: Any, texts: Sequence[str]) -> np.ndarray:
        encs = self._tok.encode_batch(list(texts)) if len(texts) > 1 else [self._tok.encode(texts[0])]
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))  # little padding per chunk
        out = np.empty((len(encs), 0), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = [encs[i] for i in order[start:start + self.batch_size]]
            feed = self._feed([e.ids for e in chunk], [e.attention_mask for e in chunk], [e.type_ids for e in chunk])
            vecs = session.run(None, feed)[0]
            if out.shape[1] == 0:
                out = np.empty((len(encs), vecs.shape[1]), dtype=np.float32)
            out[order[start:start + self.batch_size]] = vecs
        return out

    def verify(self, manifest: dict[str, Any]) -> float:
        """Lowest cosine to the reference over the probes, each alone and all batched."""
        ref = np.asarray(manifest["reference"], dtype=np.float32)
        probes = list(manifest["probes"])
        alone = np.vstack([self._run(self._query, [p]) for p in probes])
        batched = self._run(self._docs, probes)
        return float(min(_cosines(alone, ref).min(), _cosines(batched, ref).min()))

    def use_query_model(self, path: Path, manifest: dict[str, Any]) -> float:
        """Embed queries with the graph at `path` (documents keep the export) if its vectors of
        the probes are within MIN_COSINE of the reference; returns the lowest cosine either way."""
        ref = np.asarray(manifest["reference"], dtype=np.float32)
        session = _session(path, 1)
        got = np.vstack([self._run(session, [p]) for p in manifest["probes"]])
        worst = float(_cosines(got, ref).min())
        if worst >= ox.MIN_COSINE:  # documents keep the fp32 session (shared with queries until now)
            self._query, self.query_file = session, path
            self.precision = "int8-weights" if path != self.onnx_file else "fp32"
        return worst

    def _embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self._documents is not None:
            return self._documents.embed(texts)
        try:
            return self._run(self._docs, texts).tolist()  # type: ignore[no-any-return]
        except Exception as e:
            raise EmbedderError(f"onnx model failed: {e}", transient=False) from e

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self._here()
        return self._pool.submit(self._embed_documents, texts).result()

    def embed_query(self, text: str) -> list[float]:
        self._here()
        try:
            return self._run(self._query, [text])[0].tolist()  # type: ignore[no-any-return]
        except Exception as e:
            raise EmbedderError(f"onnx model failed: {e}", transient=False) from e


def load(model_name: str, cache_root: Path, batch_size: int = 32, threads: int = 0,
         documents: Embedder | None = None, doc_nice: int = 5, query_weights: str = "fp32") -> OnnxEmbedder:
    """The verified ONNX embedder, exporting (or re-exporting a bad cache entry) as needed.

    A cached entry that is corrupted, does not load, or no longer matches its reference
    vectors is exported again, once; a fresh export that fails the check raises.
    `query_weights="int8"`: queries through the entry's int8-weight graph (onnx_export.query_int8)
    when it can be made and verifies; the fp32 graph otherwise, with a log line."""
    model_dir = model_path(model_name)
    cfg = ox.pipeline_config(model_dir)
    entry = ox.entry_dir(cache_root, model_name, model_dir)
    with ox.locked(entry):
        manifest = ox.read_manifest(entry)
        fresh = manifest is None
        for attempt in range(2):
            if manifest is None:
                log.info("exporting %s to ONNX in %s", model_name, entry)
                manifest, fresh = ox.export_in_child(model_name, entry), True
            err: Exception | None = None
            try:
                emb = OnnxEmbedder(model_name, entry / "model.onnx", model_dir, cfg, batch_size, threads, documents,
                                   doc_nice)
                worst = emb.verify(manifest)
            except Exception as e:  # a file onnxruntime cannot load is a bad entry like any other
                worst, err = float("nan"), e
            if worst >= ox.MIN_COSINE:
                log.info("ONNX encoder for %s verified (min cosine %.5f vs sentence-transformers)", model_name, worst)
                if query_weights == "int8":
                    _int8_queries(emb, entry, manifest)
                return emb
            if fresh or attempt:
                raise RuntimeError(f"the ONNX export of {model_name!r} does not match sentence-transformers "
                                   f"(min cosine {worst:.5f}; {err or 'vectors differ'})")
            log.warning("cached ONNX export in %s is unusable (%s); exporting again", entry, err or worst)
            manifest = None
    raise AssertionError("unreachable")


def _int8_queries(emb: OnnxEmbedder, entry: Path, manifest: dict[str, Any]) -> None:
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)  # a line per MatMul otherwise
    try:
        path = ox.query_int8(entry)
        worst = emb.use_query_model(path, manifest)
    except Exception as e:  # the quantizer or its onnx-ir dependency missing, a damaged file
        log.warning("int8-weight query graph unavailable, queries stay fp32: %s", e)
        with contextlib.suppress(OSError):
            (entry / ox.QUERY_INT8_FILE).unlink()  # made again at the next start
        return
    if emb.query_file == path:
        log.info("queries through %s (min cosine %.5f vs sentence-transformers)", path.name, worst)
    else:
        log.warning("int8-weight query graph below %.3f cosine vs sentence-transformers (%.5f): queries stay fp32",
                    ox.MIN_COSINE, worst)


def torch_installed() -> bool:
    """Whether the `export` extra's torch runtime can be imported, without importing it."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))


def build_local(settings: Settings) -> Embedder:
    """The local model for these settings: ONNX queries (and documents) when verified, torch
    otherwise, chosen here once (see the module docstring)."""
    from shared.adapters.embedders.local_embedder import LocalEmbedder

    def torch_embedder() -> LocalEmbedder:
        return LocalEmbedder(settings.embed_model, settings.embed_model_batch_size, settings.embed_threads)

    if settings.embed_runtime == "torch":
        return torch_embedder()
    try:
        documents = torch_embedder() if settings.embed_doc_runtime == "torch" else None
        return load(settings.embed_model, settings.data_dir / "models", settings.embed_model_batch_size,
                    settings.embed_threads, documents, settings.embed_doc_nice, settings.embed_query_weights)
    except Exception as e:
        if settings.embed_runtime == "onnx":
            raise RuntimeError(f"VIBE_EMBED_RUNTIME=onnx but the ONNX encoder is unavailable: {e}") from e
        if not torch_installed():
            raise RuntimeError(f"the ONNX encoder is unavailable ({e}) and the torch fallback is not installed "
                               "(pip install 'vibe-semantic[export]')") from e
        log.warning("ONNX encoder unavailable, using torch for the local model: %s", e)
        return torch_embedder()


def verify_prebuilt(model_name: str) -> None:
    """Load the prebuilt entry as a server does: verified against the reference vectors, with
    its int8 query graph derived and verified (`onnx_export --prebuild` runs this after it
    exports). Raises when the int8 query graph does not verify."""
    entry = ox.PREBUILT_ROOT / f"{Path(model_name).name}-{ox.cache_key(model_name, model_path(model_name))}"
    emb = load(model_name, ox.PREBUILT_ROOT, query_weights="int8")
    if emb.query_file != entry / ox.QUERY_INT8_FILE:
        raise RuntimeError(f"the int8 query graph of {model_name!r} did not verify")


if __name__ == "__main__":
    import sys

    verify_prebuilt(sys.argv[1])
