"""LexicalIndex contract: every adapter must pass it.

OpenSearch runs on the session's private node (`opensearch_url` in tests/conftest.py: the
Maven-built dev node, or the server VIBE_OPENSEARCH_URL names); each test works in its own index
prefix and deletes it afterwards.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import analysis_samples as samples
from shared.adapters.analysis import ENGLISH_ONLY, LANGUAGES, Language, LanguageMap
from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex
from shared.adapters.schema_stamp import VERSION_FILE
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import FieldCondition, LexicalIndex, SearchFilter
from tests.contract.cert_cases import DOC_CERTS, HELD_SEES


def _opensearch(url: str, languages: LanguageMap = ENGLISH_ONLY) -> OpenSearchLexicalIndex:
    from opensearchpy import OpenSearch

    # A prefix outside `vibe-lex-*`: a test never touches (or overlaps the template of) real indices.
    prefix = f"vibe-contract-{uuid.uuid4().hex[:12]}-"
    return OpenSearchLexicalIndex(OpenSearch(hosts=[url], timeout=30), prefix=prefix, languages=languages)


def _adapter(request: pytest.FixtureRequest, root: Path, languages: LanguageMap = ENGLISH_ONLY) -> LexicalIndex:
    if request.param == "opensearch":
        return _opensearch(request.getfixturevalue("opensearch_url"), languages)
    return TantivyLexicalIndex(root, languages=languages)


PARAMS = ["tantivy", "opensearch"]


@pytest.fixture(params=PARAMS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LexicalIndex]:
    idx = _adapter(request, tmp_path / "lex")
    yield idx
    if isinstance(idx, OpenSearchLexicalIndex):
        idx.drop()
    idx.close()


# Collection `fr` is French, `de` German, `parts` simple (no stemming, no stop words), every
# other English.
LANGS = LanguageMap.parse("en", {"fr": "french", "de": "german", "parts": "simple"})


@pytest.fixture(params=PARAMS)
def multilingual(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LexicalIndex]:
    idx = _adapter(request, tmp_path / "lex", LANGS)
    yield idx
    if isinstance(idx, OpenSearchLexicalIndex):
        idx.drop()
    idx.close()


def doc(tenant: str, coll: str, i: str, title: str, body: str, acl: list[str] | None = None) -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), {"title": title, "body": body}, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


def flt(tenant: str = "t", acl: tuple[str, ...] = (PUBLIC_PRINCIPAL,),
        cols: tuple[str, ...] | None = None) -> SearchFilter:
    return SearchFilter(tenant, cols, acl)


def test_bm25_ranks_and_stems(index: LexicalIndex) -> None:
    index.apply([doc("t", "c", "1", "Flying wings", "wings fly through turbulent air"),
                 doc("t", "c", "2", "Boats", "boats float on water"),
                 doc("t", "c", "3", "Wing flutter", "a wing fluttered once")], [])
    hits = index.search(flt(), "wing", 10)
    assert [h.key.doc_id for h in hits][:2] == ["1", "3"] or [h.key.doc_id for h in hits][:2] == ["3", "1"]
    assert {h.key.doc_id for h in hits} == {"1", "3"}
    assert all(h.score > 0 for h in hits)
    assert index.search(flt(), "the of and", 10) == []


def test_acl_and_collection_filters_are_inside_the_query(index: LexicalIndex) -> None:
    index.apply([doc("t", "a", "pub", "engine", "engine"), doc("t", "a", "eng", "engine", "engine", ["g:eng"]),
                 doc("t", "b", "other", "engine", "engine")], [])
    assert {h.key.doc_id for h in index.search(flt(acl=("*",)), "engine", 10)} == {"pub", "other"}
    assert {h.key.doc_id for h in index.search(flt(acl=("*", "g:eng")), "engine", 10)} == {"pub", "eng", "other"}
    assert {h.key.doc_id for h in index.search(flt(acl=("*", "g:eng"), cols=("a",)), "engine", 10)} == {"pub", "eng"}
    assert index.search(flt(acl=("g:none",)), "engine", 10) == []


def test_filter_does_not_change_scores(index: LexicalIndex) -> None:
    index.apply([doc("t", "a", "1", "x", "rotor blade rotor"), doc("t", "a", "2", "x", "rotor hub", ["g:x"])], [])
    wide = {h.key.doc_id: h.score for h in index.search(flt(acl=("*", "g:x")), "rotor", 10)}
    narrow = {h.key.doc_id: h.score for h in index.search(flt(acl=("*",)), "rotor", 10)}
    assert narrow["1"] == pytest.approx(wide["1"], rel=1e-9)


def test_tenants_share_no_statistics(index: LexicalIndex) -> None:
    index.apply([doc("a", "c", str(i), "turbine", "turbine fatigue " * (i + 1)) for i in range(5)], [])
    before = [(h.key.doc_id, h.score) for h in index.search(flt("a"), "turbine fatigue", 10)]
    index.apply([doc("b", "c", str(i), "noise", "turbine " * 30) for i in range(200)], [])
    after = [(h.key.doc_id, h.score) for h in index.search(flt("a"), "turbine fatigue", 10)]
    assert before == after and len(before) == 5
    assert all(h.key.tenant == "b" for h in index.search(flt("b"), "turbine", 300))


def test_update_and_delete(index: LexicalIndex) -> None:
    index.apply([doc("t", "c", "1", "alpha", "alpha")], [])
    index.apply([doc("t", "c", "1", "beta", "beta")], [])
    assert index.search(flt(), "alpha", 10) == []
    assert [h.key.doc_id for h in index.search(flt(), "beta", 10)] == ["1"]
    index.apply([], [DocKey("t", "c", "1")])
    assert index.search(flt(), "beta", 10) == []


def test_highlights_only_for_permitted_docs(index: LexicalIndex) -> None:
    docs = [doc("t", "c", "1", "Icing", "rotor icing test"), doc("t", "c", "2", "Icing", "secret icing", ["g:x"])]
    index.apply(docs, [])
    hl = index.highlights(flt(acl=("*",)), "icing", docs)
    assert set(hl) == {DocKey("t", "c", "1")}
    assert any("<b>icing</b>" in s.lower() for s in hl[DocKey("t", "c", "1")])


def test_highlights_escape_the_documents_html(index: LexicalIndex) -> None:
    """A snippet is HTML a page may render, so the document's own markup
    comes back escaped and the only tags are the highlight's `<b>` (no stored XSS)."""
    d = doc("t", "c", "x", "Icing <script>alert(1)</script>",
            "rotor icing <img src=x onerror=alert(2)> & \"quoted\" icing")
    index.apply([d], [])
    hl = index.highlights(flt(), "icing", [d])
    snippets = hl[DocKey("t", "c", "x")]
    assert any("<b>icing</b>" in s.lower() for s in snippets)
    for s in snippets:
        bare = s.replace("<b>", "").replace("</b>", "")
        assert "<" not in bare and ">" not in bare, s
        assert "&lt;" in bare, s
    assert any("&amp;" in s for s in snippets)


def test_a_very_long_document_is_highlighted_and_never_fails_the_read(index: LexicalIndex) -> None:
    """A body past OpenSearch's `index.highlight.max_analyzed_offset` (1,000,000 characters; a
    document may take 1 MiB) is highlighted where the term occurs early, and the other documents
    of the page still get theirs: the server used to refuse the whole highlight request."""
    long = doc("t", "c", "long", "Rotor", "rotor icing report " + "padding " * 130_000)
    short = doc("t", "c", "short", "Rotor", "icing on the blade")
    index.apply([long, short], [])
    hl = index.highlights(flt(), "icing", [long, short])
    assert set(hl) == {long.key, short.key}
    assert "<b>icing</b>" in " ".join(hl[long.key]).lower()


def test_many_tenants_keep_few_writers_open(tmp_path: Path) -> None:
    idx = TantivyLexicalIndex(tmp_path / "lex", max_writers=2)
    for t in ("a", "b", "c", "a"):
        idx.apply([doc(t, "c", "1", "rotor", f"rotor {t}")], [])
    open_writers = [t for (t, _), ti in idx._tenants.items() if ti.writer is not None]
    assert sorted(open_writers) == ["a", "c"]
    idx.apply([doc("b", "c", "2", "rotor", "rotor again")], [])  # a closed writer reopens on demand
    assert {h.key.doc_id for h in idx.search(flt("b"), "rotor", 10)} == {"1", "2"}
    idx.close()


# -- metadata filters and the id allow-list: inside the query, before the top-k --

def mdoc(i: str, fields: dict[str, object], acl: list[str] | None = None, coll: str = "c",
         tenant: str = "t") -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), {"title": "rotor", **fields}, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


META = [mdoc("s", {"lang": "en", "year": 1999, "tags": ["wind", "ice"]}),
        mdoc("d", {"lang": "de", "year": 2005.5, "tags": "wind"}),
        mdoc("b", {"lang": "en", "flag": True, "year": -3, "n": 1}),
        mdoc("n", {"flag": 1, "n": 1.0, "year": 2010}),
        mdoc("x", {"lang": "en", "year": 2007}, ["g:secret"]),
        mdoc("o", {"lang": "en", "year": 2001}, coll="other")]


def where(*conds: FieldCondition, acl: tuple[str, ...] = (PUBLIC_PRINCIPAL,), cols: tuple[str, ...] | None = None,
          ids: tuple[DocKey, ...] | None = None) -> SearchFilter:
    return SearchFilter("t", cols, acl, tuple(conds), ids)


def ids_of(index: LexicalIndex, f: SearchFilter, limit: int = 50) -> set[str]:
    return {h.key.doc_id for h in index.search(f, "rotor", limit)}


def test_metadata_equality_in_and_lists(index: LexicalIndex) -> None:
    index.apply(META, [])
    assert ids_of(index, where(FieldCondition("lang", "eq", ("en",)))) == {"s", "b", "o"}
    assert ids_of(index, where(FieldCondition("lang", "in", ("de", "fr")))) == {"d"}
    assert ids_of(index, where(FieldCondition("tags", "eq", ("ice",)))) == {"s"}  # any list element
    assert ids_of(index, where(FieldCondition("tags", "in", ("wind",)))) == {"s", "d"}
    assert ids_of(index, where(FieldCondition("lang", "eq", ("EN",)))) == set()  # exact, not analysed
    assert ids_of(index, where(FieldCondition("missing", "eq", ("en",)))) == set()
    both = where(FieldCondition("lang", "eq", ("en",)), FieldCondition("tags", "eq", ("wind",)))
    assert ids_of(index, both) == {"s"}  # conditions AND


def test_metadata_types_bool_is_never_a_number(index: LexicalIndex) -> None:
    index.apply(META, [])
    assert ids_of(index, where(FieldCondition("flag", "eq", (True,)))) == {"b"}
    assert ids_of(index, where(FieldCondition("flag", "eq", (1,)))) == {"n"}
    assert ids_of(index, where(FieldCondition("n", "eq", (1,)))) == {"b", "n"}  # 1 == 1.0
    assert ids_of(index, where(FieldCondition("year", "eq", ("1999",)))) == set()  # a string is not a number
    assert ids_of(index, where(FieldCondition("flag", "range", gte=0, lte=2))) == {"n"}  # ranges skip booleans


def test_metadata_ranges(index: LexicalIndex) -> None:
    index.apply(META, [])
    r = lambda **b: ids_of(index, where(FieldCondition("year", "range", **b)))  # noqa: E731
    assert r(gte=2000) == {"d", "n", "o"}
    assert r(gt=2005.5) == {"n"}
    assert r(gte=2005.5, lte=2005.5) == {"d"}
    assert r(gt=2005.5, lt=2010) == set()
    assert r(lt=0) == {"b"}
    assert r(gt=-3.0000001, lte=1999) == {"s", "b"}
    assert r(gt=1e300) == set()
    assert r(gte=-1e300) == {"s", "d", "b", "n", "o"}


def test_metadata_filters_combine_with_acl_collections_and_never_leak(index: LexicalIndex) -> None:
    index.apply(META, [])
    en = FieldCondition("lang", "eq", ("en",))
    assert ids_of(index, where(en, cols=("c",))) == {"s", "b"}
    assert ids_of(index, where(en, acl=("*", "g:secret"), cols=("c",))) == {"s", "b", "x"}
    assert ids_of(index, where(en, acl=("g:secret",))) == {"x"}
    assert ids_of(index, where(FieldCondition("year", "range", gte=2007, lte=2007))) == set()  # only x, unreadable
    assert ids_of(index, where(en, acl=("g:none",))) == set()
    index.apply([mdoc("s", {"lang": "en"}, tenant="u")], [])
    assert ids_of(index, where(en)) == {"s", "b", "o"}  # the other tenant's "s" stays there


def test_metadata_filter_applies_before_the_top_k(index: LexicalIndex) -> None:
    """A filter that only low-scoring documents meet still returns them, up to the limit."""
    strong = [StoredDoc(DocKey("t", "c", f"hi{i}"), {"title": "rotor rotor", "body": "rotor rotor rotor", "k": "no"},
                        [PUBLIC_PRINCIPAL], None, "h", 0.0) for i in range(40)]
    weak = [StoredDoc(DocKey("t", "c", f"lo{i}"), {"title": "x", "body": "rotor " + "padding " * 60, "k": "yes"},
                      [PUBLIC_PRINCIPAL], None, "h", 0.0) for i in range(3)]
    index.apply(strong + weak, [])
    assert ids_of(index, where(), 3) <= {f"hi{i}" for i in range(40)}
    assert ids_of(index, where(FieldCondition("k", "eq", ("yes",))), 2) <= {"lo0", "lo1", "lo2"}
    assert len(ids_of(index, where(FieldCondition("k", "eq", ("yes",))), 2)) == 2
    assert ids_of(index, where(FieldCondition("k", "eq", ("yes",))), 10) == {"lo0", "lo1", "lo2"}


def test_id_allow_list(index: LexicalIndex) -> None:
    index.apply(META, [])
    keys = (DocKey("t", "c", "s"), DocKey("t", "other", "o"), DocKey("t", "c", "x"), DocKey("u", "c", "d"))
    assert ids_of(index, where(ids=keys)) == {"s", "o"}  # x unreadable; u's key is not this tenant's
    assert ids_of(index, where(ids=keys, cols=("c",))) == {"s"}
    assert ids_of(index, where(FieldCondition("lang", "eq", ("en",)), ids=(DocKey("t", "c", "d"),))) == set()
    assert ids_of(index, where(ids=())) == set()  # an empty allow-list allows nothing
    assert ids_of(index, where(ids=(DocKey("t", "c", "nope"),))) == set()


def test_metadata_filter_follows_updates(index: LexicalIndex) -> None:
    index.apply([mdoc("1", {"lang": "en"})], [])
    index.apply([mdoc("1", {"lang": "de"})], [])
    assert ids_of(index, where(FieldCondition("lang", "eq", ("en",)))) == set()
    assert ids_of(index, where(FieldCondition("lang", "eq", ("de",)))) == {"1"}


def test_long_values_compare_exactly(index: LexicalIndex) -> None:
    long_a, long_b = "a" * 1000, "a" * 999 + "b"  # over the token bound: compared by hash
    index.apply([mdoc("1", {"note": long_a}), mdoc("2", {"note": long_b})], [])
    assert ids_of(index, where(FieldCondition("note", "eq", (long_a,)))) == {"1"}


def test_highlights_respect_the_metadata_filter(index: LexicalIndex) -> None:
    index.apply(META, [])
    hl = index.highlights(where(FieldCondition("lang", "eq", ("de",))), "rotor", META)
    assert set(hl) == {DocKey("t", "c", "d")}


def test_outdated_schema_is_detected_and_reset(tmp_path: Path) -> None:

    idx = TantivyLexicalIndex(tmp_path / "lex")
    assert not idx.schema_outdated()
    idx.apply([mdoc("1", {"lang": "en"})], [])
    idx.close()
    (tmp_path / "lex" / VERSION_FILE).write_text("1")
    again = TantivyLexicalIndex(tmp_path / "lex")
    assert again.schema_outdated()
    again.reset_schema()
    assert not again.schema_outdated() and ids_of(again, where()) == set()
    again.close()


def _chunks(texts: list[str], size: int = 20_000) -> list[str]:
    """Texts joined by newlines into requests of about `size` characters (tokens never span a
    newline, so the token stream is the same as text by text)."""
    out, cur, n = [], [], 0
    for t in texts:
        cur.append(t)
        n += len(t)
        if n >= size:
            out.append("\n".join(cur))
            cur, n = [], 0
    return [*out, "\n".join(cur)] if cur else out


def _unstemmed(lang: Language) -> Language:
    return dataclasses.replace(lang, stem=False)


def _parity(opensearch_url: str) -> Iterator[tuple[Language, Callable[[dict[str, Any]], list[str]]]]:
    """Every language's analyzer on a real node (an index of a template holding all of them)."""
    from shared.adapters.opensearch_lexical import index_name

    every = LanguageMap.parse("en", {code: code for code in LANGUAGES})
    idx = _opensearch(opensearch_url, every)
    try:
        idx.apply([doc("t", "c", "1", "x", "y")], [])
        name = index_name("t", idx.prefix)

        def analyze(body: dict[str, Any]) -> list[str]:
            return [t["token"] for t in idx.client.indices.analyze(index=name, body=body)["tokens"]]
        for lang in every.languages():
            yield lang, analyze
    finally:
        idx.drop()
        idx.close()


def _before_stemming(lang: Language) -> dict[str, Any]:
    """The `_analyze` request of the language's chain without its stemmer."""
    return {"tokenizer": "vibe_tokens",
            "filter": ["vibe_long", "lowercase", *([f"vibe_stop{lang.suffix}"] if lang.stopwords else [])]}


def test_opensearch_analyses_as_tantivy(opensearch_url: str) -> None:
    """Both profiles rank alike only if they see the same terms: each language's analyzer on the
    server (from the index template) against tantivy's, word by word, on a fixed sample. The
    pipeline before the stemmer (tokens, length bound, lowercasing, İ, stop words) must agree
    exactly; stems may differ only where the two Snowball releases are known to
    (analysis_samples.KNOWN_STEM_DIFFERENCES: exactly those, no more, no fewer)."""
    from shared.adapters.analysis import tantivy_analyzer

    for lang, analyze in _parity(opensearch_url):
        texts = [*samples.COMMON, *samples.SENTENCES.get(lang.code, []), " ".join(lang.stopwords)]
        words: list[str] = []
        server: list[str] = []
        ours: list[str] = []
        for text in _chunks(texts):
            words += tantivy_analyzer(_unstemmed(lang)).analyze(text)
            assert analyze({**_before_stemming(lang), "text": text}) == words[len(server):], lang.code
            server += analyze({"analyzer": lang.analyzer, "text": text})
            ours += tantivy_analyzer(lang).analyze(text)
        assert len(server) == len(ours) == len(words), lang.code  # a stemmer maps one token to one
        differ = {w: (a, b) for w, a, b in zip(words, server, ours, strict=True) if a != b}
        assert differ == samples.KNOWN_STEM_DIFFERENCES.get(lang.code, {}), lang.code


def test_opensearch_tokenizes_real_text_as_tantivy(opensearch_url: str) -> None:
    """More text, real prose: the two English relevance collections and the machine's gettext
    catalogs in the other languages (a few hundred texts each where present). Every token before
    the stemmer is the same in both engines; stems differ by the Snowball releases alone
    (measured, not asserted here: docs/opensearch.md)."""
    from shared.adapters.analysis import tantivy_analyzer

    assert len(samples.real_texts("en", 400)) >= 300  # the English collections beside the repository
    compared = 0
    for lang, analyze in _parity(opensearch_url):
        for text in _chunks(samples.real_texts(lang.code, 400)):
            assert analyze({**_before_stemming(lang), "text": text}) == tantivy_analyzer(_unstemmed(lang)).analyze(
                text), lang.code
            compared += 1
    assert compared >= 2


def test_possessives_hyphens_and_stems_match(index: LexicalIndex) -> None:
    index.apply([doc("t", "c", "1", "Engines", "cross sections of the rotor"),
                 doc("t", "c", "2", "Boats", "nothing here")], [])
    assert [h.key.doc_id for h in index.search(flt(), "the engine's cross-section", 10)] == ["1"]
    assert index.search(flt(), "what about those", 10) == []  # stop words only


def test_long_id_allow_lists(index: LexicalIndex) -> None:
    """An allow-list longer than the term-set threshold (tantivy) selects exactly the same."""
    index.apply([mdoc(str(i), {}) for i in range(30)], [])
    keys = tuple(DocKey("t", "c", str(i)) for i in range(0, 30, 3)) + tuple(
        DocKey("t", "c", f"absent{i}") for i in range(1500))
    assert ids_of(index, where(ids=keys)) == {str(i) for i in range(0, 30, 3)}


def test_candidates_are_the_search_hits_with_keys_read_on_demand(index: LexicalIndex) -> None:
    """`candidates` gives `search`'s scores at once and its keys as asked for, in the same
    order; keys asked for after later writes come from the snapshot the search ran on."""
    index.apply([doc("t", "c", f"d{i:02d}", "rotor", "rotor blade " * (1 + i % 4) + "x " * i) for i in range(12)], [])
    hits = index.search(flt(), "rotor blade", 10)
    found = index.candidates(flt(), "rotor blade", 10)
    assert list(found.scores) == [h.score for h in hits] and len(hits) == 10
    assert found.keys(3) == [h.key for h in hits[:3]]
    index.apply([doc("t", "c", "d99", "rotor rotor", "rotor blade rotor blade")], [hits[5].key])
    assert found.keys(50) == [h.key for h in hits]  # the rest, from the search's own snapshot
    assert found.keys(2) == [h.key for h in hits[:2]]
    assert list(index.candidates(flt(), "nothing-matches", 10).scores) == []
    assert list(index.candidates(flt("other-tenant"), "rotor", 10).scores) == []


def fr_doc(coll: str, i: str, title: str, body: str) -> StoredDoc:
    return doc("t", coll, i, title, body)


def test_a_collection_is_analysed_in_its_language(multilingual: LexicalIndex) -> None:
    """French plurals and elisions find their stem in the French collection,
    while the same words in an English collection are just English tokens."""
    multilingual.apply([fr_doc("fr", "1", "Les chevaux", "Le cheval de l'écurie galope"),
                        fr_doc("fr", "2", "Voitures", "les voitures roulent vite"),
                        fr_doc("en", "3", "Horses", "chevaux is French for horses"),
                        fr_doc("de", "4", "Häuser", "Die Häuser der Stadt")], [])

    def ids(text: str, cols: tuple[str, ...] | None = None) -> list[str]:
        return [h.key.doc_id for h in multilingual.search(flt(cols=cols), text, 10)]

    assert ids("cheval", ("fr",)) == ["1"]  # "chevaux" and "cheval" both stem to cheval in French
    assert ids("écuries", ("fr",)) == ["1"]  # "l'écurie": elision, then the French stem
    assert ids("chevaux", ("en",)) == ["3"]  # English keeps "chevaux" as it is ...
    assert ids("cheval", ("en",)) == []  # ... and does not stem it to "cheval"
    assert ids("les", ("fr",)) == []  # a French stop word
    assert ids("Haus", ("de",)) == ["4"]
    assert set(ids("cheval")) == {"1"}  # all collections: each in its own language's fields
    assert set(ids("chevaux")) == {"1", "3"}
    assert set(ids("chevaux", ("fr", "en"))) == {"1", "3"}


def test_languages_share_no_statistics(multilingual: LexicalIndex) -> None:
    """A French collection's documents never move an English collection's scores (nor the other
    way round): tantivy keeps one index per language, Lucene counts only the documents that
    have a field. With both in one tantivy index, CISI's nDCG@10 fell from 0.408 to 0.340
    (bench/lexical.py keeps measuring it)."""
    multilingual.apply([doc("t", "en", str(i), "turbine", "turbine fatigue " * (i + 1)) for i in range(5)], [])
    before = [(h.key.doc_id, h.score) for h in multilingual.search(flt(cols=("en",)), "turbine fatigue", 10)]
    multilingual.apply([doc("t", "fr", f"f{i}", "turbine", "turbine " * 30) for i in range(200)], [])
    after = [(h.key.doc_id, h.score) for h in multilingual.search(flt(cols=("en",)), "turbine fatigue", 10)]
    assert [k for k, _ in after] == [k for k, _ in before] and len(before) == 5
    assert [v for _, v in after] == pytest.approx([v for _, v in before], rel=1e-6)
    everywhere = multilingual.search(flt(), "turbine", 300)  # both languages, merged by score
    assert len(everywhere) == 205 and [h.score for h in everywhere] == sorted((h.score for h in everywhere),
                                                                              reverse=True)


def test_a_simple_collection_matches_words_as_written(multilingual: LexicalIndex) -> None:
    multilingual.apply([doc("t", "parts", "p1", "The running gear", "SKU-42x"),
                        doc("t", "en", "e1", "The running gear", "SKU-42x")], [])

    def ids(text: str, cols: tuple[str, ...]) -> list[str]:
        return [h.key.doc_id for h in multilingual.search(flt(cols=cols), text, 10)]

    assert ids("run", ("parts",)) == [] and ids("run", ("en",)) == ["e1"]  # English stems, simple does not
    assert ids("running", ("parts",)) == ["p1"]
    assert ids("the", ("parts",)) == ["p1"] and ids("the", ("en",)) == []  # no stop words in simple
    assert ids("42x", ("parts",)) == ["p1"]


def test_filters_hold_in_every_language(multilingual: LexicalIndex) -> None:
    multilingual.apply([fr_doc("fr", "pub", "cheval", "cheval"),
                        doc("t", "fr", "secret", "cheval", "cheval", ["g:x"]),
                        doc("other", "fr", "o", "cheval", "cheval")], [])
    assert {h.key.doc_id for h in multilingual.search(flt(), "chevaux", 10)} == {"pub"}
    assert {h.key.doc_id for h in multilingual.search(flt(acl=("*", "g:x")), "chevaux", 10)} == {"pub", "secret"}
    assert multilingual.search(flt(cols=("de",)), "chevaux", 10) == []


def test_highlights_in_each_documents_language(multilingual: LexicalIndex) -> None:
    docs = [fr_doc("fr", "1", "Les chevaux", "Le cheval galope"), fr_doc("en", "2", "Horses", "the chevaux word"),
            doc("t", "fr", "3", "chevaux", "chevaux", ["g:x"])]
    multilingual.apply(docs, [])
    hl = multilingual.highlights(flt(), "chevaux", docs)
    assert set(hl) == {DocKey("t", "fr", "1"), DocKey("t", "en", "2")}
    joined = " ".join(hl[DocKey("t", "fr", "1")]).lower()
    assert "<b>chevaux</b>" in joined and "<b>cheval</b>" in joined  # both stem to the query's term
    assert "<b>chevaux</b>" in " ".join(hl[DocKey("t", "en", "2")]).lower()
    only_fr = multilingual.highlights(flt(cols=("fr",)), "chevaux", docs)
    assert set(only_fr) == {DocKey("t", "fr", "1")}


def test_a_changed_language_map_outdates_the_index(tmp_path: Path) -> None:
    """The map is part of the layout: an index built with another map (or before maps) is
    rebuilt from the store (shared/indexing.py), while English only keeps older indexes current."""
    idx = TantivyLexicalIndex(tmp_path / "lex")
    idx.apply([fr_doc("fr", "1", "Les chevaux", "galopent")], [])
    idx.close()
    assert not TantivyLexicalIndex(tmp_path / "lex", languages=LanguageMap.parse("en", {"x": "en"})).schema_outdated()
    french = TantivyLexicalIndex(tmp_path / "lex", languages=LANGS)
    assert french.schema_outdated()
    french.reset_schema()
    french.apply([fr_doc("fr", "1", "Les chevaux", "galopent")], [])
    assert [h.key.doc_id for h in french.search(flt(), "cheval", 10)] == ["1"]
    french.close()
    assert not TantivyLexicalIndex(tmp_path / "lex", languages=LANGS).schema_outdated()
    assert TantivyLexicalIndex(tmp_path / "lex").schema_outdated()
    assert TantivyLexicalIndex(tmp_path / "lex", languages=LanguageMap.parse("en", {"fr": "es"})).schema_outdated()


def _cert_doc(i: str, certs: list[str], acl: list[str] | None = None, body: str = "rotor icing") -> StoredDoc:
    return StoredDoc(DocKey("t", "c", i), {"title": "Rotor", "body": body}, acl or [PUBLIC_PRINCIPAL], None, "h",
                     0.0, certs=certs)


def _held(certs: frozenset[str], acl: tuple[str, ...] = (PUBLIC_PRINCIPAL,)) -> SearchFilter:
    return SearchFilter("t", None, acl, certs=certs)


@pytest.mark.parametrize(("held", "sees"), HELD_SEES)
def test_certificates_are_required_inside_the_query(index: LexicalIndex, held: frozenset[str], sees: set[str]) -> None:
    index.apply([_cert_doc(i, certs) for i, certs in DOC_CERTS.items()], [])
    assert {h.key.doc_id for h in index.search(_held(held), "rotor", 50)} == sees
    docs = [_cert_doc(i, certs) for i, certs in DOC_CERTS.items()]
    assert {k.doc_id for k in index.highlights(_held(held), "icing", docs)} == sees


def test_certificates_apply_before_the_top_k_and_leave_scores_alone(index: LexicalIndex) -> None:
    """Better-scoring documents requiring a certificate the caller lacks never crowd out the
    one it may read, and filtering on certificates does not move its score."""
    strong = [_cert_doc(f"s{i}", ["iss:a"], body="rotor rotor rotor icing") for i in range(30)]
    index.apply([*strong, _cert_doc("weak", [], body="rotor and a great many other words here")], [])
    assert [h.key.doc_id for h in index.search(_held(frozenset()), "rotor", 1)] == ["weak"]
    wide = {h.key.doc_id: h.score for h in index.search(_held(frozenset({"iss:a"})), "rotor", 50)}
    assert len(wide) == 31
    narrow = index.search(_held(frozenset()), "rotor", 50)
    assert narrow[0].score == pytest.approx(wide["weak"], rel=1e-9)


def test_certificates_combine_with_the_acl_and_follow_updates(index: LexicalIndex) -> None:
    index.apply([_cert_doc("hr", ["iss:a"], ["g:hr"]), _cert_doc("d", ["iss:a"])], [])
    both = frozenset({"iss:a"})
    assert {h.key.doc_id for h in index.search(_held(both), "rotor", 10)} == {"d"}
    assert {h.key.doc_id for h in index.search(_held(both, ("*", "g:hr")), "rotor", 10)} == {"d", "hr"}
    assert index.search(_held(frozenset(), ("*", "g:hr")), "rotor", 10) == []
    index.apply([_cert_doc("d", [])], [])  # its certificate dropped
    assert {h.key.doc_id for h in index.search(_held(frozenset()), "rotor", 10)} == {"d"}
    index.apply([_cert_doc("d", ["iss:b", "iss:a"])], [])  # now two
    assert index.search(_held(both), "rotor", 10) == []
    assert {h.key.doc_id for h in index.search(_held(frozenset({"iss:a", "iss:b"})), "rotor", 10)} == {"d"}


def test_a_certificate_name_is_no_metadata_filter_token(index: LexicalIndex) -> None:
    """A document field can never produce a certificate's index term (and so pass or block a
    certificate check): field names starting with `_` are refused on write, and a value that looks
    like one is just a value."""
    index.apply([StoredDoc(DocKey("t", "c", "v"), {"title": "rotor", "certs": "iss:a"}, ["*"], None, "h", 0.0),
                 _cert_doc("d", ["iss:a"])], [])
    assert {h.key.doc_id for h in index.search(_held(frozenset()), "rotor", 10)} == {"v"}
    by_value = SearchFilter("t", None, ("*",), (FieldCondition("certs", "eq", ("iss:a",)),),
                            certs=frozenset({"iss:a"}))
    assert {h.key.doc_id for h in index.search(by_value, "rotor", 10)} == {"v"}


def test_many_distinct_certificates(index: LexicalIndex) -> None:
    """A tenant with many distinct certificates (tantivy's exclusion list then is one term set)."""
    index.apply([_cert_doc(f"d{i}", [f"iss:c{i}"]) for i in range(100)] + [_cert_doc("open", [])], [])
    held = frozenset(f"iss:c{i}" for i in range(0, 100, 3))
    assert {h.key.doc_id for h in index.search(_held(held), "rotor", 200)} == {f"d{i}" for i in range(0, 100, 3)} | {
        "open"}
