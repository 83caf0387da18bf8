"""The sentence-transformers pipeline an ONNX graph reproduces, and what checks it: the model's
own description of what follows the transformer (pooling, normalisation, window), its
tokenizer, the probe texts whose reference vectors every export is compared with, and the
library versions an export depends on. Read by the exporters (onnx_export, onnx_build), the
reference files (reference.py) and the runtime (onnx_embedder) alike.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_VERSIONED = ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime", "tokenizers")

# Short and long, several scripts, one longer than the model's window (tests truncation), and
# lengths that differ, so the padded batch exercises the attention mask.
PROBES = [
    "How do I fix a flat bicycle tire?",
    "Quarterly revenue grew by eight percent.",
    "The boundary layer separates near the trailing edge of the wing.",
    "a",
    "Der schnelle braune Fuchs springt über den faulen Hund. 東京は日本の首都です。",
    "Interest rates, inflation and unemployment: what the central bank weighs before it acts, "
    "and why forward guidance matters as much as the rate decision itself.",
    " ".join(["retrieval augmented generation with hybrid lexical and dense ranking"] * 40),
    "SELECT * FROM docs WHERE id = 42; -- 3.14159 x^2 + y^2 = r^2",
]


class ExportUnsupported(RuntimeError):
    """The model's sentence-transformers pipeline is not one this exporter reproduces."""


@dataclass(frozen=True)
class PipelineConfig:
    max_seq_length: int
    pooling: str  # "mean" | "cls"
    normalize: bool


def pipeline_config(model_dir: Path) -> PipelineConfig:
    """What sentence-transformers does after the transformer, read from the model's own files."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        pool_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        pool = json.loads((model_dir / pool_dir / "config.json").read_text())
        sbert = json.loads((model_dir / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, StopIteration, KeyError) as e:
        raise ExportUnsupported(f"not a sentence-transformers model directory: {e}") from e
    known = {"Transformer", "Pooling", "Normalize"}
    extra = [m["type"] for m in modules if m["type"].rpartition(".")[2] not in known]
    if extra:
        raise ExportUnsupported(f"unsupported modules {extra}")
    modes = [k for k, v in pool.items() if k.startswith("pooling_mode") and v is True]
    if modes == ["pooling_mode_mean_tokens"]:
        pooling = "mean"
    elif modes == ["pooling_mode_cls_token"]:
        pooling = "cls"
    else:
        raise ExportUnsupported(f"unsupported pooling {modes}")
    normalize = any(m["type"].endswith(".Normalize") for m in modules)
    return PipelineConfig(int(sbert.get("max_seq_length") or 512), pooling, normalize)


def versions(names: Sequence[str] = _VERSIONED) -> dict[str, str]:
    """Installed version of each distribution, "absent" where it is not installed."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def tokenizer_for(model_dir: Path, max_length: int) -> Tokenizer:
    """The model's fast tokenizer, truncating like sentence-transformers (max_seq_length tokens,
    special tokens included); no padding here: batches are padded per length-sorted chunk."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok
