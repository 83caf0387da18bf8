"""The ONNX query encoder: same vectors as torch, batch = single, cached export reused, a bad
cache entry exported again, and the start-up fallback to torch (never at call time). The tests
that run torch itself skip, saying so, where the `export` extra is not installed."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.embedders import onnx_embedder as oe
from shared.adapters.embedders import onnx_export as ox
from shared.adapters.embedders import reference as refs
from shared.adapters.embedders.local_embedder import LocalEmbedder, model_path
from shared.config import Settings

MODEL = "all-MiniLM-L6-v2"
TEXTS = ["How do I fix a flat bicycle tire?", "Repairing a punctured bike tyre",
         "Quarterly revenue grew by eight percent", "", "wing " * 400,
         "Die Grenzschicht löst sich nahe der Hinterkante ab."]
needs_torch = pytest.mark.skipif(not oe.torch_installed(),
                                 reason="the `export` extra (torch, sentence-transformers) is not installed: "
                                        "make setup-export")


def _unsupported(tmp: Path, pooling: dict[str, bool], modules: list[str]) -> Path:
    (tmp / "1_Pooling").mkdir(parents=True)
    (tmp / "modules.json").write_text(json.dumps(
        [{"idx": i, "name": str(i), "path": "1_Pooling" if m == "Pooling" else "", "type": f"x.{m}"}
         for i, m in enumerate(modules)]))
    (tmp / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (tmp / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    return tmp


def test_pipeline_config_refuses_what_the_graph_does_not_reproduce(tmp_path: Path) -> None:
    ok = ox.pipeline_config(_unsupported(tmp_path / "a", {"pooling_mode_mean_tokens": True},
                                         ["Transformer", "Pooling", "Normalize"]))
    assert ok == ox.PipelineConfig(128, "mean", True)
    with pytest.raises(ox.ExportUnsupported, match="pooling"):
        ox.pipeline_config(_unsupported(tmp_path / "b", {"pooling_mode_max_tokens": True}, ["Transformer", "Pooling"]))
    with pytest.raises(ox.ExportUnsupported, match="modules"):
        ox.pipeline_config(_unsupported(tmp_path / "c", {"pooling_mode_mean_tokens": True},
                                        ["Transformer", "Pooling", "Dense"]))
    with pytest.raises(ox.ExportUnsupported):
        ox.pipeline_config(tmp_path / "missing")


def test_a_corrupted_manifest_or_model_file_is_not_a_cache_hit(tmp_path: Path) -> None:
    entry = tmp_path / "e"
    entry.mkdir()
    (entry / "model.onnx").write_bytes(b"graph")
    sha = ox.sha256_of(entry / "model.onnx")
    (entry / "manifest.json").write_text(json.dumps({"format": ox.FORMAT, "sha256": sha}))
    assert ox.read_manifest(entry) is not None
    (entry / "model.onnx").write_bytes(b"grapH")
    assert ox.read_manifest(entry) is None
    (entry / "manifest.json").write_text("{not json")
    assert ox.read_manifest(entry) is None


def test_cache_key_follows_model_and_versions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    a = ox.cache_key("m", tmp_path)
    assert a == ox.cache_key("m", tmp_path) != ox.cache_key("other", tmp_path)
    monkeypatch.setattr(ox, "versions", lambda names: {n: "0.0" for n in names})
    assert ox.cache_key("m", tmp_path) != a


def test_cache_key_of_a_built_export_follows_its_reference_not_torch(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """A graph written from a reference file: a new reference file is a new export, and
    installing or upgrading torch (which plays no part in it) is not."""
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(refs, "stored_digest", lambda name: "d1")
    a = ox.cache_key("m", tmp_path)
    monkeypatch.setattr(refs, "stored_digest", lambda name: "d2")
    assert ox.cache_key("m", tmp_path) != a
    b = ox.cache_key("m", tmp_path)
    real = ox.versions
    monkeypatch.setattr(ox, "versions", lambda names: real(names) | ({"torch": "9.9"} if "torch" in names else {}))
    assert ox.cache_key("m", tmp_path) == b


# -- with the real model ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("onnx-cache"))


@pytest.fixture(scope="module")
def onnx(cache_root: Path) -> oe.OnnxEmbedder:
    return oe.load(MODEL, cache_root)


@pytest.fixture(scope="module")
def torch_model() -> Iterator[LocalEmbedder]:
    yield LocalEmbedder()


def _entry(root: Path) -> Path:
    return ox.entry_dir(root, MODEL, model_path(MODEL))


@needs_torch
@pytest.mark.model
def test_onnx_vectors_match_torch(onnx: oe.OnnxEmbedder, torch_model: LocalEmbedder) -> None:
    assert onnx.dim == torch_model.dim == 384 and onnx.model_id == torch_model.model_id
    a, b = np.asarray(onnx.embed(TEXTS)), np.asarray(torch_model._encode(TEXTS, "fp32"))
    assert np.min(np.sum(a * b, axis=1)) >= 0.999
    q = np.asarray(onnx.embed_query(TEXTS[0]))
    assert float(q @ b[0]) >= 0.999 and abs(float(np.linalg.norm(q)) - 1) < 1e-4
    assert float(a[0] @ a[1]) > float(a[0] @ a[2]) + 0.3  # still the model: paraphrase beats topic change


@pytest.mark.model
def test_the_export_is_fused_into_attention_ops(onnx: oe.OnnxEmbedder, cache_root: Path) -> None:
    """One Attention per layer (eager attention traced, then onnxruntime's fusions): the graph
    a query runs is a few dozen nodes, not the traced graph's hundreds of shape operations; the
    int8 query graph keeps the fusion and quantises the attention output's MatMul."""
    import onnx as onnx_lib

    manifest = json.loads((_entry(cache_root) / "manifest.json").read_text())
    layers = json.loads((model_path(MODEL) / "config.json").read_text())["num_hidden_layers"]
    assert manifest["fused"]["Attention"] == layers
    graph = onnx_lib.load(str(_entry(cache_root) / "model.onnx")).graph
    assert sum(n.op_type == "Attention" for n in graph.node) == layers and len(graph.node) < 100
    query = onnx_lib.load(str(ox.query_int8(_entry(cache_root)))).graph
    quantised = [n.name for n in query.node if n.op_type == "MatMulNBits"]
    assert sum("/attention/output/" in n for n in quantised) == layers and len(quantised) == 3 * layers


@pytest.mark.model
def test_batch_equals_single_whatever_the_batch_size(onnx: oe.OnnxEmbedder) -> None:
    singles = np.asarray([onnx.embed_query(t) for t in TEXTS])
    for size in (1, 2, 32):
        onnx.batch_size = size
        assert np.allclose(np.asarray(onnx.embed(TEXTS)), singles, atol=1e-5)
    onnx.batch_size = 32
    assert onnx.embed([]) == []


@pytest.mark.model
def test_cached_export_is_reused(onnx: oe.OnnxEmbedder, cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = (_entry(cache_root) / "model.onnx").stat()

    def no_export(*_: object) -> None:
        raise AssertionError("a valid cache entry was exported again")

    monkeypatch.setattr(ox, "export_in_child", no_export)
    again = oe.load(MODEL, cache_root)
    after = (_entry(cache_root) / "model.onnx").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert np.allclose(again.embed_query("rotor icing"), onnx.embed_query("rotor icing"), atol=1e-6)


@pytest.mark.model
@pytest.mark.parametrize("damage", ["truncate", "reference"])
def test_a_bad_cache_entry_is_exported_again(onnx: oe.OnnxEmbedder, cache_root: Path, tmp_path: Path,
                                             damage: str) -> None:
    root = tmp_path / "models"
    shutil.copytree(_entry(cache_root), _entry(root))
    entry = _entry(root)
    if damage == "truncate":  # a half-written file: its sha256 no longer matches
        data = (entry / "model.onnx").read_bytes()
        (entry / "model.onnx").write_bytes(data[: len(data) // 2])
    else:  # file intact but its vectors no longer match the torch reference
        manifest = json.loads((entry / "manifest.json").read_text())
        manifest["reference"] = [list(reversed(v)) for v in manifest["reference"]]
        (entry / "manifest.json").write_text(json.dumps(manifest))
    emb = oe.load(MODEL, root)
    assert ox.read_manifest(entry) is not None
    assert json.loads((entry / "manifest.json").read_text())["reference"] == \
        json.loads((_entry(cache_root) / "manifest.json").read_text())["reference"]
    assert np.allclose(emb.embed_query("rotor icing"), onnx.embed_query("rotor icing"), atol=1e-5)


@needs_torch
@pytest.mark.model
def test_start_up_falls_back_to_torch_with_a_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(ox, "export_in_child", broken)
    with caplog.at_level(logging.WARNING, logger="vibe.embedder"):
        emb = oe.build_local(Settings(data_dir=tmp_path, embedder="local"))
    assert isinstance(emb, LocalEmbedder)
    assert any("exporter exploded" in r.getMessage() for r in caplog.records)
    with pytest.raises(RuntimeError, match="VIBE_EMBED_RUNTIME=onnx"):
        oe.build_local(Settings(data_dir=tmp_path, embedder="local", embed_runtime="onnx"))


def test_without_torch_a_failed_onnx_encoder_is_a_start_up_error_naming_both(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A light install has no torch to fall back to: `auto` says why ONNX failed and how to get
    the fallback, instead of an ImportError from deep inside it."""
    def broken(*_: object) -> None:
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(ox, "export_in_child", broken)
    monkeypatch.setattr(oe, "torch_installed", lambda: False)
    with pytest.raises(RuntimeError, match=r"exporter exploded.*vibe-semantic\[export\]"):
        oe.build_local(Settings(data_dir=tmp_path, embedder="local"))


@pytest.mark.model
def test_settings_choose_the_runtime(cache_root: Path, onnx: oe.OnnxEmbedder, tmp_path: Path) -> None:
    shutil.copytree(_entry(cache_root), _entry(tmp_path / "models"))
    auto = oe.build_local(Settings(data_dir=tmp_path, embedder="local"))
    assert isinstance(auto, oe.OnnxEmbedder) and auto.document_runtime == "onnx"
    default = oe.build_local(Settings(data_dir=tmp_path, embedder="local"))
    assert isinstance(default, oe.OnnxEmbedder) and default.batch_size == 4
    s = Settings(data_dir=tmp_path, embedder="local", embed_batch_size=32, embed_model_batch_size=3)
    assert oe.build_local(s).batch_size == 3  # type: ignore[attr-defined]


@needs_torch
@pytest.mark.model
def test_settings_choose_the_torch_runtime(cache_root: Path, onnx: oe.OnnxEmbedder, tmp_path: Path) -> None:
    """`embed_model_batch_size` sizes the local model's forward passes on both runtimes;
    `embed_batch_size` stays the pipeline's batch (store writes, provider calls)."""
    shutil.copytree(_entry(cache_root), _entry(tmp_path / "models"))
    auto = oe.build_local(Settings(data_dir=tmp_path, embedder="local"))
    assert isinstance(oe.build_local(Settings(data_dir=tmp_path, embedder="local", embed_runtime="torch")),
                      LocalEmbedder)
    mixed = oe.build_local(Settings(data_dir=tmp_path, embedder="local", embed_doc_runtime="torch"))
    assert isinstance(mixed, oe.OnnxEmbedder) and mixed.document_runtime == "torch"
    assert float(np.dot(mixed.embed(["rotor icing"])[0], auto.embed_query("rotor icing"))) >= 0.999
    s = Settings(data_dir=tmp_path, embedder="local", embed_batch_size=32, embed_model_batch_size=3)
    torch_docs = oe.build_local(s.model_copy(update={"embed_runtime": "torch"}))
    assert isinstance(torch_docs, LocalEmbedder) and torch_docs.batch_size == 3


@pytest.mark.model
def test_documents_run_on_a_lower_priority_thread_queries_do_not(onnx: oe.OnnxEmbedder,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import threading

    seen: dict[str, int] = {}
    run = onnx._run

    def spy(session: object, texts: list[str]) -> np.ndarray:
        tid = threading.get_native_id()
        seen["docs" if len(texts) > 1 else "query"] = os.getpriority(os.PRIO_PROCESS, tid)
        return run(session, texts)

    monkeypatch.setattr(onnx, "_run", spy)
    onnx.embed(["one document", "another document"])
    onnx.embed_query("a query")
    assert seen["docs"] == min(19, seen["query"] + 5)


@pytest.mark.model
def test_a_forked_child_gets_its_own_sessions_and_document_thread(onnx: oe.OnnxEmbedder) -> None:
    """A prefork worker pool forks after the embedder exists: the parent's document thread does
    not exist in the child, which must not wait on it."""
    import os
    import time

    want = onnx.embed(["rotor icing", "the parent's document thread is running now"])[0]
    pid = os.fork()
    if pid == 0:  # the child: exit code says what happened, nothing else may run here
        try:
            ok = (np.allclose(onnx.embed(["rotor icing"])[0], want, atol=1e-5)
                  and np.allclose(onnx.embed_query("rotor icing"), want, atol=1e-5))
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung waiting for the parent's document thread")


@pytest.mark.model
def test_int8_weight_queries_stay_within_the_bar_and_documents_stay_fp32(onnx: oe.OnnxEmbedder, cache_root: Path,
                                                                         tmp_path: Path) -> None:
    """Against sentence-transformers' vectors of the probes (the committed reference) and the
    verified fp32 graph's of other text."""
    root = tmp_path / "models"
    shutil.copytree(_entry(cache_root), _entry(root))
    emb = oe.load(MODEL, root, query_weights="int8")
    made = _entry(root) / ox.QUERY_INT8_FILE
    assert emb.query_file == made and emb.precision == "int8-weights" and onnx.precision == "fp32"
    ref = refs.load(MODEL, model_path(MODEL), ox.PROBES)
    assert ref is not None
    probes = np.asarray([emb.embed_query(p) for p in ref.probes])
    assert oe._cosines(probes, np.asarray(ref.vectors)).min() >= ox.MIN_COSINE
    queries = np.asarray([emb.embed_query(t) for t in TEXTS])
    assert np.min(np.sum(queries * np.asarray(onnx.embed(TEXTS)), axis=1)) >= ox.MIN_COSINE
    assert float(queries[0] @ queries[1]) > float(queries[0] @ queries[2]) + 0.3
    assert np.allclose(np.asarray(emb.embed(TEXTS)), np.asarray(onnx.embed(TEXTS)), atol=1e-5)  # documents: fp32
    stamp = made.stat().st_mtime_ns
    again = oe.load(MODEL, root, query_weights="int8")
    assert made.stat().st_mtime_ns == stamp and again.query_file == made  # made once, then reused
    assert oe.build_local(Settings(data_dir=tmp_path, embedder="local", embed_query_weights="fp32")).precision == "fp32"


@pytest.mark.model
def test_a_damaged_int8_query_graph_leaves_queries_fp32_with_a_log_line(onnx: oe.OnnxEmbedder, cache_root: Path,
                                                                        tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "models"
    shutil.copytree(_entry(cache_root), _entry(root))
    (_entry(root) / ox.QUERY_INT8_FILE).write_bytes(b"not a model")
    with caplog.at_level(logging.WARNING, logger="vibe.embedder"):
        emb = oe.load(MODEL, root, query_weights="int8")
    assert emb.query_file == _entry(root) / "model.onnx" and emb.precision == "fp32"
    assert any("queries stay fp32" in r.getMessage() for r in caplog.records)
    assert not (_entry(root) / ox.QUERY_INT8_FILE).exists()  # made again at the next start
    assert np.allclose(emb.embed_query("rotor icing"), onnx.embed_query("rotor icing"), atol=1e-6)
