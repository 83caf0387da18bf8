"""The languages the lexical leg analyses text in, and which collection is in which
(`VIBE_COLLECTION_LANGUAGES`, `VIBE_DEFAULT_LANGUAGE`). The analyzers themselves, one per
language and identical in both engines: shared/adapters/analysis.py."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from shared.text import stopwords

LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, eq=False)
class Language:
    """One analysis language: the same pipeline with its own stop words and Snowball stemmer.
    The instances in `LANGUAGES` are the only ones: compared (and hashed) by identity."""

    code: str  # ISO 639-1 (or `simple`), in field and analyzer names
    name: str  # Snowball's name: tantivy's `Filter.stemmer` (lowercase), Lucene's `snowball` (titled)
    stopwords: tuple[str, ...]
    stem: bool = True  # False: no stemmer (`simple`)

    @property
    def suffix(self) -> str:
        """Of this language's field names: English's fields keep their names (`title`, `all`)."""
        return "" if self.code == "en" else f"_{self.code}"

    @property
    def analyzer(self) -> str:
        return f"vibe_{self.code}"

    def field(self, base: str) -> str:
        return base + self.suffix


def _with_letters(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*words, *LETTERS]))


ENGLISH = Language("en", "english", stopwords.ENGLISH)
# Words as they are written, lowercased: no stop words, no stemming. For collections of names,
# codes or mixed languages, where "running" must not find "run" and "the" is a word.
SIMPLE = Language("simple", "simple", (), stem=False)
# The languages whose Snowball stemmer both engines have and whose stop list ships here.
LANGUAGES: dict[str, Language] = {
    ENGLISH.code: ENGLISH,
    SIMPLE.code: SIMPLE,
    **{code: Language(code, name, _with_letters(stopwords.STOPWORDS[code])) for code, name in (
        ("da", "danish"), ("de", "german"), ("es", "spanish"), ("fr", "french"), ("it", "italian"),
        ("nl", "dutch"), ("no", "norwegian"), ("pt", "portuguese"), ("ru", "russian"),
        ("sv", "swedish"), ("tr", "turkish"))},
}
_BY_NAME = {lang.name: lang for lang in LANGUAGES.values()} | LANGUAGES


def language(name: str) -> Language:
    """A language by ISO code or English name ("fr", "French"); ValueError names the choices."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        known = ", ".join(f"{c} ({lang.name})" for c, lang in sorted(LANGUAGES.items()))
        raise ValueError(f"unknown analysis language {name!r}; one of: {known}")
    return found


@dataclass(frozen=True)
class LanguageMap:
    """Which language each collection is analysed in; `default` for every other collection."""

    default: Language = ENGLISH
    collections: Mapping[str, Language] = field(default_factory=dict)
    # A collection's stored setting (shared/collection_settings.py): (tenant, collection, fresh)
    # -> a language code or None. Only languages of the map itself are honoured (the indexes
    # have analyzers and fields for those alone), and it never enters the stamp: a setting
    # changes where a collection's documents go, not the index's layout.
    resolve: Callable[[str, str, bool], str | None] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, default: str = "en", collections: Mapping[str, str] | None = None) -> LanguageMap:
        return cls(language(default), {c: language(n) for c, n in (collections or {}).items()})

    def of(self, collection: str) -> Language:
        return self.collections.get(collection, self.default)

    def for_doc(self, tenant: str, collection: str, fresh: bool = True) -> Language:
        """The language of a tenant's collection: its stored setting when it has one (`fresh`:
        read now, as where a document is indexed; else as recently cached, as a search does)."""
        code = self.resolve(tenant, collection, fresh) if self.resolve is not None else None
        if code is not None:
            for lang in self.languages():
                if lang.code == code:
                    return lang
        return self.of(collection)

    def languages(self) -> list[Language]:
        """Every language in use, the default first: the index's fields and analyzers."""
        rest = sorted({lang.code: lang for lang in self.collections.values()}.values(), key=lambda x: x.code)
        return list({lang.code: lang for lang in [self.default, *rest]}.values())

    def in_scope(self, collections: Sequence[str] | None, tenant: str | None = None) -> list[Language]:
        """The languages a search over `collections` (None: all of the tenant's) must query."""
        if collections is None:
            return self.languages()
        found = (self.for_doc(tenant, c, fresh=False) if tenant is not None else self.of(c) for c in collections)
        return list({lang.code: lang for lang in found}.values())

    def stamp(self) -> str:
        """What an index built with this map must record beside its schema version: empty for
        English only (indexes built before languages existed stay current), else a hash of the
        map, so that any change rebuilds the index."""
        if self.default is ENGLISH and all(lang is ENGLISH for lang in self.collections.values()):
            return ""
        spec = {"default": self.default.code, "collections": {c: x.code for c, x in sorted(self.collections.items())}}
        return hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=8).hexdigest()


ENGLISH_ONLY = LanguageMap()
