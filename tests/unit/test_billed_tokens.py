"""The daily token cap counts what the provider bills: the estimate covers multibyte text
(a character count made CJK text cost a quarter of its tokens), and once a call answers, its
reported `usage.total_tokens` replaces the estimate in the ledger the cap reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.openai_server import OpenAIProtocolServer
from services.core.usage import embed_query_within_cap
from services.wiring import Container, build
from shared.config import Settings
from shared.costs import estimate_tokens, utc_day
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus

ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))
CJK = "液压系统的维护手册包括密封件更换和油液污染检测的详细步骤与注意事项"


def test_the_estimate_counts_multibyte_text() -> None:
    assert estimate_tokens("a" * 40) == 10  # English: about four characters a token, as before
    # 33 CJK characters bill 33-60 tokens with OpenAI's tokenizers; the estimate may not be far below
    assert estimate_tokens(CJK) >= len(CJK)
    assert estimate_tokens("Привет, как дела?") >= 8


@pytest.fixture
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


def _container(tmp_path: Path, api: OpenAIProtocolServer, cap: int) -> Container:
    return build(Settings(data_dir=tmp_path / "data", embedder="openai", openai_base_url=api.base_url,
                          embed_model="stand-in", scheduler_enabled=False, tenant_daily_tokens=cap,
                          per_tenant_per_min=1_000_000))


def test_the_ledger_holds_the_reported_usage_of_document_batches(tmp_path: Path, api: OpenAIProtocolServer) -> None:
    api.tokens_of = lambda text: 100  # the provider bills far more than any estimate of these texts
    c = _container(tmp_path, api, cap=250)
    try:
        keys = []
        for i in range(4):
            d = c.docs.parse(ALICE, "c", f"d{i}", {"body": f"hydraulic seal replacement procedure number {i}"})
            c.docs.put([d])
            keys.append(d.key)
        space = c.settings.space
        day = utc_day(c.store.clock())

        def run(key: DocKey) -> None:
            side = c.store.sidecar(key, space)
            assert side is not None
            c.handler.run([EmbedJob(key, space, side.content_hash)])

        run(keys[0])
        run(keys[1])
        assert c.store.tokens_used("t", day) == 200  # what was billed, not the estimates (~12 each)
        run(keys[2])  # the estimate fits under the cap (200 + ~12 <= 250): sent, billed 100
        run(keys[3])  # 300 billed already: refused without a call
        assert c.store.tokens_used("t", day) == 300
        assert c.store.sidecar(keys[3], space).status == SemanticStatus.DEFERRED  # type: ignore[union-attr]
        assert api.billed == 300 + 100  # the dimension probe at start is not a tenant's
    finally:
        c.store.close()


def test_a_query_embedding_is_charged_what_was_billed(tmp_path: Path, api: OpenAIProtocolServer) -> None:
    api.tokens_of = lambda text: 40
    c = _container(tmp_path, api, cap=100)
    try:
        emb = c.planner.embedder_for(c.settings.space)
        assert emb is not None
        day = utc_day(c.store.clock())
        embed_query_within_cap(c.planner.usage, emb, "t", "c", "seals")
        assert c.store.tokens_used("t", day) == 40
        embed_query_within_cap(c.planner.usage, emb, "t", "c", "seals")
        embed_query_within_cap(c.planner.usage, emb, "t", "c", "seals")  # 80 + 2 <= 100: sent
        assert c.store.tokens_used("t", day) == 120
    finally:
        c.store.close()
