"""The one text analysis of the lexical leg, for tantivy (embedded) and OpenSearch (distributed)
alike, so both profiles rank alike.

Pipeline, in this order in both engines:
1. tokens: maximal runs of alphabetic characters and digits: tantivy's `simple` tokenizer
   (Rust `char::is_alphanumeric`), OpenSearch's `pattern` tokenizer over `TOKEN_PATTERN` (Java's
   `IsAlphabetic` and `N` are the same Unicode properties). So possessives split ("engine's" ->
   engine, s), hyphenated words split ("cross-section" -> cross, section), "2.5" -> 2, 5.
   (A regex tokenizer in tantivy would do the same but analysed 2.5x slower.)
2. tokens longer than `MAX_TOKEN_UNITS` UTF-16 code units are dropped: what OpenSearch's `length`
   filter counts (Java's String length). tantivy's `remove_long` counts UTF-8 bytes, which drops
   real words of 20 Cyrillic or Greek letters that OpenSearch keeps, so the tantivy side bounds
   tokens before its analyzer sees them (`tantivy_text`);
3. lowercase, with U+0130 (İ, capital I with dot above) lowercased to a plain `i` as Lucene does
   (Java's per-character lowercasing). Rust's full lowercasing gives `i` + U+0307, so a query
   "Istanbul" would miss a document's "İstanbul" in tantivy: `tantivy_text` folds İ to I first;
4. the stop words below, which include the 26 single letters (the possessive's
   `s`, "x-ray"'s `x`: as bm25s, which keeps tokens of 2+ characters; lone digits stay);
5. the Snowball English stemmer (tantivy's from the current Snowball release, Lucene 9.12's
   `snowball` English from an older one: see "Known differences" below).

`tantivy_text` keeps the text's length in characters (İ becomes one character, a dropped token
as many spaces as it had characters), so a snippet computed on it maps back to the original text
character for character (tantivy_lexical.py renders highlights of the original).

Known differences (measured word by word against a real OpenSearch 2.19.6 by
`bench.lexical --opensearch`, listed in docs/opensearch.md; the contract suite's parity test
tolerates exactly the listed ones): tantivy 0.27 stems with the Snowball project's current
algorithms (the `frostem` crate), Lucene 9.12 with its own older copy. English differs on about
0.4% of tokens ("university": universiti/univers), German on 3% ("verwendet": verwend/verwendet),
Swedish on 1% ("arkivet": arkiv/arkivet), French on 0.1%. Dutch: Snowball 3.0 replaced its
algorithm with one close to Kraaij-Pohlmann, so OpenSearch's Dutch uses Lucene's Kraaij-Pohlmann
stemmer (`Kp`), 0.5% apart, where its Snowball Dutch differed on 36% of tokens. And characters
assigned after Unicode 13 (Java 17's) are not letters to OpenSearch's tokenizer.

Languages: a collection may be analysed in another language than English
(`VIBE_COLLECTION_LANGUAGES`, `VIBE_DEFAULT_LANGUAGE`; shared/text/languages.py). Each language has
its own analyzer (the same pipeline with its stop list, shared/text/stopwords.py, and its Snowball
stemmer; English's is the one above) and its own statistics: tantivy keeps one index per tenant
and language, OpenSearch one set of fields per language (`title_<code>`, `body_<code>`,
`all_<code>`; English keeps `title`, `body`, `all`), whose statistics Lucene keeps per field. A
query is analysed once per language of the collections it searches. The map is part of the
index's schema stamp: changing it rebuilds the lexical index from the store of record, with
progress (shared/indexing.py `_ensure_schema`). Both engines implement Snowball's algorithms
from their own copies, of different releases (known differences above); the contract suite
compares both analyzers of every language against a real node (tests/contract/test_lexical_contract.py).

BM25 is Lucene's in both with k1 = 1.2, b = 0.75 (tantivy's fixed constants; OpenSearch's
similarity is pinned to them in the template). Fields: `title` and `all` (title and body, every
other text field), each query term scored in both with `FIELD_BOOSTS`: the whole text as one
field (what bm25s and LanceDB score) plus a half-weight title, which keeps a short title's own
length normalisation.

How this was chosen (bench/lexical.py; tuning on Cranfield only, CISI held out): on Cranfield a
baseline analysis (Lucene's 33 stop words, title + body) scores nDCG@10 0.393; the longer stop
list 0.399; with it, title/all (0.5/1) 0.401, title/body/all (0.5/0.5/1) 0.404, all alone 0.392.
Title/all is preferred to title/body/all: the latter analyses the body twice, which takes the
lexical index's build from 13 to 28 s per 100k documents, for 0.003 on the tuning set. The
benchmark runs the held-out CISI figures with bm25s and the baseline analysis beside them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import tantivy
from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

from shared.text.languages import ENGLISH, ENGLISH_ONLY, LANGUAGES, Language, LanguageMap, language

__all__ = ["ENGLISH", "ENGLISH_ONLY", "LANGUAGES", "Language", "LanguageMap", "language"]

# Bumped when anything here changes: every lexical index is then rebuilt from the store.
ANALYSIS_VERSION = 4
TOKEN_PATTERN = r"[\p{IsAlphabetic}\p{N}]+"  # OpenSearch's; tantivy's `simple` tokenizer is the same
MAX_TOKEN_UNITS = 39  # longest token kept, in UTF-16 code units (Lucene's `length` filter unit)
# tantivy's own bound, a guard only: a token within MAX_TOKEN_UNITS takes at most 3 UTF-8 bytes
# per UTF-16 unit, so this never drops what `tantivy_text` kept.
TANTIVY_MAX_BYTES = 3 * MAX_TOKEN_UNITS + 1
K1, B = 1.2, 0.75
FIELD_BOOSTS = {"title": 0.5, "all": 1.0}
# Lucene's stemmer where its Snowball copy is further from tantivy's than another of its own:
# Snowball 3.0 (tantivy) replaced Dutch with a Kraaij-Pohlmann-like algorithm (module docstring).
LUCENE_SNOWBALL = {"nl": "Kp"}

STOPWORDS = ENGLISH.stopwords  # the English list (shared/text/stopwords.py)

DOTTED_CAPITAL_I = "\u0130"
# A cheap superset test for a token over the bound: it matches texts whose runs of characters that
# are neither whitespace nor ASCII punctuation are all under 20 code points (a token over 39 UTF-16
# units is such a run of 20 or more); only the texts it refuses are tokenized again to find the
# exact tokens. Possessive, so one linear pass (a plain search for a 20-run rescanned every word).
_SEP, _RUN = r"[\s!-/:-@\[-`{-~]", r"[^\s!-/:-@\[-`{-~]"
_NO_LONG_RUN = re.compile(rf"(?:{_SEP}*+{_RUN}{{1,19}}+(?!{_RUN}))*+{_SEP}*+\Z")
_RAW_TOKENS = TextAnalyzerBuilder(Tokenizer.simple()).build()  # tantivy's token boundaries, as written


def _utf16_units(token: str) -> int:
    return len(token.encode("utf-16-le")) // 2


def _blank_long_tokens(text: str) -> str:
    """Each token over `MAX_TOKEN_UNITS` replaced by as many spaces as it has characters."""
    parts: list[str] = []
    copied = cursor = 0
    for token in _RAW_TOKENS.analyze(text):  # in order, each an exact slice of the text
        at = text.find(token, cursor)
        cursor = at + len(token)
        if _utf16_units(token) > MAX_TOKEN_UNITS:
            parts += [text[copied:at], " " * len(token)]
            copied = cursor
    parts.append(text[copied:])
    return "".join(parts)


def tantivy_text(text: str) -> str:
    """The text as tantivy's analyzer must see it to give OpenSearch's tokens: İ folded to I (Lucene
    lowercases it to `i`, Rust to `i` + U+0307) and tokens over the length bound blanked. Same
    length in characters as `text`, so offsets into it are offsets into the original."""
    if DOTTED_CAPITAL_I in text:
        text = text.replace(DOTTED_CAPITAL_I, "I")
    if not _NO_LONG_RUN.match(text):
        text = _blank_long_tokens(text)
    return text


class TantivyAnalyzer:
    """One language's analysis on the tantivy side: `tantivy_text`, then `engine` (the analyzer
    registered with the index, which only ever sees texts passed through `tantivy_text`)."""

    def __init__(self, lang: Language = ENGLISH):
        b = TextAnalyzerBuilder(Tokenizer.simple()).filter(Filter.remove_long(TANTIVY_MAX_BYTES))
        b = b.filter(Filter.lowercase())
        if lang.stopwords:
            b = b.filter(Filter.custom_stopword(list(lang.stopwords)))
        if lang.stem:
            b = b.filter(Filter.stemmer(lang.name))
        self.engine: tantivy.TextAnalyzer = b.build()

    def analyze(self, text: str) -> list[str]:
        return self.engine.analyze(tantivy_text(text))


def tantivy_analyzer(lang: Language = ENGLISH) -> TantivyAnalyzer:
    return TantivyAnalyzer(lang)


def lucene_stemmer(lang: Language) -> dict[str, Any]:
    return {"type": "snowball", "language": LUCENE_SNOWBALL.get(lang.code, lang.name.title())}


def opensearch_analysis(languages: Sequence[Language] = (ENGLISH,)) -> dict[str, Any]:
    """`settings.analysis` of the index template: one analyzer per language (`vibe_<code>`),
    the same pipeline as tantivy's."""
    filters: dict[str, Any] = {"vibe_long": {"type": "length", "max": MAX_TOKEN_UNITS}}
    analyzers: dict[str, Any] = {}
    for lang in languages:
        chain = ["vibe_long", "lowercase"]
        if lang.stopwords:
            chain.append(stop := f"vibe_stop{lang.suffix}")
            filters[stop] = {"type": "stop", "stopwords": list(lang.stopwords)}
        if lang.stem:
            chain.append(stem := f"vibe_stem{lang.suffix}")
            filters[stem] = lucene_stemmer(lang)
        analyzers[lang.analyzer] = {"type": "custom", "tokenizer": "vibe_tokens", "filter": chain}
    return {
        "tokenizer": {"vibe_tokens": {"type": "pattern", "pattern": TOKEN_PATTERN, "group": 0}},
        "filter": filters,
        "analyzer": analyzers,
    }


def opensearch_similarity() -> dict[str, Any]:
    return {"default": {"type": "BM25", "k1": K1, "b": B}}
