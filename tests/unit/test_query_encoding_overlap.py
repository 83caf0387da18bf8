"""The lexical leg runs on its own thread while the request's thread embeds the query: same
rankings as before, the ACL filter inside every engine query, and an encoder
failure reported (embedded once), never left as a pending `embedding_query`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.api.render import answer_body
from services.planner.planner import ReadRequest
from services.planner.query_cache import QueryVectorCache
from services.wiring import Container, build
from shared.adapters.memory_queue import InProcessQueue
from shared.config import Settings
from shared.model import DocKey, Principal, SemanticStatus
from shared.ports import EmbedderError
from tests.support.words import WordEmbedder as Words

WORDS = "wing flutter supersonic boundary layer heat transfer shock wave"
ALICE = Principal("t1", ("user:alice",), frozenset({"read", "write", "admin"}))
ADMIN = Principal("t1", ("user:admin",), frozenset({"read", "write", "admin"}))


class WordEmbedder(Words):
    """Bag-of-words vectors (tests/support/words.py); notes which thread embedded each query and
    can be told to fail like an unreachable provider."""

    def __init__(self) -> None:
        self.query_threads: list[str] = []
        self.fail = False

    def embed_query(self, text: str) -> list[float]:
        self.query_threads.append(threading.current_thread().name)
        if self.fail:
            raise EmbedderError("provider unreachable", transient=False)
        return super().embed_query(text)


@pytest.fixture()
def app(tmp_path: Path) -> Iterator[tuple[Container, WordEmbedder]]:
    emb = WordEmbedder()
    c = build(Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000), emb)
    c.start()
    try:
        mine = [{"_id": f"a{i}", "body": f"{WORDS} {i} " * 3, "_acl": ["user:alice"]} for i in range(8)]
        secret = [{"_id": f"s{i}", "body": f"{WORDS} secret {i} " * 3, "_acl": ["user:admin"]} for i in range(8)]
        c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in mine])
        c.docs.put([c.docs.parse(ADMIN, "c", d["_id"], d) for d in secret])
        # embedded by reads' touches, so the semantic leg has documents to rank
        for _ in range(4):
            for who in (ALICE, ADMIN):
                c.planner.open(who, ReadRequest("c", WORDS, "keyword", limit=20))
            assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
        c.follower.catch_up()
        sides = c.store.sidecars([DocKey("t1", "c", d["_id"]) for d in secret], c.settings.space)
        assert any(s.status == SemanticStatus.READY for s in sides.values())  # unreadable vectors exist
        yield c, emb
    finally:
        c.stop()


@pytest.mark.parametrize("strategy", ["semantic", "hybrid"])
def test_the_lexical_leg_runs_beside_the_encoder_when_the_answer_waits_for_it(app: tuple[Container, WordEmbedder],
                                                                    strategy: str) -> None:
    c, emb = app
    streamed = c.planner.open(ALICE, ReadRequest("c", "flutter shock wave", strategy, limit=10), streaming=True)
    if strategy == "hybrid":
        # the first answer does not wait for the vector, nor share the CPU with its encoder:
        # it is embedded after the first answer, by complete_semantic()
        assert streamed.semantic_deferred and emb.query_threads == []
        streamed.complete_semantic()
        assert emb.query_threads == [threading.current_thread().name]
    else:  # embedded on the request's thread; the lexical leg waits until after the first answer
        assert emb.query_threads == [threading.current_thread().name]
        assert streamed.lexical_hits == [] and streamed.semantic.hits  # the first answer: vectors only
        streamed.complete_semantic()
        assert streamed.lexical_hits  # the touch and the usage statistics have it
    c.planner.query_cache = QueryVectorCache()  # the JSON answer embeds the query again
    inline = c.planner.open(ALICE, ReadRequest("c", "flutter shock wave", strategy, limit=10))
    # a JSON answer runs its lexical leg beside the encoder
    assert any(t.name.startswith("vibe-lexical-leg") for t in threading.enumerate())
    assert [h.key for h in streamed.lexical_hits] == [h.key for h in inline.lexical_hits]
    assert len(emb.query_threads) == 2 and emb.query_threads[1] == threading.current_thread().name
    assert streamed.semantic.state == inline.semantic.state == "ready"
    assert streamed.semantic.vector == inline.semantic.vector
    assert [(f.key, f.score) for f in streamed.ranking] == [(f.key, f.score) for f in inline.ranking]
    assert streamed.semantic.hits
    shown = [r["id"] for r in answer_body(streamed.answer(final=True))["results"]]  # type: ignore[attr-defined]
    assert shown and all(str(i).startswith("a") for i in shown)  # never another principal's document
    assert all(h.key.doc_id.startswith("a") for h in streamed.semantic.hits)


def test_a_failing_encoder_is_reported_and_tried_once_per_read(
        app: tuple[Container, WordEmbedder]) -> None:
    c, emb = app
    emb.fail = True
    for i, (strategy, streaming) in enumerate([("hybrid", True), ("hybrid", False), ("semantic", True)]):
        s = c.planner.open(ALICE, ReadRequest("c", f"boundary layer {i}", strategy, limit=5), streaming=streaming)
        s.complete_semantic()
        assert s.semantic.state == "degraded" and "embedder_unavailable" in (s.semantic.reason or "")
        assert not s.semantic_deferred and len(emb.query_threads) == i + 1  # one attempt per read
        assert strategy == "semantic" or (s.ranking and all(f.key.doc_id.startswith("a") for f in s.ranking))
