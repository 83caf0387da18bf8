"""Per-collection settings (`GET|PUT /v1/collections/{collection}/settings`): which fields are
embedded, which may be filtered in the vector index's payload indexes, the lexical language, and
whether its reads rerank by default.
The rows live in the store of record (shared/adapters/collection_settings_sql.py); the
deployment's settings (`VIBE_EMBED_FIELDS`, `VIBE_COLLECTION_LANGUAGES`) are the defaults where a
collection has no row or leaves a setting null. `eager` is no setting of its own: it is the
promotion state (`collection_modes`), read and written there.

Every process reads through `CollectionDirectory`, which keeps each tenant's rows for
`ttl` seconds (`VIBE_COLLECTION_SETTINGS_TTL_SECONDS`, default 1): a change made through any
replica is honoured everywhere within that bound, without a restart. The cost is one primary-key
range read per tenant per `ttl` on a path that writes or embeds (a write already costs several
statements), instead of one per document.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from shared.text.languages import LanguageMap

FRESH_SECONDS = 0.05


@dataclass(frozen=True)
class CollectionSettings:
    """One collection's stored settings; None: the deployment's default for it."""

    tenant: str
    collection: str
    language: str | None = None
    embed_fields: tuple[str, ...] | None = None
    filterable_fields: tuple[str, ...] | None = None
    updated_at: float = 0.0
    rerank: bool | None = None  # its reads rerank unless they say otherwise (None: they do not)


class SettingsSource(Protocol):
    """What the directory reads: the part of `shared.ports.CollectionStore` it needs, named here
    so the settings module does not import the ports that refer to its row type."""

    def collection_settings(self, tenant: str) -> dict[str, CollectionSettings]: ...


class CollectionDirectory:
    """The settings every process honours, read through a short per-tenant cache."""

    def __init__(self, store: SettingsSource, embed_defaults: Mapping[str, Sequence[str]],
                 language_default: Callable[[str], str], ttl: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.embed_defaults = embed_defaults
        self.language_default = language_default  # collection -> language code (VIBE_* settings)
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, dict[str, CollectionSettings]]] = {}
        self._lock = threading.Lock()

    def rows(self, tenant: str, fresh: bool = False) -> dict[str, CollectionSettings]:
        """`fresh`: at most `FRESH_SECONDS` old, for where a document is indexed (a change made
        through another replica must not leave documents in the previous language's index for
        a whole `ttl`)."""
        now = self.clock()
        with self._lock:
            hit = self._cache.get(tenant)
        if hit is not None and now - hit[0] < (min(self.ttl, FRESH_SECONDS) if fresh else self.ttl):
            return hit[1]
        rows = self.store.collection_settings(tenant)
        with self._lock:
            if len(self._cache) > 10_000:  # bounded: tenants come and go
                self._cache.clear()
            self._cache[tenant] = (now, rows)
        return rows

    def row(self, tenant: str, collection: str, fresh: bool = False) -> CollectionSettings | None:
        return self.rows(tenant, fresh).get(collection)

    def forget(self, tenant: str) -> None:
        """This process's own change is seen by its next call at once (others: within `ttl`)."""
        with self._lock:
            self._cache.pop(tenant, None)

    def embed_fields(self, tenant: str, collection: str) -> list[str] | None:
        """The fields whose text is embedded (None: every field)."""
        row = self.row(tenant, collection)
        if row is not None and row.embed_fields is not None:
            return list(row.embed_fields)
        default = self.embed_defaults.get(collection)
        return None if default is None else list(default)

    def filterable_fields(self, tenant: str, collection: str) -> frozenset[str] | None:
        """The fields the vector index keeps payload indexes for (None: not configured, the
        index's own default applies)."""
        row = self.row(tenant, collection)
        return None if row is None or row.filterable_fields is None else frozenset(row.filterable_fields)

    def rerank(self, tenant: str, collection: str) -> bool:
        """Whether a read of the collection that does not say reranks (with `default`)."""
        row = self.row(tenant, collection)
        return bool(row is not None and row.rerank)

    def language(self, tenant: str, collection: str) -> str:
        row = self.row(tenant, collection)
        return row.language if row is not None and row.language is not None else self.language_default(collection)


class EmbedFields(Mapping[str, list[str]]):
    """`VIBE_EMBED_FIELDS` as the code that predates per-collection settings reads it (`.get(c)`),
    plus `of(tenant, collection)`, the stored settings first. `embed_fields_of` picks `of` when
    the mapping it is given has one, so a plain dict still works in tests."""

    def __init__(self, directory: CollectionDirectory):
        self.directory = directory

    def __getitem__(self, collection: str) -> list[str]:
        return list(self.directory.embed_defaults[collection])

    def __iter__(self) -> Iterator[str]:
        return iter(self.directory.embed_defaults)

    def __len__(self) -> int:
        return len(self.directory.embed_defaults)

    def of(self, tenant: str, collection: str) -> list[str] | None:
        return self.directory.embed_fields(tenant, collection)


def embed_fields_of(fields: Mapping[str, Sequence[str]], tenant: str, collection: str) -> list[str] | None:
    """The embedded fields of a collection: per tenant and collection where `fields` knows them."""
    if isinstance(fields, EmbedFields):
        return fields.of(tenant, collection)
    found = fields.get(collection)
    return None if found is None else list(found)



def stored_languages(base: LanguageMap, directory: CollectionDirectory) -> LanguageMap:
    """`base` (VIBE_DEFAULT_LANGUAGE, VIBE_COLLECTION_LANGUAGES) with each collection's stored
    language on top, for the lexical indexes. Where a document is indexed reads settings at most
    `FRESH_SECONDS` old (a batch of writes reads them once); a search reads them as cached."""

    def resolve(tenant: str, collection: str, now: bool) -> str | None:
        row = directory.row(tenant, collection, fresh=now)
        return row.language if row is not None else None

    return replace(base, resolve=resolve)
