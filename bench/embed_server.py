"""The real all-MiniLM-L6-v2 behind the OpenAI embeddings protocol, with a disk cache.

The lazy-economics benchmark replays many streams and planner settings, each on a fresh
instance. The instances reach this server through `VIBE_EMBEDDER=openai`, so they count and
embed exactly as against any provider; the cache only saves re-computing the same
vectors across runs (what the benchmark measures is which documents get embedded and the
ranking quality, not the model's speed — `bench spine` measures that).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import blake3
import numpy as np

from harness.openai_server import OpenAIProtocolServer
from shared.adapters.embedders.local_embedder import LocalEmbedder

CACHE = Path(__file__).resolve().parent / ".cache" / "minilm-embeddings.sqlite3"


class CachedModel:
    """Embeds with the local model; remembers vectors by blake3 of the exact text."""

    def __init__(self, path: Path = CACHE):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.model = LocalEmbedder()
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (h TEXT PRIMARY KEY, vec BLOB)")
        self.lock = threading.Lock()
        self.computed = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        hashes = [blake3.blake3(t.encode()).hexdigest() for t in texts]
        with self.lock:
            known = dict(self.db.execute(
                f"SELECT h, vec FROM v WHERE h IN ({','.join('?' * len(hashes))})", hashes).fetchall())
            todo = [i for i, h in enumerate(hashes) if h not in known]
            if todo:
                fresh = self.model.embed([texts[i] for i in todo])
                self.computed += len(todo)
                rows = [(hashes[i], np.asarray(v, dtype=np.float32).tobytes())
                        for i, v in zip(todo, fresh, strict=True)]
                self.db.executemany("INSERT OR REPLACE INTO v VALUES (?,?)", rows)
                self.db.commit()
                known.update(dict(rows))
        return [np.frombuffer(known[h], dtype=np.float32).tolist() for h in hashes]


@contextmanager
def model_server() -> Iterator[OpenAIProtocolServer]:
    server = OpenAIProtocolServer()
    server.embedder = CachedModel()  # type: ignore[assignment]
    with server:
        yield server
