"""The ONNX graph of a BERT-family sentence-transformers model, written from its safetensors
weights with numpy and `onnx.helper`: no torch, no transformers.

The graph is written already fused, in the form onnxruntime's transformer optimizer makes of a
traced BERT (and the form the query encoder has been measured in): one EmbedLayerNormalization
(word + position + token-type embeddings, LayerNorm, and the mask's lengths), then per layer an
Attention op (Q/K/V in one weight, the mask applied inside), the attention output's MatMul, a
SkipLayerNormalization (bias + residual + LayerNorm), the intermediate MatMul, BiasGelu (erf
GELU), the output MatMul and a second SkipLayerNormalization; then the pooling its
`1_Pooling/config.json` names and, when `modules.json` has Normalize, L2 normalisation. Tracing
would only produce the same graph by way of hundreds of shape nodes the optimizer then removes.

The mask lengths EmbedLayerNormalization hands Attention assume right padding, which is how the
runtime pads (onnx_embedder._feed). Truncation to max_seq_length stays in the tokenizer.
Anything this does not reproduce (another architecture, relative positions, another activation)
raises ExportUnsupported; such a model is exported with torch (the `export` extra).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

    from shared.adapters.embedders.onnx_pipeline import PipelineConfig

OPSET = 17
MS_DOMAIN = "com.microsoft"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "embedding"


@dataclass(frozen=True)
class BertShape:
    layers: int
    hidden: int
    heads: int
    eps: float


def bert_shape(model_dir: Path) -> BertShape:
    """The encoder's dimensions from config.json; ExportUnsupported for what the graph below
    does not compute exactly as transformers does."""
    from shared.adapters.embedders.onnx_pipeline import ExportUnsupported

    cfg = json.loads((model_dir / "config.json").read_text())
    problems = []
    if cfg.get("model_type") != "bert":  # RoBERTa offsets its positions, DistilBERT has no token types
        problems.append(f"model_type {cfg.get('model_type')!r}")
    if cfg.get("hidden_act", "gelu") != "gelu":
        problems.append(f"hidden_act {cfg.get('hidden_act')!r}")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type {cfg.get('position_embedding_type')!r}")
    if problems:
        raise ExportUnsupported("the numpy builder does not reproduce " + ", ".join(problems))
    return BertShape(int(cfg["num_hidden_layers"]), int(cfg["hidden_size"]), int(cfg["num_attention_heads"]),
                     float(cfg.get("layer_norm_eps", 1e-12)))


def read_weights(model_dir: Path) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors as float32 numpy, the `bert.` prefix some checkpoints
    carry (a BertFor* head's encoder) dropped."""
    from safetensors.numpy import load_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    return {k.removeprefix("bert."): np.ascontiguousarray(v, dtype=np.float32 if v.dtype.kind == "f" else v.dtype)
            for k, v in tensors.items()}


class _Graph:
    """Nodes and initializers accumulated in order; initializer names are the checkpoint's."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._named: set[str] = set()

    def init(self, name: str, value: np.ndarray | None = None) -> str:
        from onnx import numpy_helper

        if name not in self._named:
            self.inits.append(numpy_helper.from_array(self.weights[name] if value is None else value, name))
            self._named.add(name)
        return name

    def linear(self, name: str) -> str:
        """A torch Linear's weight as MatMul wants it: (in, out)."""
        return self.init(f"{name}.weight.T", np.ascontiguousarray(self.weights[f"{name}.weight"].T))

    def node(self, op: str, inputs: list[str], name: str, outputs: int = 1, domain: str = "",
             **attrs: Any) -> list[str]:
        from onnx import helper

        outs = [f"{name}_output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain or None, **attrs))
        return outs


def _embeddings(g: _Graph, shape: BertShape) -> tuple[str, str]:
    # int32 is what the contrib op takes; the graph's inputs stay int64 like the torch export's.
    ids, mask, types = (g.node("Cast", [n], f"/cast/{n}", to=6)[0] for n in INPUTS)
    e = "embeddings"
    out, lengths = g.node("EmbedLayerNormalization",
                          [ids, types, g.init(f"{e}.word_embeddings.weight"), g.init(f"{e}.position_embeddings.weight"),
                           g.init(f"{e}.token_type_embeddings.weight"), g.init(f"{e}.LayerNorm.weight"),
                           g.init(f"{e}.LayerNorm.bias"), mask],
                          "/embeddings/EmbedLayerNormalization", outputs=2, domain=MS_DOMAIN, epsilon=shape.eps)
    return out, lengths


def _layer(g: _Graph, shape: BertShape, i: int, hidden: str, lengths: str) -> str:
    p, n = f"encoder.layer.{i}", f"/encoder/layer.{i}"
    w = g.weights
    qkv_w = np.concatenate([w[f"{p}.attention.self.{k}.weight"].T for k in ("query", "key", "value")], axis=1)
    qkv_b = np.concatenate([w[f"{p}.attention.self.{k}.bias"] for k in ("query", "key", "value")])
    ctx = g.node("Attention", [hidden, g.init(f"{p}.attention.self.qkv.weight", np.ascontiguousarray(qkv_w)),
                               g.init(f"{p}.attention.self.qkv.bias", qkv_b), lengths],
                 f"{n}/attention/self/Attention", domain=MS_DOMAIN, num_heads=shape.heads)[0]
    attn = _dense_skip_norm(g, shape, ctx, hidden, f"{p}.attention.output", f"{n}/attention/output")
    inter = g.node("MatMul", [attn, g.linear(f"{p}.intermediate.dense")], f"{n}/intermediate/dense/MatMul")[0]
    act = g.node("BiasGelu", [inter, g.init(f"{p}.intermediate.dense.bias")], f"{n}/intermediate/BiasGelu",
                 domain=MS_DOMAIN)[0]
    return _dense_skip_norm(g, shape, act, attn, f"{p}.output", f"{n}/output")


def _dense_skip_norm(g: _Graph, shape: BertShape, x: str, residual: str, p: str, n: str) -> str:
    """LayerNorm(x @ W + b + residual), b folded into SkipLayerNormalization. The MatMul's name
    keeps `<layer>/attention/output/` and `<layer>/output/`: the int8 query graph chooses by it."""
    y = g.node("MatMul", [x, g.linear(f"{p}.dense")], f"{n}/dense/MatMul")[0]
    return g.node("SkipLayerNormalization", [y, residual, g.init(f"{p}.LayerNorm.weight"),
                                             g.init(f"{p}.LayerNorm.bias"), g.init(f"{p}.dense.bias")],
                  f"{n}/SkipLayerNormalization", domain=MS_DOMAIN, epsilon=shape.eps)[0]


def _pool(g: _Graph, hidden: str, cfg: PipelineConfig) -> str:
    from onnx import numpy_helper

    def const(name: str, value: np.ndarray) -> str:
        return g.node("Constant", [], f"/pool/{name}", value=numpy_helper.from_array(value, f"{name}_value"))[0]

    if cfg.pooling == "cls":
        vec = g.node("Gather", [hidden, const("first", np.array(0, dtype=np.int64))], "/pool/cls", axis=1)[0]
    else:  # the mean over real tokens: padding contributes nothing, and no sentence divides by 0
        axis = const("token_axis", np.array([1], dtype=np.int64))
        mask = g.node("Unsqueeze", [INPUTS[1], const("last_axis", np.array([-1], dtype=np.int64))], "/pool/mask3d")[0]
        maskf = g.node("Cast", [mask], "/pool/mask_float", to=1)[0]
        summed = g.node("ReduceSum", [g.node("Mul", [hidden, maskf], "/pool/masked")[0], axis], "/pool/sum",
                        keepdims=0)[0]
        count = g.node("ReduceSum", [maskf, axis], "/pool/count", keepdims=0)[0]
        count = g.node("Clip", [count, const("min_count", np.array(1e-9, dtype=np.float32))], "/pool/count_min")[0]
        vec = g.node("Div", [summed, count], "/pool/mean")[0]
    if not cfg.normalize:
        return vec
    norm = g.node("ReduceL2", [vec], "/normalize/norm", axes=[1], keepdims=1)[0]
    norm = g.node("Clip", [norm, const("min_norm", np.array(1e-12, dtype=np.float32))], "/normalize/norm_min")[0]
    return g.node("Div", [vec, norm], "/normalize/div")[0]


def build_model(model_dir: Path, cfg: PipelineConfig) -> onnx.ModelProto:
    """The whole graph (transformer, pooling, normalisation) as an ONNX model in memory."""
    from onnx import TensorProto, helper

    shape = bert_shape(model_dir)
    g = _Graph(read_weights(model_dir))
    hidden, lengths = _embeddings(g, shape)
    for i in range(shape.layers):
        hidden = _layer(g, shape, i, hidden, lengths)
    _pool(g, hidden, cfg)
    g.nodes[-1].output[0] = OUTPUT  # named as the torch export names it
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"]) for n in INPUTS]
    output = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", shape.hidden])
    graph = helper.make_graph(g.nodes, "sentence_embedding", inputs, [output], g.inits)
    # IR 8: what opset 17 needs and every onnxruntime since 1.14 reads.
    return helper.make_model(graph, ir_version=8, producer_name="vibe-semantic onnx_build",
                             opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)])


def build(model_dir: Path, cfg: PipelineConfig, out: Path) -> dict[str, int]:
    """Write the graph to `out`; returns its fused operators' counts (as the manifest records
    the optimizer's)."""
    import onnx

    model = build_model(model_dir, cfg)
    onnx.save_model(model, str(out))
    fused = Counter(n.op_type for n in model.graph.node if n.domain == MS_DOMAIN)
    return dict(sorted(fused.items()))
