"""The one text analysis of the lexical leg, for tantivy (embedded) and OpenSearch (distributed)
alike, so both profiles rank alike (issue #15 item 3).

Pipeline, in this order in both engines:
1. tokens: maximal runs of alphabetic characters and digits: tantivy's `simple` tokenizer
   (Rust `char::is_alphanumeric`), OpenSearch's `pattern` tokenizer over `TOKEN_PATTERN` (Java's
   `IsAlphabetic` and `N` are the same Unicode properties). So possessives split ("engine's" ->
   engine, s), hyphenated words split ("cross-section" -> cross, section), "2.5" -> 2, 5.
   (A regex tokenizer in tantivy would do the same but analysed 2.5x slower.)
2. tokens of `MAX_TOKEN_BYTES` bytes or more are dropped (tantivy's `remove_long` limit; the
   OpenSearch `length` filter counts characters, so it keeps at most MAX - 1: equal for ASCII);
3. lowercase; 4. the stop words below, which include the 26 single letters (the possessive's
   `s`, "x-ray"'s `x`: as bm25s, which keeps tokens of 2+ characters; lone digits stay);
5. the Snowball English stemmer (Porter2 in both: rust-stemmers in tantivy, Lucene's `snowball`
   English in OpenSearch).

Languages (issue #15 item 3): a collection may be analysed in another language than English
(`VIBE_COLLECTION_LANGUAGES`, `VIBE_DEFAULT_LANGUAGE`; shared/text/languages.py). Each language has
its own analyzer (the same pipeline with its stop list, shared/text/stopwords.py, and its Snowball
stemmer; English's is the one above) and its own statistics: tantivy keeps one index per tenant
and language, OpenSearch one set of fields per language (`title_<code>`, `body_<code>`,
`all_<code>`; English keeps `title`, `body`, `all`), whose statistics Lucene keeps per field. A
query is analysed once per language of the collections it searches. The map is part of the
index's schema stamp: changing it rebuilds the lexical index from the store of record, with
progress (shared/indexing.py `_ensure_schema`). Both engines implement Snowball's algorithms
from their own copies (rust-stemmers; Lucene's `snowball` package); that every language stems
every word alike is not verified without a server: the contract suite compares both analyzers of
every language on fixed texts when VIBE_OPENSEARCH_URL is set (tests/contract/test_lexical_contract.py).

BM25 is Lucene's in both with k1 = 1.2, b = 0.75 (tantivy's fixed constants; OpenSearch's
similarity is pinned to them in the template). Fields: `title` and `all` (title and body, every
other text field), each query term scored in both with `FIELD_BOOSTS`: the whole text as one
field (what bm25s and LanceDB score) plus a half-weight title, which keeps a short title's own
length normalisation.

How this was chosen (bench/lexical.py; tuning on Cranfield only, CISI held out): on Cranfield the
previous analysis (Lucene's 33 stop words, title + body) scored nDCG@10 0.393; the longer stop
list 0.399; with it, title/all (0.5/1) 0.401, title/body/all (0.5/0.5/1) 0.404, all alone 0.392.
Title/body/all was dropped for title/all: it analyses the body twice, which took the lexical
index's build from 13 to 28 s per 100k documents, for 0.003 on the tuning set. Results (CISI
held out, bm25s and the previous analysis in the same run): bench/results/lexical-*.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tantivy
from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

from shared.text.languages import ENGLISH, ENGLISH_ONLY, LANGUAGES, Language, LanguageMap, language

__all__ = ["ENGLISH", "ENGLISH_ONLY", "LANGUAGES", "Language", "LanguageMap", "language"]

# Bumped when anything here changes: every lexical index is then rebuilt from the store.
ANALYSIS_VERSION = 3
TOKEN_PATTERN = r"[\p{IsAlphabetic}\p{N}]+"  # OpenSearch's; tantivy's `simple` tokenizer is the same
MAX_TOKEN_BYTES = 40
K1, B = 1.2, 0.75
FIELD_BOOSTS = {"title": 0.5, "all": 1.0}

STOPWORDS = ENGLISH.stopwords  # the English list (shared/text/stopwords.py)


def tantivy_analyzer(lang: Language = ENGLISH) -> tantivy.TextAnalyzer:
    b = TextAnalyzerBuilder(Tokenizer.simple()).filter(Filter.remove_long(MAX_TOKEN_BYTES)).filter(Filter.lowercase())
    if lang.stopwords:
        b = b.filter(Filter.custom_stopword(list(lang.stopwords)))
    if lang.stem:
        b = b.filter(Filter.stemmer(lang.name))
    return b.build()


def opensearch_analysis(languages: Sequence[Language] = (ENGLISH,)) -> dict[str, Any]:
    """`settings.analysis` of the index template: one analyzer per language (`vibe_<code>`),
    the same pipeline as tantivy's."""
    filters: dict[str, Any] = {"vibe_long": {"type": "length", "max": MAX_TOKEN_BYTES - 1}}
    analyzers: dict[str, Any] = {}
    for lang in languages:
        chain = ["vibe_long", "lowercase"]
        if lang.stopwords:
            chain.append(stop := f"vibe_stop{lang.suffix}")
            filters[stop] = {"type": "stop", "stopwords": list(lang.stopwords)}
        if lang.stem:
            chain.append(stem := f"vibe_stem{lang.suffix}")
            filters[stem] = {"type": "snowball", "language": lang.name.title()}
        analyzers[lang.analyzer] = {"type": "custom", "tokenizer": "vibe_tokens", "filter": chain}
    return {
        "tokenizer": {"vibe_tokens": {"type": "pattern", "pattern": TOKEN_PATTERN, "group": 0}},
        "filter": filters,
        "analyzer": analyzers,
    }


def opensearch_similarity() -> dict[str, Any]:
    return {"default": {"type": "BM25", "k1": K1, "b": B}}
