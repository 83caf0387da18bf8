"""Which passage of a long document a semantic hit matched, so a page can show it.

The vector index scores a document by its best passage but does not say which one; the read
asks the store for the page's passage vectors and scores them against the query vector (a few
dot products per hit). The passages' spans are not stored: they are recomputed from the
document with the embedder's own split (same fields, same settings). When the recomputed split
does not line up with the stored vectors (embedded under other settings, or with a field list
an eligibility rule chose), the hit makes no claim rather than a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from shared.collection_settings import embed_fields_of
from shared.model import DocVectors, StoredDoc
from shared.text.passages import PassageConfig, split
from shared.text.redaction import select_fields


class PassageLocator:
    def __init__(self, cfg: PassageConfig, embed_fields: Mapping[str, list[str]]):
        self.cfg = cfg
        self.embed_fields = embed_fields  # shared/collection_settings.py EmbedFields

    def is_long(self, doc: StoredDoc) -> bool:
        """Whether `doc` may have been embedded as several passages (its text is longer than one):
        the read asks the store for passage vectors of these only."""
        total = 0
        for value in doc.fields.values():
            items = value if isinstance(value, list) else [value]
            total += sum(len(v) for v in items if isinstance(v, str))
            if total > self.cfg.max_chars:
                return True
        return False

    def locate(self, doc: StoredDoc, vectors: DocVectors, query: list[float]) -> dict[str, object] | None:
        """The best passage's field, character span and heading path; None for a document of one
        passage (it matched as a whole) or when the split cannot be matched to its vectors."""
        if len(vectors) < 2 or not query or len(vectors[0]) != len(query):
            return None
        allow = embed_fields_of(self.embed_fields, doc.key.tenant, doc.key.collection)
        parts = split(select_fields(doc.fields, allow), allow, self.cfg)[: self.cfg.max_passages]
        if len(parts) != len(vectors):
            return None
        best = int(np.argmax(np.asarray(vectors, dtype=np.float32) @ np.asarray(query, dtype=np.float32)))
        return parts[best].locator()
