"""A streamed keyword or hybrid read ranks first only the lexical candidates its page needs
(keys read from the index as asked for: `LexicalIndex.candidates`) and reads the rest after
the first event. What it shows must be what ranking every candidate shows: the same documents,
the same scores (the fused z-scores come from the whole leg), the same next cursor and
candidate count, ties across the page's end included, and a page whose documents fail the
store re-check filled from past the short list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.api.render import answer_body
from services.planner.planner import ReadRequest, ReadSession
from services.wiring import Container, build
from shared.config import Settings
from shared.model import DocKey, Hit, Principal, StoredDoc, Strategy

ALICE = Principal("t", ("user:alice",), frozenset({"read", "write", "admin"}))
N = 90
TIED = 30


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    # No semantic leg in the first answers compared here: the query vectors are never cached
    # (the sessions are not completed) and nothing is embedded.
    container = build(Settings(data_dir=Path(tmp_path_factory.mktemp("lexical-first")) / "data", embedder="hash"))
    container.start()
    try:
        # 35 texts of many lengths, 25 of them twice: spread-out scores, and ties in pairs; then
        # 30 copies of one text that ranks first, written in descending key order (the engine
        # returns ties in its own order, fusion in key order): a run of ties longer than a
        # short first page, and pages that end inside it and past it.
        container.docs.put([container.docs.parse(ALICE, "c", f"d{i:02d}",
                                                 {"body": "propeller blade " * (1 + i % 5) + "item " * (i % 7)})
                            for i in range(N - TIED)])
        for i in reversed(range(TIED)):  # one write each: the engine keeps them in this order
            container.docs.put([container.docs.parse(ALICE, "c", f"t{i:02d}", {"body": "propeller blade " * 6})])
        yield container
    finally:
        container.stop()


def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle: the same reads with every candidate's key read and ranked at once."""
    whole = ReadSession._lexical_leg

    def every(session: ReadSession, text: str, first: int | None = None) -> list[Hit]:
        return whole(session, text)

    monkeypatch.setattr(ReadSession, "_lexical_leg", every)


def _first(c: Container, req: ReadRequest) -> tuple[ReadSession, dict[str, Any]]:
    session = c.planner.open(ALICE, req, streaming=True)
    return session, answer_body(session.answer())


def _shown(session: ReadSession, answer: dict[str, Any]) -> tuple[Any, ...]:
    results = answer["results"]
    assert isinstance(results, list)
    return ([(r["id"], r["score"], r["matchedBy"]) for r in results], session.has_more,
            answer["diagnostics"]["lexical"]["candidates"])


STRATEGIES: tuple[Strategy, ...] = ("keyword", "hybrid")
CASES = [(strategy, limit, offset) for strategy in STRATEGIES
         for limit in (1, 3, 5, 7, 10, 25) for offset in (0, 5, 25)]


def test_the_first_page_is_the_whole_rankings_page(c: Container, monkeypatch: pytest.MonkeyPatch) -> None:
    shorts, ties = 0, 0
    got = {}
    for strategy, limit, offset in CASES:
        session, answer = _first(c, ReadRequest("c", "propeller blade", strategy, limit=limit, offset=offset))
        n = len(session.lexical_hits)
        shorts += session._short_lexical
        ties += strategy == "hybrid" and n > max(offset + limit + 1, 2 * limit, 10)  # read past a tie
        got[strategy, limit, offset] = _shown(session, answer)
        if strategy == "keyword":  # after the first event: the same page, keys read only as deep as the touch reads
            assert not session.complete_semantic()  # (a hybrid one would embed the query: a cached vector)
            assert len(session.lexical_hits) == n
            session.touch()
            assert len(session.lexical_hits) == max(n, session._touch_reach()) < N and session._short_lexical
            assert _shown(session, answer_body(session.answer(final=True))) == got[strategy, limit, offset]
    assert shorts and ties  # short first pages were ranked, some of them read past ties at the page's end
    _eager(monkeypatch)
    for case in CASES:
        session, answer = _first(c, ReadRequest("c", "propeller blade", case[0], limit=case[1], offset=case[2]))
        assert not session._short_lexical and len(session.lexical_hits) == N
        assert _shown(session, answer) == got[case], case


def test_a_streamed_semantic_read_reads_lexical_keys_only_as_deep_as_its_touch(c: Container) -> None:
    """Its ranking is the vector list: the lexical leg (after the first event) feeds the touch
    and the usage statistics, which read the first `_touch_reach()` keys; the candidate count
    reported is the whole leg's."""
    session = c.planner.open(ALICE, ReadRequest("c", "propeller blade", "semantic", limit=5), streaming=True)
    assert not session.lexical_hits  # the lexical leg waits for the first event
    session.finish()
    reach = session._touch_reach()
    assert session.touched and reach < N and len(session.lexical_hits) == reach
    diagnostics = answer_body(session.answer(final=True))["diagnostics"]
    assert isinstance(diagnostics, dict) and diagnostics["lexical"]["candidates"] == N


@pytest.mark.parametrize("strategy", ["keyword", "hybrid"])
def test_a_page_that_loses_documents_to_the_store_recheck_is_filled_from_every_candidate(
        c: Container, monkeypatch: pytest.MonkeyPatch, strategy: Strategy) -> None:
    """Most of the first candidates are gone from the store while the index still has them (an
    index that has not caught up): the page is filled from past the short list."""
    req = ReadRequest("c", "propeller blade", strategy, limit=5)
    session, _ = _first(c, req)
    gone = {h.key for h in session.lexical_hits[:18]}
    get_docs = c.store.get_docs

    def without(keys: list[DocKey]) -> dict[DocKey, StoredDoc]:
        return {k: d for k, d in get_docs(keys).items() if k not in gone}

    monkeypatch.setattr(c.store, "get_docs", without)
    session, answer = _first(c, req)
    shown = _shown(session, answer)
    assert len(shown[0]) == 5 and not {r[0] for r in shown[0]} & {k.doc_id for k in gone}
    _eager(monkeypatch)
    session, answer = _first(c, req)
    assert _shown(session, answer) == shown
