"""ANN on a Qdrant server (distributed profile): one collection per space, tenants by payload.

Semantics mirror the embedded adapter (edge_vectors.py): the same point ids and payload
(tenant, collection, doc_id, acl), cosine distance, and the tenant/ACL/collection filter (plus
`HasIdCondition` for `only`) inside the query, so a vector the caller may not read is never
scored. Tests run this same code through qdrant-client's local mode (`QdrantClient(path=...)`
or `":memory:"`), which ignores HNSW and payload-index settings but honours every filter.

Why payload-based multitenancy rather than shard keys: every search already carries a tenant
filter, and cosine similarity involves only the query and the point, so sharing a collection
leaks no statistics between tenants (unlike BM25, see opensearch_lexical.py). Qdrant's
recommended layout for many tenants is one collection with a keyword payload index marked
`is_tenant=True` (points of a tenant are stored together, so filtered searches read few
segments) and `hnsw_config(m=0, payload_m=16)`: no global graph, a graph per tenant built from
that index. Shard keys (user-defined sharding) give each key a physical shard: worth it for a
few large tenants that need placement or isolation, but each shard has a fixed cost (files,
WAL, optimizer threads), so 10k tenants as 10k shards would cost far more than one collection.
A large tenant can later be moved to a dedicated shard key ("tiered multitenancy") without
changing this port.

Collections are created on the first upsert of a space with that vector's dimension. Space
names are per tenant, so one name may hold vectors of several dimensions: the first has the
space's collection, each other one `<space>~<dim>` (`_place`); searches filter by tenant, so
only one tenant's model is ever compared within a collection (dim safety). Upserts and
deletes wait for the server to apply them (`wait=True`): the port promises search visibility
when they return.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence

from qdrant_client import QdrantClient, models

from shared.adapters import facets
from shared.adapters.edge_vectors import (
    DIM_SEP,
    KEYWORD_FIELDS,
    PASSAGES_SUFFIX,
    SCHEMA_VERSION,
    num_key,
    passages_shard,
    point_id,
)
from shared.adapters.edge_vectors import _payload as payload  # same payload in both profiles
from shared.config import Settings
from shared.model import DocKey, DocVectors, Hit, StoredDoc, as_doc_vectors
from shared.ports import SearchFilter

log = logging.getLogger("vibe.vectors")

COLLECTION_PREFIX = "vibe-"
UPSERT_BATCH = 256  # points per request at most ...
# ... and estimated bytes per request at most: Qdrant refuses a request over 32 MB (its
# `service.max_request_size_mb`) whole, so a few points with large payloads (ACLs) must not add
# up past it. A point larger than this still goes, alone.
UPSERT_MAX_BYTES = 8 * 1_048_576
FLOAT_JSON_BYTES = 24  # a float32 as JSON text (REST), at most "-1.2345678901234567e-05,"
KEY_PAYLOAD = ["tenant", "collection", "doc_id"]


def search_filter(flt: SearchFilter, only: Sequence[DocKey] | None) -> models.Filter:
    """Tenant, ACL, collections, metadata conditions, the id allow-list and the `only` ids, all
    `must`: evaluated inside the search."""
    must: list[models.Condition] = [
        models.FieldCondition(key="tenant", match=models.MatchValue(value=flt.tenant)),
        models.FieldCondition(key="acl", match=models.MatchAny(any=list(flt.acl))),
    ]
    if flt.collections is not None:
        must.append(models.FieldCondition(key="collection", match=models.MatchAny(any=list(flt.collections))))
    for c in flt.where:
        if c.op == "range":
            rng = models.Range(gt=c.gt, gte=c.gte, lt=c.lt, lte=c.lte)
            must.append(models.FieldCondition(key=num_key(c), range=rng))
        else:
            must.append(models.FieldCondition(key="facet", match=models.MatchAny(any=facets.eq_tokens(c))))
    if only is not None:
        must.append(models.HasIdCondition(has_id=[point_id(k) for k in only]))
    if flt.ids is not None:
        must.append(models.HasIdCondition(has_id=[point_id(k) for k in flt.ids if k.tenant == flt.tenant]))
    # Certificates: a point requiring any certificate outside the caller's is excluded (`except`
    # on an array matches when some element is not listed; a point without `certs` never does).
    cert_gate = models.FieldCondition(key="certs", match=models.MatchExcept(**{"except": sorted(flt.certs)}))
    return models.Filter(must=must, must_not=[cert_gate])


# How long a passages collection seen missing is believed missing (QdrantVectorIndex._has_passages).
ABSENT_TTL = 1.0
_MAX_SIM = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)


def point_bytes(doc: StoredDoc, vecs: DocVectors) -> int:
    """An upper estimate of one point's size in an upsert request (JSON over REST; gRPC is
    smaller): the vector, the payload and the id with its framing."""
    body = json.dumps(payload(doc), ensure_ascii=False, separators=(",", ":")).encode()
    return FLOAT_JSON_BYTES * sum(len(v) for v in vecs) + len(body) + 96


def upsert_batches(items: Sequence[tuple[StoredDoc, DocVectors]], max_points: int,
                   max_bytes: int) -> Iterator[Sequence[tuple[StoredDoc, DocVectors]]]:
    """Consecutive runs of `items` of at most `max_points` points and `max_bytes` estimated
    bytes each (a single larger point goes alone)."""
    start, size = 0, 0
    for i, (d, vec) in enumerate(items):
        n = point_bytes(d, vec)
        if i > start and (i - start >= max_points or size + n > max_bytes):
            yield items[start:i]
            start, size = i, 0
        size += n
    if start < len(items):
        yield items[start:]


class QdrantVectorIndex:
    """VectorIndex port on qdrant-client: a server URL in production, local mode in tests."""

    def __init__(self, client: QdrantClient, prefix: str = COLLECTION_PREFIX,
                 filterable: facets.FilterableFields | None = None, max_indexes: int = facets.MAX_PAYLOAD_INDEXES):
        self.client = client
        self.prefix = prefix
        self._filterable = filterable or facets.fixed_fields(())
        self._max_indexes = max_indexes
        self._dims: dict[str, int] = {}  # spaces known to exist, with their dimension
        self._absent: dict[str, float] = {}  # passages collections seen missing, and when
        self._num_indexed: dict[str, set[str]] = {}  # per space: `num.*` keys given a float index here
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, settings: Settings, filterable: facets.FilterableFields | None = None) -> QdrantVectorIndex:
        if not settings.qdrant_url:
            raise RuntimeError("VIBE_VECTORS=qdrant needs VIBE_QDRANT_URL (e.g. http://qdrant:6333)")
        return cls(QdrantClient(url=settings.qdrant_url, timeout=30),
                   filterable=filterable or facets.fixed_fields(settings.filterable_fields),
                   max_indexes=settings.max_payload_indexes)

    def check_ready(self) -> None:
        """The server answers (a collection list: its cheapest call that needs the server)."""
        self.client.get_collections()

    def collection(self, space: str) -> str:
        return self.prefix + space

    def _known(self, space: str) -> bool:
        """Whether the space's collection exists. Only a positive answer is cached: another
        process may create the collection at any time."""
        if space in self._dims:
            return True
        name = self.collection(space)
        if not self.client.collection_exists(name):
            return False
        info = self.client.get_collection(name)
        params = info.config.params.vectors
        assert isinstance(params, models.VectorParams), f"{name}: expected one unnamed vector"
        self._dims[space] = params.size
        # the `num.*` indexes it has: the bound counts them (another process may have made them)
        self._num_indexed.setdefault(space, set()).update(
            k[len("num."):] for k in (info.payload_schema or {}) if k.startswith("num."))
        if "certs" not in (info.payload_schema or {}):  # a collection made before certificates
            self.client.create_payload_index(name, "certs", field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
        return True

    def ensure_space(self, space: str, dim: int) -> None:
        """Create the collection `space` (a space, or a space's other dimension: `_place`) and its
        payload indexes unless they exist; refuse a dimension that differs from the existing one."""
        with self._lock:
            if not self._known(space):
                self._create(space, dim)
            if self._dims[space] != dim:
                raise ValueError(f"space {space!r} holds {self._dims[space]}-dim vectors; got {dim}")

    def _create(self, space: str, dim: int) -> None:
        name = self.collection(space)
        try:
            self.client.create_collection(
                name,
                # a passages collection's points are a long document's passage vectors, scored by
                # the best one (max-sim); plain collections keep plain vectors (edge_vectors.py)
                vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE,
                                                   multivector_config=_MAX_SIM if space.endswith(PASSAGES_SUFFIX)
                                                   else None),
                hnsw_config=models.HnswConfigDiff(m=0, payload_m=16),  # per-tenant graphs (module doc)
                metadata={"schema_version": SCHEMA_VERSION},
            )
        except Exception:
            if not self.client.collection_exists(name):  # not a lost race with another process
                raise
            if self._known(space):  # the winner's collection, with the winner's dimension
                return
        tenant = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        self.client.create_payload_index(name, "tenant", field_schema=tenant, wait=True)
        for field in KEYWORD_FIELDS:
            self.client.create_payload_index(name, field, field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
        self._dims[space] = dim

    def _place(self, space: str, dim: int, create: bool) -> str | None:
        """The collection of `space`'s vectors of `dim` dimensions. Space names are per tenant,
        so two tenants' `core@v2` may hold different models: the space's collection holds its
        first dimension and any other goes to `<space>~<dim>` (every search filters by tenant, so
        models of one dimension can share a collection). None: none exists and `create` is false."""
        other = f"{space}{DIM_SEP}{dim}"
        with self._lock:
            if self._known(space) and self._dims[space] == dim:
                return space
            if self._known(other):
                return other
            if not create:
                return None
            if not self._known(space):
                self._create(space, dim)
                if self._dims[space] == dim:
                    return space
            self.ensure_space(other, dim)
            return other

    def _names(self, space: str) -> list[str]:
        """Every collection of `space`, whatever its dimension (listed: another process may have
        made one since)."""
        plain, variants = self.collection(space), self.collection(f"{space}{DIM_SEP}")
        return [n[len(self.prefix):] for n in self._ours() if n == plain or n.startswith(variants)]

    def upsert(self, space: str, items: Sequence[tuple[StoredDoc, Sequence[float] | DocVectors]]) -> None:
        by_dim: dict[int, list[tuple[StoredDoc, DocVectors]]] = {}
        for doc, given in items:  # tenants' spaces of one name may differ in dimension (`_place`)
            vecs = as_doc_vectors(given)
            by_dim.setdefault(len(vecs[0]), []).append((doc, vecs))
        for dim, group in by_dim.items():
            name = self._place(space, dim, create=True)
            assert name is not None
            single = [(d, v) for d, v in group if len(v) == 1]
            several = [(d, v) for d, v in group if len(v) > 1]
            if several:
                self.ensure_space(passages_shard(name), dim)
                self._absent.pop(passages_shard(name), None)
            for where, items in ((name, single), (passages_shard(name), several)):
                self._upsert(where, items)
            # a document that grew or shrank past one passage leaves the other collection
            self._delete_from(passages_shard(name), [d.key for d, _ in single])
            self._delete_from(name, [d.key for d, _ in several])

    def _upsert(self, name: str, items: Sequence[tuple[StoredDoc, DocVectors]]) -> None:
        multi = name.endswith(PASSAGES_SUFFIX)
        for batch in upsert_batches(items, UPSERT_BATCH, UPSERT_MAX_BYTES):
            points = [models.PointStruct(id=point_id(d.key), vector=vecs if multi else vecs[0], payload=payload(d))
                      for d, vecs in batch]
            self._index_numbers(name, [d for d, _ in batch])
            self.client.upsert(self.collection(name), points=points, wait=True)

    def _has_passages(self, name: str) -> bool:
        """Whether `name`'s passages collection exists. Asked on every search and upsert, so a
        missing one is believed for ABSENT_TTL seconds (a round trip each time otherwise); one
        created by another process meanwhile is searched that much later, like any indexing lag."""
        passages = passages_shard(name)
        if time.monotonic() - self._absent.get(passages, -ABSENT_TTL) < ABSENT_TTL:
            return False
        if self._known(passages):
            return True
        self._absent[passages] = time.monotonic()
        return False

    def _delete_from(self, name: str, keys: Sequence[DocKey]) -> None:
        if not keys:
            return
        if name.endswith(PASSAGES_SUFFIX) and not self._has_passages(name[: -len(PASSAGES_SUFFIX)]):
            return
        if self._known(name):
            selector = models.PointIdsList(points=[point_id(k) for k in keys])
            self.client.delete(self.collection(name), points_selector=selector, wait=True)

    def _index_numbers(self, space: str, docs: Sequence[StoredDoc]) -> None:
        """A float payload index for each numeric field declared filterable
        (facets.FilterableFields), at most `max_indexes` per collection, asked for without waiting:
        the server builds it in the background while every tenant's requests go on (range
        filters are exact meanwhile, read from the payload). Creating an existing index again is a
        no-op on the server."""
        with self._lock:
            known = self._num_indexed.setdefault(space, set())
            fresh = sorted(facets.index_keys(docs, self._filterable) - known)
            room = max(0, self._max_indexes - len(known))
            todo = fresh[:room]
            known.update(todo)
        if len(fresh) > room:
            log.warning("payload index bound reached", extra={"space": space, "skipped": len(fresh) - room,
                                                              "max": self._max_indexes})
        for key in todo:
            self.client.create_payload_index(self.collection(space), f"num.{key}",
                                             field_schema=models.PayloadSchemaType.FLOAT, wait=False)

    def delete(self, space: str, keys: Sequence[DocKey]) -> None:
        if not keys:
            return
        selector = models.PointIdsList(points=[point_id(k) for k in keys])
        for name in self._names(space):  # the point is in whichever collection its tenant's dimension chose
            self.client.delete(self.collection(name), points_selector=selector, wait=True)

    def search(
        self,
        space: str,
        flt: SearchFilter,
        vector: list[float],
        limit: int,
        only: Sequence[DocKey] | None = None,
    ) -> list[Hit]:
        if limit <= 0 or (only is not None and not only) or facets.unsatisfiable(flt):
            return []
        name = self._place(space, len(vector), create=False)
        if name is None:
            return []
        hits = self._query(name, vector, flt, only, limit)
        if not self._has_passages(name):
            return hits
        # both collections' top `limit`, merged (the vector index's order: by score)
        merged = sorted([*hits, *self._query(passages_shard(name), [vector], flt, only, limit)], key=lambda h: -h.score)
        return merged[:limit]

    def _query(self, name: str, query: list[float] | list[list[float]], flt: SearchFilter,
               only: Sequence[DocKey] | None, limit: int) -> list[Hit]:
        resp = self.client.query_points(
            self.collection(name), query=query, query_filter=search_filter(flt, only), limit=limit,
            with_payload=KEY_PAYLOAD,
        )
        hits = []
        for p in resp.points:
            pl = p.payload or {}
            hits.append(Hit(DocKey(str(pl["tenant"]), str(pl["collection"]), str(pl["doc_id"])), p.score))
        return hits

    def count(self, space: str) -> int:
        return sum(int(self.client.count(self.collection(name), exact=True).count) for name in self._names(space))

    def _ours(self) -> list[str]:
        return [c.name for c in self.client.get_collections().collections if c.name.startswith(self.prefix)]

    def schema_outdated(self) -> bool:
        """A collection of this prefix was created by another (or no) schema version: its points
        lack the metadata payload. Numeric payload ranges need no index; `facet` gets one."""
        for name in self._ours():
            meta = self.client.get_collection(name).config.metadata or {}
            if meta.get("schema_version") != SCHEMA_VERSION:
                return True
        return False

    def reset_schema(self) -> None:
        """Delete every collection of this prefix; they are created again, with the current
        version, by the replay's first upserts."""
        with self._lock:
            for name in self._ours():
                self.client.delete_collection(name)
            self._dims.clear()
            self._num_indexed.clear()

    def drop(self, space: str) -> None:
        """Delete the space's collection (tests, and a rebuild from the document store)."""
        with self._lock:
            for name in self._names(space) or [space]:
                self.client.delete_collection(self.collection(name))
                self._dims.pop(name, None)
                self._num_indexed.pop(name, None)

    def close(self) -> None:
        self.client.close()
