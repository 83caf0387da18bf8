"""The ingest path MCP tools use (`core.embed_now`, as reindex and extract_key_info call it)
embeds through the same handler, so a certificate-bearing document the external provider may
not receive is `deferred` (`cert`) there too and its text never reaches the provider."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.openai_server import OpenAIProtocolServer
from services.mcp import core
from services.wiring import Container, build
from shared.config import Settings
from shared.model import Principal, SemanticStatus

WRITER = Principal("t", ("user:w",), frozenset({"read", "write", "admin"}),
                   frozenset({"hr:confidential", "acme:public"}))
SECRET = "quokkaconfidential"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Container, OpenAIProtocolServer]]:
    with OpenAIProtocolServer(dim=16) as api:
        settings = Settings(data_dir=Path(tmp_path_factory.mktemp("tools")) / "data", embedder="openai",
                            openai_base_url=api.base_url, embed_model="test-embed",
                            provider_certs=json.loads('{"openai": ["acme:public"]}'))
        c = build(settings)
        try:
            yield c, api
        finally:
            c.stop()


def test_embed_now_defers_documents_the_provider_may_not_receive(
        rig: tuple[Container, OpenAIProtocolServer]) -> None:
    c, api = rig
    text = "Runbook for rotating the wing spar inspection crews across hangars"
    docs = [c.docs.parse(WRITER, "kb", "secret", {"body": f"{text} {SECRET}", "_certs": ["hr:confidential"]}),
            c.docs.parse(WRITER, "kb", "public", {"body": f"{text} public", "_certs": ["acme:public"]}),
            c.docs.parse(WRITER, "kb", "plain", {"body": f"{text} plain"})]
    c.docs.put(docs)
    sent_before = len(api.texts)
    assert core.embed_now(c, docs) == 2
    sides = c.store.sidecars([d.key for d in docs], c.settings.space)
    states = {k.doc_id: (s.status, s.reason) for k, s in sides.items()}
    assert states["secret"] == (SemanticStatus.DEFERRED, "cert")
    assert states["public"][0] == states["plain"][0] == SemanticStatus.READY
    sent = api.texts[sent_before:]
    assert any("public" in t for t in sent) and any("plain" in t for t in sent)
    assert not [t for t in api.texts if SECRET in t]
