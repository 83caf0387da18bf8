"""The lexical and vector indexes, the per-process slot that holds the embedded ones, and the
followers that apply the store's change log to them."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO, Literal
from urllib.parse import urlsplit

from services.wiring.stores import build_collections, build_store
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.facets import FilterableFields, fixed_fields
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.collection_settings import CollectionDirectory, stored_languages
from shared.config import Settings
from shared.indexing import FilePosition, Followers, IndexFollower, StorePosition
from shared.ports import (
    LexicalIndex,
    StoreOfRecord,
    VectorIndex,
)
from shared.spaces import SpaceDirectory

MAX_INDEX_SLOTS = 64
_held_slots: list[IO[bytes]] = []


def claim_index_home(data_dir: Path) -> Path:
    """Where this process keeps its EMBEDDED indexes and their change-log position.

    Each process that serves reads (`serve`, `mcp`) on one data dir needs indexes of its own:
    tantivy allows one writer per index, and a position shared by two processes would let one
    skip the changes the other applied (a revoked ACL would stay searchable in the other). A
    process takes the first free slot under an exclusive `flock`, held for its lifetime and
    dropped by the kernel when it dies: slot 0 is the data dir itself (the layout of a single
    process), slot N is `index-slots/N`, reused with its position after a restart."""
    for n in range(MAX_INDEX_SLOTS):
        home = data_dir if n == 0 else data_dir / "index-slots" / str(n)
        home.mkdir(parents=True, exist_ok=True)
        f = open(home / "index.lock", "ab")  # noqa: SIM115 - held open for the process's lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        _held_slots.append(f)
        return home
    raise RuntimeError(f"{MAX_INDEX_SLOTS} processes already hold index slots in {data_dir}")


def release_index_home(home: Path) -> None:
    for f in list(_held_slots):
        if Path(f.name).parent == home:
            _held_slots.remove(f)
            f.close()


def _build_lexical(settings: Settings, home: Path | None = None, store: StoreOfRecord | None = None,
                   collections: CollectionDirectory | None = None) -> LexicalIndex:
    """`store`: each collection's stored language (PUT .../settings) decides where it is indexed."""
    languages = settings.language_map()
    if store is not None:
        languages = stored_languages(languages, collections or build_collections(settings, store))
    if settings.lexical == "opensearch":
        from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex

        return OpenSearchLexicalIndex.from_settings(settings, languages)
    return TantivyLexicalIndex((home or settings.data_dir) / "lexical", languages=languages)


def _build_vectors(settings: Settings, home: Path | None = None,
                   filterable: FilterableFields | None = None) -> VectorIndex:
    """`filterable`: the fields declared filterable per (tenant, collection), which alone get
    payload indexes (default: VIBE_FILTERABLE_FIELDS everywhere)."""
    if settings.vectors == "qdrant":
        from shared.adapters.qdrant_vectors import QdrantVectorIndex

        return QdrantVectorIndex.from_settings(settings, filterable)
    return EdgeVectorIndex((home or settings.data_dir) / "vectors",
                           filterable or fixed_fields(settings.filterable_fields), settings.max_payload_indexes)


def declared_filterable(settings: Settings, collections: CollectionDirectory) -> FilterableFields:
    """The fields that get payload indexes in the shared vector index: the operator's
    VIBE_FILTERABLE_FIELDS and the collection's own `filterableFields`."""
    operator = frozenset(settings.filterable_fields)

    def fields(tenant: str, collection: str) -> frozenset[str]:
        own = collections.filterable_fields(tenant, collection)
        return operator | own if own else operator
    return fields


def _server(url: str | None) -> str:
    """host:port of a server URL, without the credentials it may carry."""
    return urlsplit(url or "").netloc.rpartition("@")[2]


def follower_name(settings: Settings, index: Literal["lexical", "vectors"]) -> str | None:
    """The store-held position's name for a SHARED index, identifying the index instance (server,
    index or collection prefix, and for vectors the space it holds), so that replicas configured
    alike share one position and a new, empty server starts from 0; None for an embedded index.
    Every replica must spell the server URL the same way."""
    if index == "lexical" and settings.lexical == "opensearch":
        return f"lexical:opensearch:{_server(settings.opensearch_url)}/{settings.opensearch_prefix}"
    if index == "vectors" and settings.vectors == "qdrant":
        from shared.adapters.qdrant_vectors import COLLECTION_PREFIX

        return f"vectors:qdrant:{_server(settings.qdrant_url)}/{COLLECTION_PREFIX}{settings.space}"
    return None


def _build_followers(settings: Settings, store: StoreOfRecord, lexical: LexicalIndex,
                     vectors: VectorIndex, home: Path | None = None) -> Followers:
    """Embedded indexes (a copy per process) share one follower positioned by a file in the data
    dir (or the process's index slot); each shared index gets its own follower positioned in the store, applied by
    one replica at a time (why: shared/indexing.py)."""
    lex_name, vec_name = follower_name(settings, "lexical"), follower_name(settings, "vectors")
    live = SpaceDirectory(store, settings.space).live_of
    own_lexical, own_vectors = (lexical if lex_name is None else None), (vectors if vec_name is None else None)
    members = []
    if own_lexical is not None or own_vectors is not None:
        position = FilePosition((home or settings.data_dir) / "index.seq")
        members.append(IndexFollower(store, own_lexical, own_vectors, position, settings.space, live))
    if lex_name is not None:
        members.append(IndexFollower(store, lexical, None, StorePosition(store, lex_name), settings.space))
    if vec_name is not None:
        members.append(IndexFollower(store, None, vectors, StorePosition(store, vec_name), settings.space, live))
    return Followers(members)


def build_shared_follower(settings: Settings, index: Literal["lexical", "vectors"]) -> IndexFollower | None:
    """The follower of the configured shared `index` alone, with its own store (operator
    commands); None when that index is embedded. The caller closes `store` and the index."""
    name = follower_name(settings, index)
    if name is None:
        return None
    store = build_store(settings)
    lexical = _build_lexical(settings, store=store) if index == "lexical" else None
    vectors = _build_vectors(settings) if index == "vectors" else None
    return IndexFollower(store, lexical, vectors, StorePosition(store, name), settings.space)
