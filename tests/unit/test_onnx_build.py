"""The torch-free ONNX builder (onnx_build.py) and the committed reference vectors it is checked
against (reference.py): the graph reproduces sentence-transformers, a reference that does not
hold is refused, and serving the local model never imports torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.embedders import onnx_build as ob
from shared.adapters.embedders import onnx_embedder as oe
from shared.adapters.embedders import onnx_export as ox
from shared.adapters.embedders import reference as refs
from shared.adapters.embedders.local_embedder import model_path

MODEL = "all-MiniLM-L6-v2"
REPO = Path(__file__).resolve().parents[2]
TEXTS = ["How do I fix a flat bicycle tire?", "Repairing a punctured bike tyre", "", "wing " * 400,
         "Die Grenzschicht löst sich nahe der Hinterkante ab.", "SELECT 1; -- x^2"]
needs_torch = pytest.mark.skipif(not oe.torch_installed(),
                                 reason="the `export` extra (torch, sentence-transformers) is not installed: "
                                        "make setup-export")


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.asarray(np.sum(a * b, axis=1))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = Path(tmp_path_factory.mktemp("built")) / "model.onnx"
    model_dir = model_path(MODEL)
    ob.build(model_dir, ox.pipeline_config(model_dir), out)
    return out


@pytest.fixture(scope="module")
def encoder(built: Path) -> oe.OnnxEmbedder:
    model_dir = model_path(MODEL)
    return oe.OnnxEmbedder(MODEL, built, model_dir, ox.pipeline_config(model_dir), threads=1)


@pytest.fixture(scope="module")
def committed() -> refs.Reference:
    ref = refs.load(MODEL, model_path(MODEL), ox.PROBES)
    assert ref is not None, "the default model has committed reference vectors"
    return ref


# -- the graph against sentence-transformers' vectors, without torch ------------------------


@pytest.mark.model
def test_the_built_graph_reproduces_the_committed_reference(encoder: oe.OnnxEmbedder,
                                                            committed: refs.Reference) -> None:
    """Each probe alone and all of them as one padded batch (the mask at work: the probes'
    lengths differ and one is truncated to max_seq_length)."""
    want = np.asarray(committed.vectors)
    alone = np.vstack([encoder._run(encoder._query, [p]) for p in committed.probes])
    encoder.batch_size = len(committed.probes)
    batched = encoder._run(encoder._docs, committed.probes)
    assert _cos(alone, want).min() >= ox.MIN_COSINE
    assert _cos(batched, want).min() >= ox.MIN_COSINE
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)  # Normalize is in modules.json
    assert encoder.verify({"probes": committed.probes, "reference": committed.vectors}) >= ox.MIN_COSINE


@pytest.mark.model
def test_the_built_graph_is_the_fused_form(built: Path) -> None:
    import onnx

    layers = json.loads((model_path(MODEL) / "config.json").read_text())["num_hidden_layers"]
    graph = onnx.load(str(built)).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("Attention") == ops.count("BiasGelu") == layers
    assert ops.count("SkipLayerNormalization") == 2 * layers and ops.count("EmbedLayerNormalization") == 1
    assert [i.name for i in graph.input] == list(ob.INPUTS) and [o.name for o in graph.output] == [ob.OUTPUT]


def test_a_model_the_builder_does_not_reproduce_is_refused(tmp_path: Path) -> None:
    base = json.loads((model_path(MODEL) / "config.json").read_text())
    for change in ({"model_type": "roberta"}, {"hidden_act": "relu"}, {"position_embedding_type": "relative_key"}):
        (tmp_path / "config.json").write_text(json.dumps(base | change))
        with pytest.raises(ox.ExportUnsupported, match=next(iter(change))):
            ob.bert_shape(tmp_path)


# -- a reference that does not hold ---------------------------------------------------------


@pytest.fixture
def reference_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed reference directory the code reads instead of the real one."""
    copy = tmp_path / "reference"
    shutil.copytree(refs.REFERENCE_DIR, copy)
    monkeypatch.setattr(refs, "REFERENCE_DIR", copy)
    return copy


def _edit(reference_dir: Path, change: dict[str, object], redigest: bool) -> None:
    path = reference_dir / f"{MODEL}.json"
    doc = json.loads(path.read_text()) | change
    if redigest:
        doc["digest"] = refs.content_digest(doc["probes"], doc["vectors"])
    path.write_text(json.dumps(doc))


def test_the_committed_reference_is_accepted_for_the_installed_weights(committed: refs.Reference) -> None:
    assert len(committed.vectors) == len(ox.PROBES) and len(committed.vectors[0]) == 384
    assert refs.stored_digest(MODEL) == committed.digest


@pytest.mark.parametrize(("change", "redigest", "reason"), [
    ("vector", False, "digest"),            # a damaged or hand-edited file
    ("probes", True, "other probes"),       # vectors of other sentences than the exporter checks
    ("model", True, "for model"),           # another model's file under this name
    ("weights", True, "other weights"),     # vectors of another release of the weights
])
def test_a_reference_that_does_not_hold_is_refused(reference_dir: Path, tmp_path: Path, change: str,
                                                   redigest: bool, reason: str) -> None:
    doc = json.loads((reference_dir / f"{MODEL}.json").read_text())
    edits: dict[str, dict[str, object]] = {
        "vector": {"vectors": [[x + 0.01 for x in doc["vectors"][0]], *doc["vectors"][1:]]},
        "probes": {"probes": [*doc["probes"][:-1], "another sentence"]},
        "model": {"model": "all-MiniLM-L12-v2"},
        "weights": {"weights_sha256": "0" * 64, "package_version": "0.2.0"},
    }
    _edit(reference_dir, edits[change], redigest)
    with pytest.raises(refs.ReferenceRefused, match=reason):
        refs.load(MODEL, model_path(MODEL), ox.PROBES)
    with pytest.raises(refs.ReferenceRefused):  # the exporter does not fall back to anything
        ox.export(MODEL, tmp_path / "entry")
    assert not (tmp_path / "entry" / "manifest.json").exists()


def test_weights_other_than_the_references_are_refused(tmp_path: Path) -> None:
    """The same file name, other bytes: the reference names its weights by their sha256."""
    model_dir = tmp_path / "model"
    shutil.copytree(model_path(MODEL), model_dir, ignore=shutil.ignore_patterns(refs.WEIGHTS_FILE))
    (model_dir / refs.WEIGHTS_FILE).write_bytes(b"other weights")
    with pytest.raises(refs.ReferenceRefused, match="other weights"):
        refs.load(MODEL, model_dir, ox.PROBES)


@pytest.mark.model
def test_consistent_but_wrong_vectors_fail_the_load_check(reference_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose digest was recomputed over wrong vectors passes as a file; the graph's check
    against it is what refuses it, and a fresh export that fails the check is an error."""
    doc = json.loads((reference_dir / f"{MODEL}.json").read_text())
    _edit(reference_dir, {"vectors": [list(reversed(v)) for v in doc["vectors"]]}, redigest=True)
    # In process: the child the loader starts would read the real reference directory.
    monkeypatch.setattr(ox, "export_in_child", lambda name, entry: (ox.export(name, entry), ox.read_manifest(entry))[1])
    with pytest.raises(RuntimeError, match="does not match sentence-transformers"):
        oe.load(MODEL, tmp_path / "models")


# -- serving imports no torch -------------------------------------------------------------


BLOCKED = ("torch", "transformers", "sentence_transformers")


@pytest.mark.model
def test_serving_the_local_model_never_imports_torch(tmp_path: Path) -> None:
    """A server's start with an empty data dir (the export runs, in its child process) and its
    embeds, with torch, transformers and sentence-transformers replaced by packages that record
    any import attempt and fail it. PYTHONPATH carries them into the export's child too."""
    blockers, log = tmp_path / "blockers", tmp_path / "imports.log"
    for name in BLOCKED:
        (blockers / name).mkdir(parents=True)
        (blockers / name / "__init__.py").write_text(
            f"import os\nopen(os.environ['IMPORT_LOG'], 'a').write('{name}\\n')\nraise ImportError('{name} blocked')\n")
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from shared.adapters.embedders import build_embedder
        from shared.config import Settings
        emb = build_embedder(Settings(data_dir=Path({str(tmp_path / "data")!r}), embedder="local",
                                      embed_runtime="onnx", embed_doc_runtime="auto"))
        docs, query = emb.embed(["rotor icing", "flat tyre"]), emb.embed_query("rotor icing")
        assert len(query) == 384 and abs(sum(a * b for a, b in zip(docs[0], query)) - 1) < 1e-3
        print(sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blockers), str(REPO)]), "IMPORT_LOG": str(log),
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert not log.exists(), f"imported on the serving path: {log.read_text()}"
    manifest = json.loads(next((tmp_path / "data" / "models").glob(f"{MODEL}-*/manifest.json")).read_text())
    assert manifest["exporter"] == "numpy" and manifest["reference"] == refs.load(
        MODEL, model_path(MODEL), ox.PROBES).vectors  # type: ignore[union-attr]


# -- against torch, where the `export` extra is installed ---------------------------------


@needs_torch
@pytest.mark.model
def test_the_committed_reference_is_what_sentence_transformers_computes(committed: refs.Reference) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_path(MODEL)), device="cpu")
    now = st.encode(committed.probes, normalize_embeddings=False, convert_to_numpy=True, show_progress_bar=False)
    assert _cos(np.asarray(now), np.asarray(committed.vectors)).min() >= 0.99999


@needs_torch
@pytest.mark.model
def test_the_builder_agrees_with_the_torch_export(encoder: oe.OnnxEmbedder, tmp_path: Path) -> None:
    """The traced-and-fused graph of the torch exporter and the numpy builder's, on text that is
    not among the probes, one at a time and batched."""
    ox.export_torch(MODEL, tmp_path / "torch")
    model_dir = model_path(MODEL)
    traced = oe.OnnxEmbedder(MODEL, tmp_path / "torch" / "model.onnx", model_dir, ox.pipeline_config(model_dir),
                             threads=1)
    for embed in (lambda e: np.asarray(e.embed(TEXTS)), lambda e: np.asarray([e.embed_query(t) for t in TEXTS])):
        assert _cos(embed(traced), embed(encoder)).min() >= 0.99999
