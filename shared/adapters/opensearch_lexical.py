"""BM25 on OpenSearch (distributed profile): one index per tenant, ACL and collection inside the query.

Semantics mirror the embedded adapter (tantivy_lexical.py): `title` and `all` (title and `body`, every
other text field (shared.text.hashing.doc_text), through `copy_to`) with the same boosts, the same
analysis and BM25 k1/b (shared/adapters/analysis.py: one definition for both engines); the
tenant/ACL/collection/metadata filter sits in `bool.filter`, which selects
documents before scoring and adds nothing to the score. Never `post_filter`: that runs after
scoring, so hits, counts, aggregations and highlights would have seen unreadable documents.

Why one index per tenant: BM25's IDF and average field length are per shard. Sharing an index
(even with routing by tenant, which only picks the shard) lets one tenant's writes move another
tenant's scores, the STRESS side channel between tenants. Each tenant index has ONE primary
shard, so its statistics are exactly the tenant's and `query_then_fetch` needs no DFS phase.
Requests still carry `routing=<tenant>` and a `tenant` term filter: harmless here, and they keep
a tenant on one shard and inside its own documents should the layout ever be changed.

What it costs at 10k tenants: 10k indices = 10k primaries, plus 10k replicas on a multi-node
cluster (`auto_expand_replicas: 0-1`). OpenSearch's default `cluster.max_shards_per_node` is
1,000, so 20k shards need >= 20 data nodes or a raised limit; the usual sizing rule (<= 20-25
shards per GB of heap) asks for ~1 TB of heap across the cluster, although small, idle shards
cost far less (`index.search.idle.after` stops refreshing them). Every index's settings and
mapping live in the cluster state (~3-5 KB each: ~30-50 MB published to every node), and index
creation is serialised through the cluster manager, so a burst of new tenants queues there.
The alternatives: (a) cells — several smaller clusters, each holding 1-2k tenant indices, with a
tenant -> cluster map in the wiring; keeps the property and scales out, at the price of one more
lookup. (b) One shared index with routing: cheap (a handful of shards) but shard-level statistics
mix tenants, so it reopens that side channel and is only acceptable for tenants that accept the leak.
(c) Close or snapshot-and-delete indices of dormant tenants (closed indices cost no heap) and
rebuild them from the document store's change log on their next write.

Refresh semantics: `apply` sends its bulk request with `refresh=wait_for`. The call returns once
the next scheduled refresh (`index.refresh_interval`, 1 s) has made the writes searchable, which
the port requires ("visible to searches when it returns"), without forcing a refresh per write as
`refresh=true` would (one tiny segment per call, merge pressure under bulk load). The price is up
to one refresh interval of latency per `apply`; `VIBE_OPENSEARCH_REFRESH=true` (`refresh="true"`)
trades that for a segment per write.

Errors: a bulk response is checked item by item; any failed item raises `OpenSearchBulkError`
(and is logged with id, status and error type, never document text). The index follower then
does not advance its position in the store's change log, so the batch is replayed (writes are
idempotent: same `_id`), and an accepted write is never dropped.

Certificates: a document's `_certs` are the keyword `certs`, their number `certs_n` (absent when
none). A caller passes a document when it holds at least `certs_n` of the document's
certificates, `terms_set` with the caller's certificates: that is all of them. Both fields joined
the mapping after the first release: an index made before gets them at this code's first write to
it (`CERT_MAPPING`), and a document without `certs_n` (every one written before) requires none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as ServerUnreachable
from opensearchpy.exceptions import RequestError, TransportError

from shared.adapters import analysis, facets
from shared.adapters.analysis import ENGLISH_ONLY, LanguageMap
from shared.config import Settings
from shared.errors import ErrorCode, IndexUnavailable, VibeError
from shared.model import DocKey, Hit, StoredDoc
from shared.ports import Candidates, FieldCondition, ResolvedCandidates, SearchFilter
from shared.text.hashing import doc_text

log = logging.getLogger("vibe.opensearch")

INDEX_PREFIX = "vibe-lex-"
FIELD_BOOSTS = analysis.FIELD_BOOSTS  # the embedded adapter's boosts: both profiles rank alike
BULK_ACTIONS = 1000  # actions per bulk request at most, few round trips
# ... and bytes per bulk request at most (NDJSON as sent): OpenSearch's guidance is 5-15 MB per
# bulk, and `http.max_content_length` (100 MB) refuses the whole request, every tenant's
# changes in it, above that. One action larger than this still goes, alone.
BULK_MAX_BYTES = 5 * 1_048_576
# Longest `acl` term indexed, in characters (Lucene refuses a term over 32,766 bytes, which
# fails the bulk item). A longer principal is not indexed, so no filter term matches it: a
# document whose ACL token was dropped is unreadable through it (fail closed), never readable.
# The API bounds principals below this (VIBE_ACL_MAX_PRINCIPAL_BYTES <= 1024).
ACL_IGNORE_ABOVE = 1024
MAX_ID_BYTES = 512  # OpenSearch's limit on `_id`
UNAVAILABLE_STATUSES = {429, 502, 503, 504}  # the server is there but cannot serve now
# A search not answered by then answers the read `index_unavailable` (a hung server, not a slow
# query: a filtered BM25 search over one tenant's index takes milliseconds).
SEARCH_TIMEOUT_SECONDS = 10
# Highlights look at most this far into a field: past `index.highlight.max_analyzed_offset`
# (1,000,000 characters by default) OpenSearch refuses the whole highlight request instead, so one
# long document (VIBE_MAX_DOC_BYTES allows 1 MiB) failed every read whose page held it.
HIGHLIGHT_MAX_CHARS = 999_999
# The embedded adapter's markup; `encoder: html` escapes the document's own text (`<`, `&`,
# quotes) around the tags, as tantivy's snippets do: a highlight is HTML a page may render.
# `require_field_match: false`: the query scores `title` and `all`, and `body` is highlighted with
# its terms too.
HIGHLIGHT = {"pre_tags": ["<b>"], "post_tags": ["</b>"], "encoder": "html", "require_field_match": False,
             "max_analyzer_offset": HIGHLIGHT_MAX_CHARS}
KEY_FIELDS = ["collection", "doc_id"]
# The template's `_meta.schema_version`; the embedded adapter's number, since both change
# together (fields and analysis; 6: Dutch stems with Lucene's Kraaij-Pohlmann stemmer, the token
# bound counted as in 5). Another number on the server: the follower rebuilds.
SCHEMA_VERSION = 6


class OpenSearchBulkError(RuntimeError):
    """Some items of a bulk request failed; `items` lists (id, status, error type)."""

    def __init__(self, items: list[tuple[str, int, str]]):
        shown = ", ".join(f"{i} ({s} {t})" for i, s, t in items[:5])
        super().__init__(f"{len(items)} OpenSearch bulk item(s) failed: {shown}")
        self.items = items


class OpenSearchBulkBusy(OpenSearchBulkError, IndexUnavailable):
    """Items refused for now (429: the write queue is full; 503: a shard unavailable), not for
    good: the follower retries the batch rather than quarantining them."""


def unavailable(e: Exception) -> bool:
    """The server is away or cannot serve now (as opposed to refusing the request)."""
    return isinstance(e, ServerUnreachable) or (isinstance(e, TransportError) and e.status_code in UNAVAILABLE_STATUSES)


def index_name(tenant: str, prefix: str = INDEX_PREFIX) -> str:
    """A valid (lowercase, no `*?,/\\"<>| #`), collision-free index name for any tenant string:
    a readable part plus a hash of the exact tenant, since lowercasing alone would merge
    tenants "Acme" and "acme"."""
    safe = re.sub(r"[^a-z0-9_-]", "_", tenant.lower())[:40]
    return f"{prefix}{safe}-{hashlib.blake2b(tenant.encode(), digest_size=8).hexdigest()}"


def doc_id(key: DocKey) -> str:
    """`collection/id` when it fits OpenSearch's 512-byte `_id`, else a hash of it (ids may be
    256 characters of up to 4 bytes each). Hits are read from doc values, never from `_id`."""
    ref = key.ref
    if len(ref.encode()) <= MAX_ID_BYTES:
        return ref
    return "~" + hashlib.blake2b(ref.encode(), digest_size=20).hexdigest()


def template_name(prefix: str = INDEX_PREFIX) -> str:
    return prefix + "template"


def text_mappings(languages: LanguageMap) -> dict[str, Any]:
    """`title`, `body` (both copied to `all`) and `all` for each language in use, analysed in it
    (English keeps these names; another language's carry `_<code>`, as in tantivy)."""
    out: dict[str, Any] = {}
    for lang in languages.languages():
        a, everything = lang.analyzer, lang.field("all")
        out[lang.field("title")] = {"type": "text", "analyzer": a, "copy_to": everything}
        out[lang.field("body")] = {"type": "text", "analyzer": a, "copy_to": everything}
        out[everything] = {"type": "text", "analyzer": a, "index_options": "freqs"}
    return out


def template_meta(languages: LanguageMap) -> dict[str, Any]:
    """The template's `_meta`: the schema version and, when not English only, the language
    map's stamp (another stamp on the server: the follower rebuilds)."""
    stamp = languages.stamp()
    return {"schema_version": SCHEMA_VERSION, **({"languages": stamp} if stamp else {})}


# Added to the mapping of an index made before certificates when this process first writes to it
# (`_ensure_index`): adding fields is allowed on a live index, so no rebuild is needed and old
# documents simply lack them.
CERT_MAPPING: dict[str, Any] = {"certs": {"type": "keyword"}, "certs_n": {"type": "integer"}}


def template_body(prefix: str = INDEX_PREFIX, languages: LanguageMap = ENGLISH_ONLY) -> dict[str, Any]:
    """Settings and mappings of every tenant index (a composable index template)."""
    keyword = {"type": "keyword"}
    mappings = {
        "_meta": template_meta(languages),
        "dynamic": "strict",  # documents carry only these fields; anything else is a bug
        "properties": {
            "tenant": keyword,
            "collection": keyword,
            "doc_id": keyword,
            "acl": {"type": "keyword", "ignore_above": ACL_IGNORE_ABOVE},
            # Metadata filter tokens (shared/adapters/facets.py): one keyword field for every
            # document field name, so arbitrary names never grow the mapping (1,000-field limit).
            "facet": keyword,
            **CERT_MAPPING,
            **text_mappings(languages),
        },
    }
    settings = {
        "number_of_shards": 1,  # per-tenant BM25 statistics (module docstring)
        "auto_expand_replicas": "0-1",  # green on one node, one replica once a second node joins
        "refresh_interval": "1s",
        "analysis": analysis.opensearch_analysis(languages.languages()),
        "similarity": analysis.opensearch_similarity(),  # tantivy's fixed k1/b
    }
    # Priority: composable templates whose patterns overlap must differ in priority; ours is
    # above the built-in ones (which stay below 100) so it wins for its own prefix.
    return {"index_patterns": [f"{prefix}*"], "priority": 200,
            "template": {"settings": settings, "mappings": mappings}}


def text_fields(d: StoredDoc) -> tuple[str, str]:
    """(title, body) exactly as the embedded adapter splits a document."""
    title = d.fields.get("title")
    rest = {k: v for k, v in d.fields.items() if k != "title"}
    return (title if isinstance(title, str) else ""), doc_text(rest, None)


def source(d: StoredDoc, languages: LanguageMap = ENGLISH_ONLY) -> dict[str, Any]:
    title, body = text_fields(d)
    k, lang = d.key, languages.for_doc(d.key.tenant, d.key.collection)
    out: dict[str, Any] = {"tenant": k.tenant, "collection": k.collection, "doc_id": k.doc_id, "acl": list(d.acl),
                           lang.field("title"): title, lang.field("body"): body,
                           "facet": facets.doc_tokens(d.fields, trie=False)}
    if d.certs:
        certs = sorted(set(d.certs))  # terms_set counts distinct matching terms
        out |= {"certs": certs, "certs_n": len(certs)}
    return out


def cert_clause(held: frozenset[str]) -> dict[str, Any]:
    """Documents whose certificates the caller all holds: those with none (no `certs_n`), and
    those matching at least `certs_n` of the caller's certificates (each document's own count)."""
    none_required: dict[str, Any] = {"bool": {"must_not": [{"exists": {"field": "certs_n"}}]}}
    if not held:
        return none_required
    all_held = {"terms_set": {"certs": {"terms": sorted(held), "minimum_should_match_field": "certs_n"}}}
    return {"bool": {"should": [none_required, all_held], "minimum_should_match": 1}}


def condition_clause(cond: FieldCondition) -> dict[str, Any]:
    """One metadata condition on the `facet` tokens: `terms` for eq/in, a keyword `range` over
    the fixed-width number tokens for ranges (callers drop unsatisfiable filters first)."""
    if cond.op == "range":
        bounds = facets.key_bounds(cond)
        assert bounds is not None
        lo, hi = bounds
        return {"range": {"facet": {"gte": facets.num_token(cond.field, lo), "lte": facets.num_token(cond.field, hi)}}}
    return {"terms": {"facet": facets.eq_tokens(cond)}}


def filter_clauses(flt: SearchFilter) -> list[dict[str, Any]]:
    """Tenant, ACL, certificates, collections, metadata conditions and the id allow-list: `bool.filter`
    clauses (select before scoring, score 0)."""
    clauses: list[dict[str, Any]] = [{"term": {"tenant": flt.tenant}}, {"terms": {"acl": list(flt.acl)}},
                                     cert_clause(flt.certs)]
    if flt.collections is not None:
        clauses.append({"terms": {"collection": list(flt.collections)}})
    clauses += [condition_clause(c) for c in flt.where]
    refs = facets.id_refs(flt)
    if refs is not None and flt.ids is not None:
        keys = [k for k in flt.ids if k.tenant == flt.tenant]
        clauses.append({"ids": {"values": list(dict.fromkeys(doc_id(k) for k in keys))}})
    return clauses


def bm25_query(flt: SearchFilter, text: str, extra: Sequence[dict[str, Any]] = (),
               languages: LanguageMap = ENGLISH_ONLY) -> dict[str, Any]:
    # minimum_should_match is required: next to a filter, `should` clauses become optional and
    # every permitted document would match with score 0. `match` analyses the text with each
    # field's analyzer: once per language of the collections searched, as tantivy's query.
    should = [{"match": {lang.field(field): {"query": text, "boost": boost}}}
              for lang in languages.in_scope(flt.collections, flt.tenant) for field, boost in FIELD_BOOSTS.items()]
    return {"bool": {"should": should, "minimum_should_match": 1, "filter": [*filter_clauses(flt), *extra]}}


def search_body(flt: SearchFilter, text: str, limit: int, languages: LanguageMap = ENGLISH_ONLY) -> dict[str, Any]:
    return {
        "size": limit,
        "track_total_hits": False,  # nobody reads a total; skipping it lets Lucene stop early
        "_source": False,
        "docvalue_fields": KEY_FIELDS,
        "query": bm25_query(flt, text, languages=languages),
    }


def highlighted_fields(flt: SearchFilter, languages: LanguageMap) -> list[tuple[str, str]]:
    """(title field, body field) of each language searched, English's first when in scope."""
    return [(lang.field("title"), lang.field("body")) for lang in languages.in_scope(flt.collections, flt.tenant)]


def highlight_body(flt: SearchFilter, text: str, ids: Sequence[str],
                   languages: LanguageMap = ENGLISH_ONLY) -> dict[str, Any]:
    """The highlight request is the BM25 query itself, restricted to the given ids: a document
    outside the caller's filter cannot match, so it is never highlighted."""
    fields: dict[str, Any] = {}
    for title, body in highlighted_fields(flt, languages):
        fields[title] = {"number_of_fragments": 0}
        fields[body] = {"fragment_size": 150, "number_of_fragments": 1}
    return {
        "size": len(ids),
        "track_total_hits": False,
        "_source": False,
        "docvalue_fields": KEY_FIELDS,
        "query": bm25_query(flt, text, [{"ids": {"values": list(ids)}}], languages),
        "highlight": {**HIGHLIGHT, "fields": fields},
    }


def bulk_actions(docs: Sequence[StoredDoc], deletes: Sequence[DocKey], prefix: str,
                 languages: LanguageMap = ENGLISH_ONLY) -> list[list[dict[str, Any]]]:
    """The bulk request's actions, each a group of NDJSON lines (`delete`: one line, `index`:
    action + source). Deletes come first, so a key in both lists ends up indexed, as in the
    embedded adapter."""
    groups: list[list[dict[str, Any]]] = []
    for k in deletes:
        groups.append([{"delete": {"_index": index_name(k.tenant, prefix), "_id": doc_id(k), "routing": k.tenant}}])
    for d in docs:
        k = d.key
        meta = {"_index": index_name(k.tenant, prefix), "_id": doc_id(k), "routing": k.tenant}
        groups.append([{"index": meta}, source(d, languages)])
    return groups


def ndjson_size(lines: Sequence[dict[str, Any]]) -> int:
    """Bytes of these lines as NDJSON, serialised as opensearch-py does (compact, UTF-8)."""
    return sum(len(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()) + 1 for line in lines)


def bulk_batches(groups: Sequence[list[dict[str, Any]]], max_actions: int,
                 max_bytes: int) -> list[list[dict[str, Any]]]:
    """Consecutive groups packed into bulk bodies of at most `max_actions` actions and
    `max_bytes` bytes (a single larger action is sent alone). Order is kept, so a delete still
    precedes the index of the same key."""
    batches: list[list[dict[str, Any]]] = []
    lines: list[dict[str, Any]] = []
    actions = size = 0
    for g in groups:
        n = ndjson_size(g)
        if lines and (actions + 1 > max_actions or size + n > max_bytes):
            batches.append(lines)
            lines, actions, size = [], 0, 0
        lines += g
        actions += 1
        size += n
    if lines:
        batches.append(lines)
    return batches


def _indexes(lines: Sequence[dict[str, Any]]) -> set[str]:
    """The indexes a bulk body writes to, read from its action lines."""
    out: set[str] = set()
    for line in lines:
        if len(line) == 1:
            (op, meta), = line.items()
            if op in ("index", "delete") and isinstance(meta, dict) and "_index" in meta:
                out.add(str(meta["_index"]))
    return out


def last_for_an_index(batches: Sequence[Sequence[dict[str, Any]]]) -> list[bool]:
    """For each batch, whether it is the last one to write to one of its indexes."""
    seen: set[str] = set()
    last = [False] * len(batches)
    for i in range(len(batches) - 1, -1, -1):
        touched = _indexes(batches[i])
        last[i] = bool(touched - seen)
        seen |= touched
    return last


def failed_items(response: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(id, status, error type) of every failed item; deleting a missing document is not a
    failure (the delete is already true)."""
    out = []
    for item in response.get("items", []):
        (op, res), = item.items()
        if "error" in res and not (op == "delete" and res.get("status") == 404):
            err = res["error"]
            kind = err.get("type", "unknown") if isinstance(err, dict) else str(err)
            out.append((str(res.get("_id")), int(res.get("status", 0)), kind))
    return out


def _key(tenant: str, hit: dict[str, Any]) -> DocKey:
    f = hit["fields"]
    return DocKey(tenant, str(f["collection"][0]), str(f["doc_id"][0]))


def _permitted(flt: SearchFilter, d: StoredDoc) -> bool:
    if d.key.tenant != flt.tenant or not set(flt.acl) & set(d.acl) or not flt.admits_certs(d.certs):
        return False
    if flt.collections is not None and d.key.collection not in flt.collections:
        return False
    return facets.permits(flt, d.key.ref, d.fields)


READY_TIMEOUT_SECONDS = 2.0  # /readyz: a ping, well under a balancer's probe interval


class OpenSearchLexicalIndex:
    """LexicalIndex port on OpenSearch; `client` is any opensearch-py `OpenSearch`."""

    def __init__(self, client: OpenSearch, prefix: str = INDEX_PREFIX, refresh: str = "wait_for",
                 languages: LanguageMap = ENGLISH_ONLY):
        self.client = client
        self.prefix = prefix
        self.refresh = refresh
        self.languages = languages
        self._template_ready = False
        self._indices: set[str] = set()  # created (or found) by this process

    @classmethod
    def from_settings(cls, settings: Settings, languages: LanguageMap | None = None) -> OpenSearchLexicalIndex:
        if not settings.opensearch_url:
            raise RuntimeError("VIBE_LEXICAL=opensearch needs VIBE_OPENSEARCH_URL (e.g. http://opensearch:9200)")
        # No retry on a timeout: a server that hangs would hold a read for four timeouts. A write that
        # times out is not lost (the follower keeps its position and applies it at its next sync).
        client = OpenSearch(hosts=[settings.opensearch_url], timeout=30, max_retries=3, retry_on_timeout=False)
        return cls(client, prefix=settings.opensearch_prefix, refresh=settings.opensearch_refresh,
                   languages=languages or settings.language_map())

    def check_ready(self) -> None:
        """The cluster answers (`ping` says False rather than raise: turned into an error)."""
        if not self.client.ping(request_timeout=READY_TIMEOUT_SECONDS):
            raise IndexUnavailable("OpenSearch does not answer")

    def _ensure_index(self, tenant: str) -> None:
        name = index_name(tenant, self.prefix)
        if name in self._indices:
            return
        if not self._template_ready:
            self._put_template()
        try:
            self.client.indices.create(index=name)  # settings and mappings come from the template
        except RequestError as e:
            if e.error != "resource_already_exists_exception":  # another process made it first
                raise
            # made by this or another process, maybe from a template that predates certificates:
            # adding fields is allowed on a live index and a no-op when they are there
            self.client.indices.put_mapping(index=name, body={"properties": CERT_MAPPING})
        self._indices.add(name)

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        try:
            for tenant in dict.fromkeys(d.key.tenant for d in docs):
                self._ensure_index(tenant)
            actions = bulk_actions(docs, deletes, self.prefix, self.languages)
            batches = bulk_batches(actions, BULK_ACTIONS, BULK_MAX_BYTES)
            for batch, last in zip(batches, last_for_an_index(batches), strict=True):
                # One refresh makes every earlier write to its index searchable, so only an
                # index's last batch waits for it: a 5,000-document apply waits one refresh
                # interval instead of five, one after another.
                self._bulk(batch, self.refresh if last else "false")
        except TransportError as e:  # ServerUnreachable too
            if unavailable(e):
                raise IndexUnavailable(f"OpenSearch is not answering: {type(e).__name__}") from e
            raise

    def _bulk(self, lines: list[dict[str, Any]], refresh: str) -> None:
        response = self.client.bulk(body=lines, refresh=refresh)
        failed = failed_items(response) if response.get("errors") else []
        for item_id, status, kind in failed:
            log.error("bulk item failed", extra={"doc": item_id, "status": status, "error_type": kind})
        if failed:
            busy = any(status in UNAVAILABLE_STATUSES for _, status, _ in failed)
            raise (OpenSearchBulkBusy if busy else OpenSearchBulkError)(failed)

    def _search(self, tenant: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        # ignore_unavailable: a tenant that never wrote has no index and simply no hits.
        try:
            resp = self.client.search(index=index_name(tenant, self.prefix), body=body, routing=tenant,
                                      ignore_unavailable=True, request_timeout=SEARCH_TIMEOUT_SECONDS)
        except TransportError as e:  # ServerUnreachable too
            if unavailable(e):
                # A read cannot be answered without the keyword leg: a stable 503 the client may
                # retry, never an internal error (writes are unaffected: the store of record has
                # them, and the follower applies them once the server is back).
                log.warning("opensearch unavailable", extra={"error_type": type(e).__name__})
                raise VibeError(ErrorCode.INDEX_UNAVAILABLE,
                                "the keyword index (OpenSearch) is not answering; try again shortly") from e
            raise
        return list(resp["hits"]["hits"])

    def search(self, flt: SearchFilter, text: str, limit: int) -> list[Hit]:
        if not text.strip() or limit <= 0 or not flt.acl or facets.unsatisfiable(flt):
            return []
        hits = self._search(flt.tenant, search_body(flt, text, limit, self.languages))
        return [Hit(_key(flt.tenant, h), float(h["_score"])) for h in hits]

    def candidates(self, flt: SearchFilter, text: str, limit: int) -> Candidates:
        """The server returns ids with the scores: nothing is left to look up."""
        return ResolvedCandidates(self.search(flt, text, limit))

    def highlights(
        self, flt: SearchFilter, text: str, docs: Sequence[StoredDoc]
    ) -> dict[DocKey, list[str]]:
        """Snippets for the given documents, from a request that carries the caller's filter;
        documents outside the filter are not even asked for."""
        permitted = [d for d in docs if _permitted(flt, d)]
        if not permitted or not text.strip():
            return {}
        body = highlight_body(flt, text, [doc_id(d.key) for d in permitted], self.languages)
        fields = [f for pair in highlighted_fields(flt, self.languages) for f in pair]
        out: dict[DocKey, list[str]] = {}
        for h in self._search(flt.tenant, body):
            hl = h.get("highlight", {})
            snippets = [s for f in fields for s in hl.get(f, [])]
            if snippets:
                out[_key(flt.tenant, h)] = snippets
        return out

    def schema_outdated(self) -> bool:
        """The server's template for this prefix carries another (or no) schema version or
        language map while tenant indices exist: they lack fields or analysis this code relies on."""
        resp = self.client.indices.get_index_template(name=template_name(self.prefix), ignore=[404])
        found = resp.get("index_templates", []) if isinstance(resp, dict) else []
        if found:
            meta = found[0].get("index_template", {}).get("template", {}).get("mappings", {}).get("_meta", {})
            if meta == template_meta(self.languages):
                return False
        exists = self.client.indices.get(index=self.prefix + "*", ignore_unavailable=True, allow_no_indices=True)
        return bool(exists)

    def reset_schema(self) -> None:
        """Drop every tenant index and put the current template at once, so a replica writing
        meanwhile creates its index with the new mapping; the caller replays the log."""
        self.drop()
        self._put_template()
        log.info("lexical index reset", extra={"schema_version": SCHEMA_VERSION, **template_meta(self.languages)})

    def _put_template(self) -> None:
        body = template_body(self.prefix, self.languages)
        self.client.indices.put_index_template(name=template_name(self.prefix), body=body)
        self._template_ready = True

    def drop(self) -> None:
        """Delete every index under this prefix and the template (tests, rebuilds from the store)."""
        self.client.indices.delete(index=self.prefix + "*", ignore_unavailable=True, allow_no_indices=True)
        self.client.indices.delete_index_template(name=template_name(self.prefix), ignore=[404])
        self._indices.clear()
        self._template_ready = False

    def close(self) -> None:
        self.client.close()
