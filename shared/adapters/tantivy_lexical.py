"""Embedded BM25 index on tantivy: one index per tenant (and per analysis language the tenant
writes in), ACL and collection inside the query.

Why one index per tenant: BM25's IDF and average field length come from the index a query
runs on. A shared index would let one tenant's writes move another tenant's scores (the
STRESS side channel). Cost: one directory per tenant and one writer (15 MB
arena) per recently written tenant; at most `max_writers` stay open (least recently used
closes first), so 10k tenants cost 10k small folders, not 150 GB of arenas.

Why one index per language too (a collection in another language, shared/text/languages.py):
tantivy's BM25 takes the document count and the average field length over every document of the
index, also those with nothing in the field. With a French collection's fields beside the English
ones in one index, 14,600 French documents took CISI's English nDCG@10 from 0.408 to 0.340
(bench/lexical.py's mixed-language setup, both languages in one index; with an index per
language it stays 0.408 either way).
Lucene counts only the documents that have the field, so OpenSearch keeps per-language fields in
one index (opensearch_lexical.py) and ranks as this does.
A search over collections of several languages queries each language's index and merges by score.

Why tantivy: 0.33 ms for a filtered BM25 query at 100k documents on this machine, against
0.57 ms for SQLite FTS5 with filter tokens and 10 ms with the filter as a join.
"""

from __future__ import annotations

import hashlib
import html
import logging
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path

import tantivy
from tantivy import Occur, Query, SchemaBuilder

from shared.adapters import analysis, facets
from shared.adapters.analysis import ENGLISH_ONLY, Language, LanguageMap
from shared.adapters.schema_stamp import FolderSchemaStamp
from shared.model import DocKey, Hit, StoredDoc, doc_key, hit
from shared.ports import Candidates, ResolvedCandidates, SearchFilter
from shared.readiness import folder_ready
from shared.text.hashing import doc_text

log = logging.getLogger("vibe.tantivy")

# What the files under `root` were written with: the fields (2: `facet`, the metadata filter
# tokens; 3: `all`; 5: no `body`) and the analysis (4: shared/adapters/analysis.py; 6: İ folded and the token
# bound in UTF-16 units, as OpenSearch). A different number means
# the index cannot answer as this code expects, so the follower rebuilds it from the store
# (shared/indexing.py `_ensure_schema`).
SCHEMA_VERSION = 6
# Each query term is scored in `title` and `all` (title and body) with these weights; the choice
# and its measurements: shared/adapters/analysis.py.
FIELD_BOOSTS = analysis.FIELD_BOOSTS
WRITER_HEAP = 15_000_000
# A document's certificates are `facet` tokens under this prefix. No metadata token can start so:
# field names starting with `_` are refused on write and long tokens are hashed to `~...`.
CERT_PREFIX = f"_certs{facets.SEP}"
CERT_SET_ABOVE = 64  # certificates to exclude above which one term-set query is cheaper
TERM_SET_ABOVE = 1000  # values in a filter clause above which one term-set query is cheaper


def _schema(lang: Language) -> tantivy.Schema:
    sb = SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("collection", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("acl", stored=False, tokenizer_name="raw", index_option="basic")
    # Metadata filter tokens (shared/adapters/facets.py), numbers trie-coded for ranges.
    sb.add_text_field("facet", stored=False, tokenizer_name="raw", index_option="basic")
    # Text is not stored: the document store has it. Fetching ~500 stored documents per query
    # cost 9 ms at 100k; with only the key stored the fetch is a fraction of that.
    sb.add_text_field("title", stored=False, tokenizer_name=lang.analyzer, index_option="position")
    # Title and body as one field (its own length normalisation); snippets of the body come from
    # it too (a snippet re-analyses the text, so positions are not needed).
    sb.add_text_field("all", stored=False, tokenizer_name=lang.analyzer, index_option="freq")
    return sb.build()


def schema_version(languages: LanguageMap) -> str:
    """`SCHEMA_VERSION`, plus the language map's stamp when it is not English only."""
    stamp = languages.stamp()
    return f"{SCHEMA_VERSION}-{stamp}" if stamp else str(SCHEMA_VERSION)


def tenant_dirname(tenant: str) -> str:
    """A filesystem-safe, collision-free folder name for any tenant string."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", tenant)[:40]
    return f"{safe}-{hashlib.blake2b(tenant.encode(), digest_size=8).hexdigest()}"


class _TenantIndex:
    """One tenant's documents of one analysis language."""

    def __init__(self, path: Path, lang: Language, analyzer: tantivy.TextAnalyzer):
        path.mkdir(parents=True, exist_ok=True)
        self.index = tantivy.Index(_schema(lang), path=str(path), reuse=True)
        self.index.register_tokenizer(lang.analyzer, analyzer)
        self.lang = lang
        self.schema = self.index.schema
        self.writer: tantivy.IndexWriter | None = None
        self.lock = threading.Lock()

    def close_writer(self) -> None:
        with self.lock:
            if self.writer is not None:
                self.writer.wait_merging_threads()
                self.writer = None

    def write(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        with self.lock:
            if self.writer is None:
                self.writer = self.index.writer(heap_size=WRITER_HEAP, num_threads=1)
            for k in deletes:
                self.writer.delete_documents_by_term("key", k.ref)
            for d in docs:
                self.writer.delete_documents_by_term("key", d.key.ref)
                self.writer.add_document(_to_tantivy(d))
            self.writer.commit()
            self.index.reload()


def _text_fields(d: StoredDoc) -> tuple[str, str]:
    title = d.fields.get("title")
    rest = {k: v for k, v in d.fields.items() if k != "title"}
    return (title if isinstance(title, str) else ""), doc_text(rest, None)


def _to_tantivy(d: StoredDoc) -> tantivy.Document:
    title, body = (analysis.tantivy_text(t) for t in _text_fields(d))
    tokens = facets.doc_tokens(d.fields, trie=True) + [CERT_PREFIX + c for c in d.certs]
    return tantivy.Document(key=d.key.ref, collection=d.key.collection, acl=list(d.acl), title=title,
                            all=[title, body], facet=tokens)


def _unheld_certs(searcher: tantivy.Searcher, held: frozenset[str]) -> list[str]:
    """The certificate tokens of this snapshot of a tenant's index that the caller does not hold.
    tantivy has no `terms_set` (at least n of these terms, n read per document), so "every
    certificate a document requires is held" is asked as "it has none of the others": the
    others are read from the term dictionary of the very snapshot the query runs on, so a
    document committed since cannot bring one the list lacks. The list is bounded by the
    tenant's distinct certificates (terms of deleted documents linger until a merge: a longer
    exclusion list, never a wrong answer)."""
    return [t for t, _ in searcher.terms_with_prefix("facet", CERT_PREFIX) if t[len(CERT_PREFIX):] not in held]


def _snippet_html(gen: tantivy.SnippetGenerator, field: str, text: str) -> str:
    """The field's snippet as HTML. tantivy analyses (and so highlights) the text as indexed,
    `analysis.tantivy_text`; where that differs from what the document says (an İ, a token over
    the length bound), the snippet is rendered from the document's own text at the same character
    offsets, escaped as tantivy escapes."""
    seen = analysis.tantivy_text(text)
    snippet = gen.snippet_from_doc(tantivy.Document(**{field: seen}))
    return str(snippet.to_html()) if seen == text else render_snippet(snippet, seen, text)


def render_snippet(snippet: tantivy.Snippet, seen: str, text: str) -> str:
    """`snippet` (of `seen`) as HTML of `text`, a text of the same length in characters."""
    frag = snippet.fragment_range()
    if frag.start == frag.end:
        return ""
    raw = seen.encode()

    def char_at(byte: int) -> int:
        return len(raw[:byte].decode())

    out, at = [], char_at(frag.start)
    for h in snippet.highlighted():
        start, end = char_at(frag.start + h.start), char_at(frag.start + h.end)
        out += [html.escape(text[at:start]), "<b>", html.escape(text[start:end]), "</b>"]
        at = end
    out.append(html.escape(text[at:char_at(frag.end)]))
    return "".join(out)


class _Addressed:
    """A search's hits as (score, address) pairs, best first, with keys read from the stored
    documents as they are asked for; `which[i]` is the searcher of hit i (None: all the first).
    Reading a stored document is most of a 500-hit search's time (0.92 ms
    against 0.25 ms for the engine's own search at 100k documents), and a first page needs 11.
    The searchers (one per language index searched) are kept: they pin the segments the
    addresses point into, so a later `keys` reads the same snapshot whatever was committed or
    merged since."""

    def __init__(self, tenant: str, searchers: list[tantivy.Searcher],
                 found: list[tuple[float, tantivy.DocAddress]], which: list[int] | None = None):
        self._tenant, self._found, self._which = tenant, found, which
        self._searchers: list[tantivy.Searcher] | None = searchers
        self.scores = [score for score, _ in found]
        self._keys: list[DocKey] = []
        self._lock = threading.Lock()  # a stream's first answer and its tail may ask from two threads

    def keys(self, n: int) -> list[DocKey]:
        with self._lock:
            return self._read(n)

    def _read(self, n: int) -> list[DocKey]:
        have = self._keys
        if n > len(have):
            assert self._searchers is not None  # dropped only once every key is read
            tenant, docs = self._tenant, [sr.doc for sr in self._searchers]  # hot loop: ~500 hits
            start, end = len(have), min(n, len(self._found))
            which = self._which[start:end] if self._which is not None else [0] * (end - start)
            for (_, addr), i in zip(self._found[start:end], which, strict=True):
                collection, _, doc_id = str(docs[i](addr).get_first("key")).partition("/")
                have.append(doc_key(tenant, collection, doc_id))
            if len(have) == len(self._found):
                self._searchers = None  # every key read: the snapshot is no longer needed
        return have[:n]


class TantivyLexicalIndex:
    """LexicalIndex port on tantivy, one index per tenant under `root`."""

    def __init__(self, root: Path, max_writers: int = 16, languages: LanguageMap = ENGLISH_ONLY):
        self.root = root
        self.max_writers = max_writers
        self.languages = languages
        self.analyzers = {lang: analysis.TantivyAnalyzer(lang) for lang in languages.languages()}
        self._tenants: dict[tuple[str, Language], _TenantIndex] = {}
        self._writers: OrderedDict[tuple[str, Language], None] = OrderedDict()  # open writers, LRU
        self._lock = threading.Lock()
        # The language map is part of the layout: another map, another stamp, a rebuild.
        self.schema_version = schema_version(languages)
        self._stamp = FolderSchemaStamp(root, self.schema_version)

    def schema_outdated(self) -> bool:
        """Tenant indexes exist but were written by another schema version (or before versions)."""
        return self._stamp.outdated()

    def reset_schema(self) -> None:
        """Delete every tenant index and record the current version; the caller replays the log."""
        self.close()
        self._stamp.empty_and_stamp()
        log.info("lexical index reset", extra={"schema_version": self.schema_version})

    def _tenant(self, tenant: str, lang: Language, create: bool) -> _TenantIndex | None:
        with self._lock:
            idx = self._tenants.get((tenant, lang))
            if idx is None:
                path = self.root / (tenant_dirname(tenant) + lang.suffix)  # English: the name it always had
                if not create and not path.exists():
                    return None
                idx = self._tenants[tenant, lang] = _TenantIndex(path, lang, self.analyzers[lang].engine)
            return idx

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        by_index: dict[tuple[str, Language], tuple[list[StoredDoc], list[DocKey]]] = {}
        langs: dict[tuple[str, str], Language] = {}  # one settings read per collection of the batch
        for d in docs:
            tc = (d.key.tenant, d.key.collection)
            lang = langs[tc] if tc in langs else langs.setdefault(tc, self.languages.for_doc(*tc))
            by_index.setdefault((d.key.tenant, lang), ([], []))[0].append(d)
        # A delete goes to every language's index of the tenant: the collection's language may be
        # another by now (its settings go with a deleted collection), and a missing term is a no-op.
        for k in deletes:
            for lang in self.languages.languages():
                if (k.tenant, lang) in by_index or self._tenant(k.tenant, lang, create=False) is not None:
                    by_index.setdefault((k.tenant, lang), ([], []))[1].append(k)
        for (tenant, lang), (ds, dels) in by_index.items():
            idx = self._tenant(tenant, lang, create=True)
            assert idx is not None
            idx.write(ds, dels)
            self._note_writer((tenant, lang))

    def _note_writer(self, tenant: tuple[str, Language]) -> None:
        with self._lock:
            self._writers[tenant] = None
            self._writers.move_to_end(tenant)
            evict = list(self._writers)[: max(0, len(self._writers) - self.max_writers)]
            for t in evict:
                del self._writers[t]
        for t in evict:
            self._tenants[t].close_writer()

    def terms(self, text: str, lang: Language = analysis.ENGLISH) -> Counter[str]:
        """Analysed query terms with their counts in the query."""
        return Counter(self.analyzers[lang].analyze(text))

    def _query(self, idx: _TenantIndex, searcher: tantivy.Searcher, flt: SearchFilter, text: str) -> Query | None:
        """BM25 over title and all, each query term weighted by how often the query says
        it (standard BM25 query-term frequency, as Lucene/OpenSearch do): long natural-language
        queries repeat what matters. On CISI this took keyword nDCG@10 from 0.31 to 0.38.
        The text is analysed in the index's language (OpenSearch's `match` does the same with
        each language's fields)."""
        terms = self.terms(text, idx.lang)
        if not terms:
            return None
        schema = idx.schema
        should = []
        for t, n in terms.items():
            for field, boost in FIELD_BOOSTS.items():
                should.append((Occur.Should, Query.boost_query(Query.term_query(schema, field, t), boost * n)))
        clauses = [(Occur.Must, Query.boolean_query(should)), (Occur.Must, self._filter(schema, flt, searcher))]
        return Query.boolean_query(clauses)

    @staticmethod
    def _any_of(schema: tantivy.Schema, field: str, values: Sequence[str]) -> Query:
        # A disjunction of term queries: 2.6 ms at 100k where term_set_query took 4.2 ms (a few
        # ACL tokens); range covers (<= ~480 tokens) and id lists up to ~1,000 were as fast or
        # faster so. Longer id allow-lists go to one term set: 10,000 ids at 20k documents took
        # 85-100 ms as a disjunction, 22-80 ms as a term set (noisy machine).
        if len(values) > TERM_SET_ABOVE:
            return Query.term_set_query(schema, field, list(values))
        return Query.boolean_query([(Occur.Should, Query.term_query(schema, field, v)) for v in values])

    def _filter(self, schema: tantivy.Schema, flt: SearchFilter, searcher: tantivy.Searcher) -> Query:
        """The ACL, certificate, collection, metadata and id filter, scored 0 so BM25 stays the
        only signal."""
        parts = [(Occur.Must, self._any_of(schema, "acl", flt.acl))]
        unheld = _unheld_certs(searcher, flt.certs)
        if unheld:
            # one term set past a few dozen (1,000 certificates at 20k documents: 2.4 ms against
            # 6.7 ms as a disjunction; ten: 0.5 ms as a disjunction against 0.7 ms)
            exclude = (Query.term_set_query(schema, "facet", unheld) if len(unheld) > CERT_SET_ABOVE
                       else self._any_of(schema, "facet", unheld))
            parts.append((Occur.MustNot, exclude))
        if flt.collections is not None:
            parts.append((Occur.Must, self._any_of(schema, "collection", flt.collections)))
        for cond in flt.where:
            parts.append((Occur.Must, self._any_of(schema, "facet", facets.condition_tokens(cond))))
        refs = facets.id_refs(flt)
        if refs is not None:
            parts.append((Occur.Must, self._any_of(schema, "key", refs)))
        return Query.const_score_query(Query.boolean_query(parts), 0.0)

    def search(self, flt: SearchFilter, text: str, limit: int) -> list[Hit]:
        found = self.candidates(flt, text, limit)
        return [hit(k, s) for k, s in zip(found.keys(len(found.scores)), found.scores, strict=True)]

    def _searched(self, flt: SearchFilter, text: str) -> list[tuple[_TenantIndex, tantivy.Searcher, Query]]:
        """The tenant's index of each language in the filter's scope that exists, with the
        snapshot to search and its query (built from that snapshot: `_unheld_certs`)."""
        out = []
        for lang in self.languages.in_scope(flt.collections, flt.tenant):
            idx = self._tenant(flt.tenant, lang, create=False)
            if idx is None:
                continue
            searcher = idx.index.searcher()
            query = self._query(idx, searcher, flt, text)
            if query is not None:
                out.append((idx, searcher, query))
        return out

    def candidates(self, flt: SearchFilter, text: str, limit: int) -> Candidates:
        if limit <= 0 or facets.unsatisfiable(flt):
            return ResolvedCandidates([])
        searched = self._searched(flt, text)
        searchers = [sr for _, sr, _ in searched]
        hits = [sr.search(q, limit=limit, count=False).hits for _, sr, q in searched]
        if len(hits) == 1:
            return _Addressed(flt.tenant, searchers, hits[0])
        # Each language's best, merged by score (sorted is stable: ties keep the languages' order).
        merged = sorted(((h, i) for i, part in enumerate(hits) for h in part), key=lambda x: -x[0][0])[:limit]
        return _Addressed(flt.tenant, searchers, [h for h, _ in merged], [i for _, i in merged])

    def highlights(
        self, flt: SearchFilter, text: str, docs: Sequence[StoredDoc]
    ) -> dict[DocKey, list[str]]:
        """Snippets of the given documents for the query's terms. Callers pass documents
        from a filtered ranking; documents outside the filter are skipped here as well."""
        gens = {}
        for idx, searcher, query in self._searched(flt, text):
            gens[idx.lang] = [tantivy.SnippetGenerator.create(searcher, query, idx.schema, f) for f in ("title", "all")]
        if not gens:
            return {}
        readable = set(flt.acl)
        out: dict[DocKey, list[str]] = {}
        for d in docs:
            if d.key.tenant != flt.tenant or not readable & set(d.acl) or not flt.admits_certs(d.certs):
                continue
            if flt.collections is not None and d.key.collection not in flt.collections:
                continue
            if not facets.permits(flt, d.key.ref, d.fields):
                continue
            lang_gens = gens.get(self.languages.for_doc(d.key.tenant, d.key.collection, fresh=False))
            if lang_gens is None:  # its language's index holds nothing of this tenant
                continue
            title, body = _text_fields(d)
            snippets = [_snippet_html(lang_gens[0], "title", title), _snippet_html(lang_gens[1], "all", body)]
            if any(snippets):
                out[d.key] = [s for s in snippets if s]
        return out

    def check_ready(self) -> None:
        """Tenant indexes open lazily, so a lost or read-only folder would show only at the next
        write or first read of a tenant: looked at here."""
        folder_ready(self.root)

    def close(self) -> None:
        with self._lock:
            tenants = list(self._tenants.values())
            self._tenants.clear()
            self._writers.clear()
        for idx in tenants:
            idx.close_writer()
