"""The per-collection settings directory (shared/collection_settings.py): a change stored by any
process is seen after the TTL, at once by the process that made it, and fresh reads (where a
document is indexed) are at most FRESH_SECONDS old."""

from __future__ import annotations

from shared.collection_settings import (
    FRESH_SECONDS,
    CollectionDirectory,
    CollectionSettings,
    EmbedFields,
    embed_fields_of,
    stored_languages,
)
from shared.text.languages import LanguageMap


class Rows:
    """A store's settings table, counting its reads."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, CollectionSettings]] = {}
        self.reads = 0

    def collection_settings(self, tenant: str) -> dict[str, CollectionSettings]:
        self.reads += 1
        return dict(self.rows.get(tenant, {}))

    def set(self, row: CollectionSettings) -> None:
        self.rows.setdefault(row.tenant, {})[row.collection] = row


def _directory(store: Rows, now: list[float], ttl: float = 1.0) -> CollectionDirectory:
    return CollectionDirectory(store, {"c": ["body"]}, lambda c: "en", ttl, clock=lambda: now[0])  # type: ignore[arg-type]


def test_a_change_is_seen_after_the_ttl_and_one_read_serves_the_tenant_meanwhile() -> None:
    store, now = Rows(), [0.0]
    d = _directory(store, now)
    assert d.embed_fields("t", "c") == ["body"]  # the deployment's default
    store.set(CollectionSettings("t", "c", None, ("title",), ("year",), 1.0))  # another process's PUT
    now[0] = 0.9
    assert d.embed_fields("t", "c") == ["body"] and d.filterable_fields("t", "c") is None
    assert store.reads == 1
    now[0] = 1.0
    assert d.embed_fields("t", "c") == ["title"] and d.filterable_fields("t", "c") == frozenset({"year"})
    assert d.embed_fields("u", "c") == ["body"]  # per tenant


def test_the_writing_process_sees_its_change_at_once() -> None:
    store, now = Rows(), [0.0]
    d = _directory(store, now)
    assert d.language("t", "c") == "en"
    store.set(CollectionSettings("t", "c", "simple"))
    d.forget("t")
    assert d.language("t", "c") == "simple"


def test_fresh_reads_are_at_most_fresh_seconds_old() -> None:
    store, now = Rows(), [0.0]
    d = _directory(store, now, ttl=10.0)
    langs = stored_languages(LanguageMap.parse("en", {"names": "simple"}), d)
    assert langs.for_doc("t", "c").code == "en"
    store.set(CollectionSettings("t", "c", "simple"))
    now[0] = FRESH_SECONDS / 2
    assert langs.for_doc("t", "c").code == "en"
    now[0] = FRESH_SECONDS
    assert langs.for_doc("t", "c").code == "simple"  # where a document goes: fresh
    store.set(CollectionSettings("t", "c", "fr"))  # not analysed by these indexes: ignored
    now[0] = 1.0
    assert langs.for_doc("t", "c").code == "en"
    assert langs.stamp() == LanguageMap.parse("en", {"names": "simple"}).stamp()  # settings never rebuild


def test_embed_fields_of_reads_plain_mappings_too() -> None:
    store, now = Rows(), [0.0]
    fields = EmbedFields(_directory(store, now))
    store.set(CollectionSettings("t", "c", None, ("title",)))
    assert embed_fields_of(fields, "t", "c") == ["title"] and fields.get("c") == ["body"]
    assert embed_fields_of({"c": ["x"]}, "t", "c") == ["x"] and embed_fields_of({}, "t", "c") is None
