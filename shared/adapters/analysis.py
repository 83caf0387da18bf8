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

from typing import Any

import tantivy
from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

# Bumped when anything here changes: every lexical index is then rebuilt from the store.
ANALYSIS_VERSION = 3
TOKEN_PATTERN = r"[\p{IsAlphabetic}\p{N}]+"  # OpenSearch's; tantivy's `simple` tokenizer is the same
MAX_TOKEN_BYTES = 40
STEMMER = "english"  # Snowball English (Porter2)
K1, B = 1.2, 0.75
FIELD_BOOSTS = {"title": 0.5, "all": 1.0}

# English stop words: NLTK's list (Snowball's English list with contractions), as bm25s ships it
# as "en_plus". Longer than Lucene's 33: CISI's and Cranfield's prose queries ("what are the
# ... of ...") carry many function words that only add noise.
STOPWORDS: tuple[str, ...] = (
    "a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and", "any", "are", "aren",
    "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "couldn", "couldn't", "d", "did", "didn", "didn't", "do", "does", "doesn", "doesn't", "doing", "don",
    "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn", "hadn't", "has", "hasn",
    "hasn't", "have", "haven", "haven't", "having", "he", "her", "here", "hers", "herself", "him", "himself",
    "his", "how", "i", "if", "in", "into", "is", "isn", "isn't", "it", "it's", "its", "itself", "just", "ll",
    "m", "ma", "me", "mightn", "mightn't", "more", "most", "mustn", "mustn't", "my", "myself", "needn",
    "needn't", "no", "nor", "not", "now", "o", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "ourselves", "out", "over", "own", "re", "s", "same", "shan", "shan't", "she", "she's", "should",
    "should've", "shouldn", "shouldn't", "so", "some", "such", "t", "than", "that", "that'll", "the", "their",
    "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "ve", "very", "was", "wasn", "wasn't", "we", "were", "weren", "weren't", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "won't", "wouldn",
    "wouldn't", "y", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves",
    # single letters not in the list above
    "b", "c", "e", "f", "g", "h", "j", "k", "l", "n", "p", "q", "r", "u", "v", "w", "x", "z",
)


def tantivy_analyzer() -> tantivy.TextAnalyzer:
    return (
        TextAnalyzerBuilder(Tokenizer.simple())
        .filter(Filter.remove_long(MAX_TOKEN_BYTES))
        .filter(Filter.lowercase())
        .filter(Filter.custom_stopword(list(STOPWORDS)))
        .filter(Filter.stemmer(STEMMER))
        .build()
    )


def opensearch_analysis(name: str) -> dict[str, Any]:
    """`settings.analysis` of the index template: analyzer `name`, the same pipeline."""
    return {
        "tokenizer": {"vibe_tokens": {"type": "pattern", "pattern": TOKEN_PATTERN, "group": 0}},
        "filter": {
            "vibe_long": {"type": "length", "max": MAX_TOKEN_BYTES - 1},
            "vibe_stop": {"type": "stop", "stopwords": list(STOPWORDS)},
            "vibe_stem": {"type": "snowball", "language": "English"},
        },
        "analyzer": {
            name: {"type": "custom", "tokenizer": "vibe_tokens",
                   "filter": ["vibe_long", "lowercase", "vibe_stop", "vibe_stem"]},
        },
    }


def opensearch_similarity() -> dict[str, Any]:
    return {"default": {"type": "BM25", "k1": K1, "b": B}}
