"""Keeps the lexical and vector indexes in step with the store's change log.

The store is the system of record; indexes are followers. Each `sync()` applies the changes
after the last applied sequence number and then records it, so a crash between the two
replays a few idempotent upserts instead of losing a write, and a deleted index folder is
rebuilt from the log on the next start.
"""

from __future__ import annotations

import threading
from pathlib import Path

from shared.model import DocKey, SemanticStatus, StoredDoc
from shared.ports import Change, DocumentStore, LexicalIndex, VectorIndex


class IndexFollower:
    def __init__(
        self,
        store: DocumentStore,
        lexical: LexicalIndex | None,
        vectors: VectorIndex | None,
        state_file: Path,
        space: str,
    ):
        self.store = store
        self.lexical = lexical
        self.vectors = vectors
        self.space = space
        self.state_file = state_file
        self._lock = threading.Lock()
        self.seq = int(state_file.read_text()) if state_file.exists() else 0

    def sync(self, batch: int = 5000) -> int:
        """Apply every pending change; returns how many were applied."""
        applied = 0
        with self._lock:
            while True:
                changes = self.store.changes_since(self.seq, batch)
                if not changes:
                    return applied
                self._apply(changes)
                self.seq = changes[-1].seq
                self.state_file.write_text(str(self.seq))
                applied += len(changes)

    def _apply(self, changes: list[Change]) -> None:
        keys = list(dict.fromkeys(c.key for c in changes))
        docs = self.store.get_docs(keys)
        gone = [k for k in keys if k not in docs]
        if self.lexical is not None:
            touched = {c.key for c in changes if c.op == "doc"}
            self.lexical.apply([docs[k] for k in keys if k in touched and k in docs], gone)
        if self.vectors is not None:
            self._apply_vectors(docs, gone)

    def _apply_vectors(self, docs: dict[DocKey, StoredDoc], gone: list[DocKey]) -> None:
        """Ready documents get (re)upserted with their current ACL; every other state drops
        its point, so a stale or denied vector is never searched."""
        assert self.vectors is not None
        present = list(docs)
        side = self.store.sidecars(present, self.space)
        vecs = self.store.vectors_for(present, self.space)
        ready = [(docs[k], vecs[k]) for k in present if k in vecs]
        drop = [
            k for k in present
            if k not in vecs and (s := side.get(k)) is not None and s.status != SemanticStatus.NONE
        ]
        self.vectors.upsert(self.space, ready)
        self.vectors.delete(self.space, drop + gone)
