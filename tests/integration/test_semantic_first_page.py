"""A streamed semantic read searches first for its page only (offset + limit + 1 hits) and
completes the candidate list after the first event: what it shows must be what the full list
shows, including the next cursor and a page whose documents fail the store re-check."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from services.wiring import Container, build
from shared.config import ApiKey, Settings
from shared.model import DocKey, Principal, SemanticStatus, StoredDoc
from tests.support.in_process import UvicornThread

KEYS = [ApiKey(key="k-alice", tenant="t", principals=["user:alice"], scopes=["read", "write", "admin"])]
ALICE = Principal("t", ("user:alice",), frozenset({"read", "write", "admin"}))
AUTH = {"Authorization": "Bearer k-alice"}
N = 20


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Container, httpx.Client]]:
    c = build(Settings(data_dir=Path(tmp_path_factory.mktemp("first-page")) / "data", embedder="hash"))
    served = UvicornThread(c, KEYS)
    try:
        c.docs.put([c.docs.parse(ALICE, "c", f"d{i:02d}", {"body": "propeller blade " * (1 + i % 5) + f"item {i}"})
                    for i in range(N)])
        with httpx.Client(base_url=served.base, timeout=60) as http:
            assert http.post("/semantic/promote", json={"collection": "c"}, headers=AUTH).status_code == 200
            deadline = time.monotonic() + 60  # the promotion's backfill embeds every document
            while c.store.count_in_status("t", c.settings.space, SemanticStatus.READY) < N:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            yield c, http
    finally:
        served.stop()


def _json(http: httpx.Client, **body: Any) -> dict[str, Any]:
    r = http.post("/v1/read", json=body, headers={**AUTH, "Accept": "application/json"})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _first_and_done(http: httpx.Client, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    with connect_sse(http, "POST", "/v1/read", json=body, headers={**AUTH, "Accept": "text/event-stream"}) as es:
        events = [(e.event, e.json()) for e in es.iter_sse()]
    assert events[0][0] == "lexical" and events[-1][0] == "done"
    return events[0][1], events[-1][1]


def _count_searches(c: Container, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The `k` of every vector search from now on, in order."""
    asked: list[int] = []
    search = c.vectors.search

    def counted(space: str, flt: Any, vector: list[float], k: int, only: Any = None) -> Any:
        asked.append(k)
        return search(space, flt, vector, k, only)

    monkeypatch.setattr(c.vectors, "search", counted)
    return asked


def _shown(answer: dict[str, Any]) -> list[tuple[str, float]]:
    return [(r["id"], r["score"]) for r in answer["results"]]


@pytest.mark.parametrize("limit", [1, 5, N - 1, N, N + 5])
def test_the_first_page_is_the_full_lists_page(app: tuple[Container, httpx.Client], limit: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents repeat their text every 5 (ties in score): the page holds the same ones."""
    c, http = app
    body = {"collection": "c", "q": "propeller blade", "limit": limit, "semantic": {"strategy": "semantic"}}
    whole = _json(http, **body)
    asked = _count_searches(c, monkeypatch)
    first, done = _first_and_done(http, **body)
    assert asked[0] == limit + 1  # the short search ran (and then the full one, or the tie fallback)
    assert _shown(first) == _shown(done) == _shown(whole)
    assert len(first["results"]) == min(limit, N)
    assert (first["nextCursor"] is None) == (whole["nextCursor"] is None) == (limit >= N)
    second = _json(http, **body, cursor=first["nextCursor"]) if first["nextCursor"] else None
    if second is not None:  # the cursor of a first event continues the same ranking
        rest = _json(http, **{**body, "limit": N})["results"][limit:limit * 2]
        assert _shown(second) == [(r["id"], r["score"]) for r in rest]


def test_the_full_list_waits_for_an_answer_that_reports_it(app: tuple[Container, httpx.Client],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The short list decides the page, so the full search runs only for `done` (which reports
    every candidate); a reader that leaves after the first event never pays for it, and its
    query is still touched and counted."""
    from services.planner.planner import ReadRequest

    c, http = app
    # limit 4: the page ends with a run of 4 tied documents (every 5th repeats its text), so the
    # hit past it scores below the page's last and the short list decides the page
    body = {"collection": "c", "q": "propeller", "limit": 4, "semantic": {"strategy": "semantic"}}
    whole = _json(http, **body)
    asked = _count_searches(c, monkeypatch)
    first, done = _first_and_done(http, **body)
    assert asked == [5, c.settings.lexical_candidates]
    assert first["diagnostics"]["semantic"]["hits"] == 5
    assert done["diagnostics"]["semantic"]["hits"] == whole["diagnostics"]["semantic"]["hits"] == N
    assert _shown(first) == _shown(done) == _shown(whole)

    asked.clear()
    # a query not asked before (its short list decides a page of 5), so its touch is a first touch, the
    # one a dig bound (`reach`) applies to
    left = c.planner.open(ALICE, ReadRequest("c", "blade", "semantic", limit=5), streaming=True)
    assert asked == [6]  # the short list decides the page
    left.finish()  # what the finisher does for a stream whose reader left (Planner.finish_left)
    assert asked == [6] and left.touched and left.lexical_hits


def test_a_page_that_loses_documents_to_the_store_recheck_is_filled_from_the_full_list(
        app: tuple[Container, httpx.Client], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two of the page's documents are gone from the store while the index still has them (an
    index that has not caught up): the page is filled from past the short list."""
    c, http = app
    body = {"collection": "c", "q": "propeller blade", "limit": 5, "semantic": {"strategy": "semantic"}}
    top = [r["id"] for r in _json(http, **body)["results"]]
    gone = {DocKey("t", "c", top[0]), DocKey("t", "c", top[2])}
    get_docs = c.store.get_docs

    def without(keys: list[DocKey]) -> dict[DocKey, StoredDoc]:
        return {k: d for k, d in get_docs(keys).items() if k not in gone}

    monkeypatch.setattr(c.store, "get_docs", without)
    whole = _json(http, **body)
    first, _ = _first_and_done(http, **body)
    assert len(first["results"]) == 5 and not {r["id"] for r in first["results"]} & {k.doc_id for k in gone}
    assert _shown(first) == _shown(whole) and first["nextCursor"] is not None


def test_a_tie_across_the_pages_end_needs_the_full_list() -> None:
    """An exact top-k returns some of the hits tied at its end, in no set order: the short
    list decides the page only when the hit past the page scores below the page's last."""
    from types import SimpleNamespace

    from services.planner.planner import ReadSession
    from shared.model import Hit

    def decides(offset: int, limit: int, scores: list[float]) -> bool:
        hits = [Hit(DocKey("t", "c", f"d{i}"), s) for i, s in enumerate(scores)]
        stub = SimpleNamespace(req=SimpleNamespace(offset=offset, limit=limit), semantic=SimpleNamespace(hits=hits))
        return ReadSession._short_list_decides_page(stub)  # type: ignore[arg-type]

    assert decides(0, 2, [0.9, 0.8, 0.7])
    assert not decides(0, 2, [0.9, 0.8, 0.8])  # a third hit tied with the page's last: maybe more
    assert decides(0, 2, [0.9, 0.8])  # everything there is
    assert decides(2, 2, [0.9, 0.9, 0.9, 0.8, 0.7])  # ties inside the page are ordered by key
    assert not decides(2, 2, [0.9, 0.9, 0.9, 0.8, 0.8])
