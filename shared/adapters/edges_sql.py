"""`EdgeStore` (shared/ports/edges.py) in both stores of record, with the same SQL: edges are
rows of `docs` (collection `semantic.edges`), found by partial expression indexes on their
`from` and `to` (schema version 5), so an edge is kept in step with its document by the
document's own write, in its transaction, and there is no second table to drift.

The JSON accessors differ between the dialects; each store class sets them (`_EDGE_FROM`,
`_EDGE_TO`, `_EDGE_WEIGHT`) to exactly the expressions its indexes are built on, or the
planner would not use them. The collection is a literal, not a parameter, for the same reason
(a partial index is used only where the query's condition implies the index's)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.adapters.lifecycle_sql.base import SqlBase
from shared.edges import EDGES
from shared.model import DocKey, StoredDoc

_CHUNK = 500  # references a statement carries at most (SQLite's variable limit is 32,766)


class EdgesSql(SqlBase):
    """Mixin: the store class provides `get_docs` and the hooks (`SqlBase`)."""

    _EDGE_FROM = "json_extract(fields, '$.from')"
    _EDGE_TO = "json_extract(fields, '$.to')"
    _EDGE_WEIGHT = "COALESCE(json_extract(fields, '$.weight'), 1.0)"

    def get_docs(self, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]:
        raise NotImplementedError

    def edges_touching(self, tenant: str, refs: Sequence[str], per_ref: int) -> list[StoredDoc]:
        ids: dict[str, None] = {}
        for at in range(0, len(refs), _CHUNK):
            chunk = list(dict.fromkeys(refs[at:at + _CHUNK]))
            marks = ",".join("?" * len(chunk))
            ends = [f"SELECT doc_id FROM (SELECT doc_id, ROW_NUMBER() OVER (PARTITION BY {end} ORDER BY "
                    f"{self._EDGE_WEIGHT} DESC, doc_id) AS n FROM docs WHERE tenant=? AND "
                    f"collection='{EDGES}' AND {end} IN ({marks})) {alias} WHERE n<=?"
                    for end, alias in ((self._EDGE_FROM, "f"), (self._EDGE_TO, "t"))]
            rows = self._read(" UNION ".join(ends), (tenant, *chunk, per_ref, tenant, *chunk, per_ref))
            ids.update(dict.fromkeys(str(r["doc_id"]) for r in rows))
        docs = self.get_docs([DocKey(tenant, EDGES, i) for i in ids])
        return [docs[k] for k in (DocKey(tenant, EDGES, i) for i in ids) if k in docs]

    def edge_degrees(self, tenant: str, refs: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for at in range(0, len(refs), _CHUNK):
            chunk = list(dict.fromkeys(refs[at:at + _CHUNK]))
            marks = ",".join("?" * len(chunk))
            ends = [f"SELECT {end} AS ref FROM docs WHERE tenant=? AND collection='{EDGES}' AND {end} IN ({marks})"
                    for end in (self._EDGE_FROM, self._EDGE_TO)]
            rows = self._read(f"SELECT ref, COUNT(*) AS n FROM ({' UNION ALL '.join(ends)}) e GROUP BY ref",
                              (tenant, *chunk, tenant, *chunk))
            for r in rows:
                out[str(r["ref"])] = out.get(str(r["ref"]), 0) + int(r["n"])
        return out
