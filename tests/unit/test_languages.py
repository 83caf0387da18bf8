"""Analysis languages per collection: the registry, the map from settings, and
each language's analyzer as tantivy runs it (OpenSearch's is built from the same definitions:
tests/unit/test_opensearch_bodies.py; run against a server: tests/contract/test_lexical_contract.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.adapters.analysis import ENGLISH, LANGUAGES, LanguageMap, language, tantivy_analyzer
from shared.config import Settings


def test_languages_are_named_by_code_or_english_name() -> None:
    assert language("fr") is language("French") is language(" FRENCH ") is LANGUAGES["fr"]
    assert language("en") is ENGLISH
    with pytest.raises(ValueError, match=r"unknown analysis language 'klingon'.*fr \(french\)"):
        language("klingon")


def test_map_scope_and_field_names() -> None:
    m = LanguageMap.parse("en", {"docs_fr": "french", "docs_de": "de", "more_fr": "fr"})
    assert [x.code for x in m.languages()] == ["en", "de", "fr"]  # the default first
    assert m.of("docs_fr").code == "fr" and m.of("anything") is ENGLISH
    assert [x.code for x in m.in_scope(None)] == ["en", "de", "fr"]
    assert [x.code for x in m.in_scope(["docs_fr", "more_fr"])] == ["fr"]
    assert [x.code for x in m.in_scope(["x", "docs_de"])] == ["en", "de"]
    assert (ENGLISH.field("title"), LANGUAGES["fr"].field("all")) == ("title", "all_fr")
    assert LANGUAGES["fr"].analyzer == "vibe_fr"


def test_stamp_is_empty_for_english_only_and_changes_with_the_map() -> None:
    """English only (however said) keeps the stamp of indexes built before languages existed,
    so they are not rebuilt; every other map has its own stamp, so a change rebuilds."""
    assert LanguageMap().stamp() == "" == LanguageMap.parse("english", {"c": "en"}).stamp()
    stamps = {LanguageMap.parse("en", {"c": "fr"}).stamp(), LanguageMap.parse("en", {"c": "de"}).stamp(),
              LanguageMap.parse("en", {"d": "fr"}).stamp(), LanguageMap.parse("fr").stamp()}
    assert len(stamps) == 4 and "" not in stamps
    assert LanguageMap.parse("en", {"c": "fr"}).stamp() == LanguageMap.parse("english", {"c": "French"}).stamp()


def test_settings_read_the_map_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIBE_COLLECTION_LANGUAGES", '{"docs_fr": "french"}')
    monkeypatch.setenv("VIBE_DEFAULT_LANGUAGE", "de")
    m = Settings().language_map()
    assert m.of("docs_fr").code == "fr" and m.of("other").code == "de"
    monkeypatch.setenv("VIBE_COLLECTION_LANGUAGES", '{"docs_fr": "klingon"}')
    with pytest.raises(ValidationError, match="unknown analysis language 'klingon'"):
        Settings()


@pytest.mark.parametrize(("code", "text", "terms"), [
    ("fr", "Les chevaux de l'écurie", ["cheval", "écur"]),  # plural, elision, stop words
    ("fr", "un cheval", ["cheval"]),
    ("de", "Die Häuser und das Haus", ["haus", "haus"]),
    ("es", "Los caballos y el caballo", ["caball", "caball"]),
    ("it", "Gli uomini dell'università", ["uomin", "univers"]),
    ("ru", "Хорошие книги и хорошая книга", ["хорош", "книг", "хорош", "книг"]),
    ("en", "The engine's cross-sections", ["engin", "cross", "section"]),
])
def test_each_language_stems_and_drops_its_stop_words(code: str, text: str, terms: list[str]) -> None:
    assert tantivy_analyzer(LANGUAGES[code]).analyze(text) == terms


def test_every_language_builds_and_drops_its_whole_stop_list() -> None:
    """tantivy knows every stemmer named here, and each list (with the single letters) is
    dropped whole: nothing of it reaches the index."""
    for lang in LANGUAGES.values():
        assert tantivy_analyzer(lang).analyze(" ".join(lang.stopwords)) == [], lang.code
        assert {"x", "q"} <= set(lang.stopwords) or lang.code == "simple"
    # the lists differ: French function words are content in English and the other way round
    assert tantivy_analyzer(LANGUAGES["fr"]).analyze("the") == ["the"]
    assert tantivy_analyzer(ENGLISH).analyze("les") == ["les"]


def test_simple_keeps_words_as_written() -> None:
    """`simple`: lowercased tokens, nothing dropped, nothing stemmed (names, codes, mixed text)."""
    simple = language("simple")
    assert tantivy_analyzer(simple).analyze("The Running dogs, SKU-42x à") == [
        "the", "running", "dogs", "sku", "42x", "à"]
    assert tantivy_analyzer(ENGLISH).analyze("The Running dogs") == ["run", "dog"]
    assert LanguageMap.parse("en", {"parts": "simple"}).stamp() != ""
