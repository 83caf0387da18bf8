"""A write that does not change an evicted document's content keeps what its sidecar says of the
vector in the cold store: the cold reference (its next touch rehydrates it, no provider call),
and when and with which model it was embedded. Before, `lastEmbeddedAt` went null and
`GET ...?include=semantic` said a cold document had never been embedded."""

from __future__ import annotations

from pathlib import Path

from shared.model import DocKey, Principal, SemanticStatus
from tests.unit.test_scheduler_switch import embed_now, running

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))


def test_rewriting_an_evicted_document_unchanged_keeps_its_embedding_record(tmp_path: Path) -> None:
    with running(tmp_path) as c:
        fields = {"title": "Flutter", "body": "wing flutter margins in transonic flight"}
        c.docs.put([c.docs.parse(USER, "c", "a", fields)])
        key = DocKey("t", "c", "a")
        embed_now(c, "core", key)
        embedded = c.store.sidecar(key, "core")
        assert embedded is not None and embedded.last_embedded_at is not None
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 1
        c.docs.put([c.docs.parse(USER, "c", "a", dict(fields))])  # the same content again
        after = c.store.sidecar(key, "core")
        assert after is not None and after.status == SemanticStatus.NONE and after.cold_ref is not None
        assert (after.last_embedded_at, after.model_id) == (embedded.last_embedded_at, embedded.model_id)
