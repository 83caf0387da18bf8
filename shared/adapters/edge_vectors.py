"""Embedded ANN index on qdrant-edge (Qdrant's in-process engine): one shard per space.

Payload filters (tenant, collection, ACL) are part of every query, so a vector the caller
may not read is never scored. Why qdrant-edge: payload indexes inside the engine's query, where
qdrant-client's local mode takes 1.3 s at 100k x 384. The
shard is rebuilt from the document store's change log when missing, so it holds no state
of record.

Searches are exact: the shards are never optimized, so qdrant-edge builds no HNSW graph and
scores every point the filter admits (11-14 ms p50 at 100k for a caller admitted to 63% of
them; far less for narrower filters, which the payload indexes narrow first). Kept so on
purpose (`python -m bench.edge_hnsw`, docs/performance.md): `EdgeShard.optimize()`
holds the interpreter lock for its whole run (about 60 s at 100k), recall on one collection's
points drops to 0.93 at k=10, hash-embedder vectors get recall 0.1, and the planner's short
first search (`PlannerConfig.short_first_page`) relies on exact top-k lists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import qdrant_edge as qe

from shared.adapters import facets
from shared.adapters.schema_stamp import FolderSchemaStamp
from shared.model import DocKey, DocVectors, Hit, StoredDoc, as_doc_vectors, hit
from shared.ports import FieldCondition, SearchFilter
from shared.readiness import folder_ready

log = logging.getLogger("vibe.vectors")

# What the shards under `root` hold: 2 adds the metadata filter payload (`facet` tokens, `num`
# numbers) and its index. Another number: the follower rebuilds them from the store.
SCHEMA_VERSION = 2
# What a shard hands back as a point's id (ours are all `edge_point_id` integers).
PointId = int | uuid.UUID | str
# The edge shards' own layout on top of that: 3 numbers points by `edge_point_id` (integers).
EDGE_SCHEMA_VERSION = 3
_NS = uuid.UUID("6f1c1f64-8a51-4d8e-9b0e-5a0c1a2b3c4d")
# Between a space's name and a dimension other than its first (`EdgeVectorIndex._place`); space
# names never hold it (services/api/routes_lifecycle.py SPACE_RE).
DIM_SEP = "~"
# A shard's companion for documents of several passages, `<shard>~p`: one multi-vector point per
# document, scored by its best passage (max-sim). Documents of one passage stay in plain shards:
# the same points stored as one-vector multi-vectors searched 1.2-1.7x slower (20k x 384, exact,
# filtered), a cost every read would pay for the few long documents.
PASSAGES_SUFFIX = f"{DIM_SEP}p"


def passages_shard(name: str) -> str:
    return name + PASSAGES_SUFFIX


def _key_text(key: DocKey) -> str:
    return f"{key.tenant}\x1f{key.collection}\x1f{key.doc_id}"


def point_id(key: DocKey) -> str:
    """Stable point id per (tenant, collection, doc id) (the Qdrant server's collections)."""
    return str(uuid.uuid5(_NS, _key_text(key)))


def edge_point_id(key: DocKey) -> int:
    """The edge shards' point id: 64 bits of a hash of the key. A search hands integer ids back
    as Python ints (0.12 us each) where it builds a `uuid.UUID` per hit (1.55 us: 0.8 ms of a
    500-hit search). Two keys with one id (odds about 3e-8 for a million points in one space)
    would share a point: found at upsert and logged; it costs those two documents their vector
    search, never a leak, since the ACL filter reads the point's own payload and every shown
    hit is re-checked against the store."""
    return int.from_bytes(hashlib.blake2b(_key_text(key).encode(), digest_size=8).digest(), "big")


# Every search scores exactly, also on a shard that holds an HNSW graph (one optimized by hand or
# by another tool): why the shards are left unoptimized is in the module docstring, and the
# planner's short first search (`PlannerConfig.short_first_page`) needs exact top-k lists. On
# the unoptimized segments the service writes it is the search they get anyway (measured the
# same within noise: 12.0-12.6 vs 11.6-13.5 ms p50 at 100k vectors).
EXACT = qe.SearchParams(exact=True)

# How many point id -> key entries a process keeps (see `EdgeVectorIndex._keys`): about 200
# bytes each, so at most ~60 MB; past it, hits are resolved from their payload instead.
KEY_CACHE_MAX = 250_000


def _payload(doc: StoredDoc) -> dict[str, object]:
    """Key, ACL and the metadata filter values: `facet` tokens for equality (the lexical
    indexes' tokens, shared/adapters/facets.py) and `num` numbers per hashed field for ranges;
    `certs` only when the document requires some (a point without it requires none, as every
    point written before certificates existed)."""
    k = doc.key
    out: dict[str, object] = {"tenant": k.tenant, "collection": k.collection, "doc_id": k.doc_id,
                              "acl": list(doc.acl), "facet": facets.doc_tokens(doc.fields, trie=False),
                              "num": facets.num_payload(doc.fields)}
    if doc.certs:
        out["certs"] = list(doc.certs)
    return out


# Keyword payload indexes every shard has; `certs` joined later, so shards made before it get
# it when opened (a filter reads an unindexed field from each point's payload, slower but exact).
KEYWORD_FIELDS = ("collection", "acl", "facet", "certs")


def num_key(cond: FieldCondition) -> str:
    """The payload path of a range condition's field."""
    return f"num.{facets.num_field(cond.field)}"


class EdgeVectorIndex:
    """VectorIndex port on qdrant-edge shards under `root/<space>`."""

    def __init__(self, root: Path, filterable: facets.FilterableFields | None = None,
                 max_indexes: int = facets.MAX_PAYLOAD_INDEXES):
        self.root = root
        self._filterable = filterable or facets.fixed_fields(())
        self._max_indexes = max_indexes
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dims: dict[str, int] = {}
        self._lock = threading.RLock()
        self._num_indexed: dict[str, set[str]] = {}  # per space: `num.*` keys indexed by this process
        self._stamp = FolderSchemaStamp(root, EDGE_SCHEMA_VERSION)
        # Point id -> document key, so a search need not read every hit's payload: reading it
        # was most of a search's time (500 hits of 2,000 vectors: 1.40 ms with `doc_id`, 0.43
        # ms with no payload). A point id is a hash of its key and this process is the shards'
        # only writer, so an entry is the key of the point's payload; ids not known here (after a
        # restart) are resolved with one `retrieve` of their payloads. Filled by upserts and by
        # those look-ups.
        self._keys: dict[PointId, DocKey] = {}

    def schema_outdated(self) -> bool:
        """Shards exist but were written by another schema version (or before versions)."""
        return self._stamp.outdated()

    def reset_schema(self) -> None:
        """Delete every shard and record the current version; the caller replays the log."""
        with self._lock:
            self.close()
            self._num_indexed.clear()
            self._stamp.empty_and_stamp()
        log.info("vector index reset", extra={"schema_version": EDGE_SCHEMA_VERSION})

    def _shard(self, name: str, dim: int | None) -> qe.EdgeShard | None:
        """The shard `name` (a space, or a space's other dimension: `_place`), created with
        `dim` dimensions when missing and `dim` is given."""
        with self._lock:
            shard = self._shards.get(name)
            if shard is not None:
                return shard
            path = self.root / name
            if path.exists() and any(path.iterdir()):
                shard = qe.EdgeShard.load(str(path))
                self._index_certs(shard)
            elif dim is None:
                return None
            else:
                shard = self._create(path, dim, multi=name.endswith(PASSAGES_SUFFIX))
                self._dims[name] = dim
            self._shards[name] = shard
            return shard

    def _dim_of(self, name: str) -> int | None:
        """The dimension of shard `name` on disk (None: no such shard)."""
        if name not in self._dims:
            try:
                cfg = json.loads((self.root / name / "edge_config.json").read_text())
            except (OSError, ValueError):
                return None
            self._dims[name] = int(cfg["vectors"][""]["size"])
        return self._dims[name]

    def _place(self, space: str, dim: int, create: bool) -> str | None:
        """The shard of `space`'s vectors of `dim` dimensions. Space names are per tenant, so two
        tenants' `core@v2` may hold different models: the space's shard holds its first
        dimension and any other goes to `<space>~<dim>` (every search filters by tenant, so models
        of one dimension can share a shard). None: no such shard and `create` is false."""
        with self._lock:
            plain = self._dim_of(space)
            if plain == dim:
                return space
            other = f"{space}{DIM_SEP}{dim}"
            if plain is not None or self._dim_of(other) is not None:
                return other if create or self._dim_of(other) is not None else None
            return space if create else None

    def _names(self, space: str) -> list[str]:
        """Every shard of `space`, whatever its dimension."""
        prefix = f"{space}{DIM_SEP}"
        try:
            others = [e.name for e in os.scandir(self.root) if e.name.startswith(prefix) and e.is_dir()]
        except FileNotFoundError:
            others = []
        return [space, *sorted(others)]

    @staticmethod
    def _create(path: Path, dim: int, multi: bool = False) -> qe.EdgeShard:
        path.mkdir(parents=True, exist_ok=True)
        max_sim = qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim) if multi else None
        params = qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine, multivector_config=max_sim)
        cfg = qe.EdgeConfig(vectors=params)
        shard = qe.EdgeShard.create(str(path), cfg)
        tenant_idx = qe.KeywordIndexParams(is_tenant=True)
        shard.update(qe.UpdateOperation.create_field_index("tenant", tenant_idx))
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        return shard

    @staticmethod
    def _index_certs(shard: qe.EdgeShard) -> None:
        if "certs" not in shard.info().payload_schema:
            shard.update(qe.UpdateOperation.create_field_index("certs", qe.PayloadSchemaType.Keyword))

    def upsert(self, space: str, items: Sequence[tuple[StoredDoc, Sequence[float] | DocVectors]]) -> None:
        by_dim: dict[int, list[tuple[StoredDoc, DocVectors]]] = {}
        for doc, given in items:  # tenants' spaces of one name may differ in dimension (`_place`)
            vecs = as_doc_vectors(given)
            by_dim.setdefault(len(vecs[0]), []).append((doc, vecs))
        for dim, group in by_dim.items():
            name = self._place(space, dim, create=True)
            assert name is not None
            self._shard(name, dim)  # the plain shard holds the space's dimension (`_place`)
            single = [(d, v) for d, v in group if len(v) == 1]
            several = [(d, v) for d, v in group if len(v) > 1]
            # A document that grew or shrank past one passage leaves the other shard.
            for where, items in ((name, single), (passages_shard(name), several)):
                if items:
                    self._upsert(where, items)
            self._delete_from(passages_shard(name), [edge_point_id(d.key) for d, _ in single])
            self._delete_from(name, [edge_point_id(d.key) for d, _ in several])

    def _delete_from(self, name: str, ids: list[PointId]) -> None:
        shard = self._shard(name, None) if ids else None
        if shard is not None:
            with self._lock:
                shard.update(qe.UpdateOperation.delete_points(ids))

    def _upsert(self, name: str, items: Sequence[tuple[StoredDoc, DocVectors]]) -> None:
        shard = self._shard(name, len(items[0][1][0]))
        assert shard is not None
        payloads = [_payload(d) for d, _ in items]
        ids = [edge_point_id(d.key) for d, _ in items]
        multi = name.endswith(PASSAGES_SUFFIX)
        points = [qe.Point(i, vecs if multi else vecs[0], pl)
                  for i, (_, vecs), pl in zip(ids, items, payloads, strict=True)]
        self._remember(zip(ids, (d.key for d, _ in items), strict=True))
        with self._lock:
            self._index_numbers(name, shard, [d for d, _ in items])
            shard.update(qe.UpdateOperation.upsert_points(points))

    def _remember(self, pairs: Iterable[tuple[PointId, DocKey]]) -> None:
        keys = self._keys
        for pid, key in pairs:
            was = keys.get(pid)
            if was is not None and was != key:
                log.warning("two documents share a vector point id", extra={"point_id": pid})
            if was is None and len(keys) >= KEY_CACHE_MAX:
                continue
            keys[pid] = key

    def _index_numbers(self, space: str, shard: qe.EdgeShard, docs: Sequence[StoredDoc]) -> None:
        """A float payload index per numeric field declared filterable (facets.FilterableFields),
        at most `max_indexes` per shard, so range filters on them read an index. Built here, in
        the follower's upsert (one shard per process, under its lock): the bound and the
        declaration keep what any writer sends from costing every tenant an index build."""
        known = self._num_indexed.get(space)
        if known is None:  # what the shard already has (a restart must not count from zero)
            known = {k[len("num."):] for k in shard.info().payload_schema if k.startswith("num.")}
            self._num_indexed[space] = known
        fresh = sorted(facets.index_keys(docs, self._filterable) - known)
        room = max(0, self._max_indexes - len(known))
        if len(fresh) > room:
            log.warning("payload index bound reached", extra={"space": space, "skipped": len(fresh) - room,
                                                              "max": self._max_indexes})
        for key in fresh[:room]:
            shard.update(qe.UpdateOperation.create_field_index(f"num.{key}", qe.PayloadSchemaType.Float))
            known.add(key)

    def delete(self, space: str, keys: Sequence[DocKey]) -> None:
        if not keys:
            return
        ids: list[PointId] = [edge_point_id(k) for k in keys]
        for name in self._names(space):  # the point is in whichever shard its tenant's dimension chose
            shard = self._shard(name, None)
            if shard is None:
                continue
            with self._lock:
                shard.update(qe.UpdateOperation.delete_points(ids))
        for i in ids:
            self._keys.pop(i, None)

    @staticmethod
    def _filter(flt: SearchFilter, only: Sequence[DocKey] | None) -> qe.Filter:
        must: list[qe.FieldCondition | qe.IsEmptyCondition | qe.IsNullCondition | qe.HasIdCondition
                   | qe.HasVectorCondition | qe.NestedCondition | qe.Filter] = [
            qe.FieldCondition("tenant", match=qe.MatchValue(flt.tenant)),
            qe.FieldCondition("acl", match=qe.MatchAny(list(flt.acl))),
        ]
        if flt.collections is not None:
            must.append(qe.FieldCondition("collection", match=qe.MatchAny(list(flt.collections))))
        for c in flt.where:
            if c.op == "range":
                rng = qe.RangeFloat(gt=c.gt, gte=c.gte, lt=c.lt, lte=c.lte)
                must.append(qe.FieldCondition(num_key(c), range=rng))
            else:
                must.append(qe.FieldCondition("facet", match=qe.MatchAny(facets.eq_tokens(c))))
        if only is not None:
            must.append(qe.HasIdCondition({edge_point_id(k) for k in only}))
        if flt.ids is not None:
            must.append(qe.HasIdCondition({edge_point_id(k) for k in flt.ids if k.tenant == flt.tenant}))
        # Certificates: a point requiring any certificate outside the caller's is excluded.
        # `except` on an array matches when some element is not listed (checked against this
        # engine, indexed and not, in tests/contract/test_vector_contract.py); a point without
        # `certs` or with none never matches, so it stays.
        cert_gate = qe.FieldCondition("certs", match=qe.MatchExcept(sorted(flt.certs)))
        return qe.Filter(must=must, must_not=[cert_gate])

    def search(
        self,
        space: str,
        flt: SearchFilter,
        vector: list[float],
        limit: int,
        only: Sequence[DocKey] | None = None,
    ) -> list[Hit]:
        name = self._place(space, len(vector), create=False)
        shard = None if name is None else self._shard(name, None)
        if shard is None or limit <= 0 or (only is not None and not only) or facets.unsatisfiable(flt):
            return []
        assert name is not None
        req = qe.QueryRequest(limit=limit, query=qe.Query.Nearest(vector), filter=self._filter(flt, only),
                              with_payload=False, params=EXACT)
        hits = self._query(shard, req)
        long_docs = self._shard(passages_shard(name), None)
        if long_docs is None:
            return hits
        # Both shards' exact top `limit`, merged: the exact top `limit` of their union.
        merged = sorted([*hits, *self._query(long_docs, req)], key=lambda h: -h.score)
        return merged[:limit]

    def _query(self, shard: qe.EdgeShard, req: qe.QueryRequest) -> list[Hit]:
        known = self._keys
        points = shard.query(req)
        missing = [p.id for p in points if p.id not in known]
        found = self._resolve(shard, missing) if missing else {}
        hits = []
        for p in points:
            key = known.get(p.id) or found.get(p.id)
            if key is not None:  # None: deleted between the query and the look-up
                hits.append(hit(key, p.score))
        return hits

    def _resolve(self, shard: qe.EdgeShard, ids: list[PointId]) -> dict[PointId, DocKey]:
        """Keys of points this process has not seen, from their payloads (only the fields a
        key needs), remembered for the next search."""
        found: dict[PointId, DocKey] = {}
        for r in shard.retrieve(ids, ["tenant", "collection", "doc_id"], False):
            pl = r.payload or {}
            found[r.id] = DocKey(str(pl["tenant"]), str(pl["collection"]), str(pl["doc_id"]))
        self._remember(found.items())
        return found

    def count(self, space: str) -> int:
        shards = [self._shard(name, None) for name in self._names(space)]
        return sum(int(shard.info().points_count) for shard in shards if shard is not None)

    def flush(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.flush()

    def check_ready(self) -> None:
        """Shards open lazily (per space): the folder they live in is what can be lost."""
        folder_ready(self.root)

    def close(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.flush()
                shard.close()
            self._shards.clear()
            self._dims.clear()
