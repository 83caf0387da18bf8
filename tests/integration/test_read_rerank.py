"""The read's optional rerank stage against a local Cohere `/rerank` stand-in (harness/rerank_server.py):
the page is re-ordered as the stand-in scores it, documents carrying certificates and documents the
caller may not read are never sent, a failing reranker leaves the fused order, explain records each
document's fused and reranked rank, and a read asking for rerank without a configured reranker is
refused with 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.rerank_server import RerankServer
from harness.server import served
from services.api.render import answer_body
from services.api.rerank_choice import rerank_choices
from services.planner.planner import ReadRequest
from services.wiring import Container, build
from shared.agent_ports import RerankError
from shared.config import Settings
from shared.model import Principal

WRITER = Principal("t", ("user:alice",), frozenset({"read", "write"}), frozenset({"hr:staff"}))
ALICE = Principal("t", ("user:alice",), frozenset({"read"}), frozenset({"hr:staff"}))
DOCS = {
    "a": {"body": "gearbox gearbox gearbox gearbox oil"},
    "b": {"body": "gearbox gearbox gearbox oil"},
    "c": {"body": "gearbox oil and sources"},  # the stand-in's boost word: its first after rerank
    "s": {"body": "gearbox gearbox gearbox gearbox gearbox secret", "_certs": ["hr:staff"]},
    "h": {"body": "gearbox hidden sources", "_acl": ["user:bob"]},  # alice may not read it
}


@pytest.fixture()
def stand_in() -> Iterator[RerankServer]:
    with RerankServer() as r:
        r.boost = "sources"
        yield r


@pytest.fixture()
def c(tmp_path: Path, stand_in: RerankServer) -> Iterator[Container]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", rerank_url=stand_in.url,
                       rerank_model="stand-in", read_rerank_candidates=10))
    c.start()
    try:
        c.docs.put([c.docs.parse(WRITER, "c", i, b) for i, b in DOCS.items()])
        yield c
    finally:
        c.stop()


def _read(c: Container, rerank: bool) -> dict[str, Any]:
    session = c.planner.open(ALICE, ReadRequest("c", "gearbox", "keyword", limit=10, rerank=rerank))
    return answer_body(session.answer())  # type: ignore[no-any-return]


def _ids(body: dict[str, Any]) -> list[str]:
    return [str(r["id"]) for r in body["results"]]


def test_rerank_reorders_the_page_as_the_reranker_scores_it(c: Container, stand_in: RerankServer) -> None:
    fused = _read(c, rerank=False)
    assert "rerank" not in fused["diagnostics"] and not stand_in.requests
    assert _ids(fused)[:1] == ["s"] and set(_ids(fused)) == {"a", "b", "c", "s"}
    out = _read(c, rerank=True)
    assert len(stand_in.requests) == 1  # one provider call per read
    sent = [d["text"] if isinstance(d, dict) else d for d in stand_in.requests[0]["documents"]]
    assert sorted(sent) == sorted(DOCS[k]["body"] for k in ("a", "b", "c"))
    # `s` carries certificates: never sent, it keeps its fused place; `c` (the boost) leads the rest
    order = _ids(out)
    assert order[0] == "s" and order[1] == "c"
    assert out["diagnostics"]["rerank"] == {"status": "reranked", "provider": "rerank:stand-in", "sent": 3,
                                            "notSent": 1}
    # never the document alice may not read, though the stand-in would have boosted it
    assert all("hidden" not in t for t in sent) and "h" not in order
    fused_scores = {str(r["id"]): r["score"] for r in fused["results"]}
    assert {str(r["id"]): r["score"] for r in out["results"]} == fused_scores  # shown scores stay the fused ones


def test_a_failing_reranker_keeps_the_fused_order(c: Container, stand_in: RerankServer) -> None:
    fused = _ids(_read(c, rerank=False))
    stand_in.fail_status = 503
    out = _read(c, rerank=True)
    assert _ids(out) == fused
    rr = out["diagnostics"]["rerank"]
    assert rr["status"] == "failed" and rr["sent"] == 0 and "503" in rr["error"]
    calls = len(stand_in.requests)
    session = c.planner.open(ALICE, ReadRequest("c", "gearbox", "keyword", limit=10, rerank=True))
    first, again = answer_body(session.answer()), answer_body(session.answer(True))
    assert len(stand_in.requests) == calls + 1  # a read calls a failing reranker once
    assert _ids(first) == _ids(again) == fused and again["diagnostics"]["rerank"]["status"] == "failed"
    # a call that went out and failed is in the ledger, one row per document sent, with no tokens
    assert c.handler.calls is not None
    rows = [r for r in c.handler.calls.ledger_page("t", None, None, None, 0, 100) if r.purpose == "rerank"]
    assert sorted(r.doc_id or "" for r in rows) == ["a", "a", "b", "b", "c", "c"]  # two reads, one call each
    assert {(r.outcome, r.tokens) for r in rows} == {("provider_failed", 0)}


def test_rerank_without_a_reranker_is_refused(tmp_path: Path) -> None:
    with served(tmp_path / "data") as s:
        assert s.bulk("k-alice", "kb", [{"_id": "1", "body": "gearbox"}]).status_code == 200
        r = s.read("k-alice", collection="kb", q="gearbox", rerank=True)
        assert r.status_code == 400, r.text
        err = r.json()
        assert err["error"]["code"] == "invalid_params" and "VIBE_RERANK_URL" in err["error"]["message"]
        assert s.read("k-alice", collection="kb", q="gearbox").status_code == 200


def test_rerank_over_http_answers_in_the_reranked_order(tmp_path: Path, stand_in: RerankServer) -> None:
    with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url}) as s:
        docs = [{"_id": "1", "body": "gearbox gearbox gearbox"}, {"_id": "2", "body": "gearbox sources"}]
        assert s.bulk("k-alice", "kb", docs).status_code == 200
        fused = s.read("k-alice", collection="kb", q="gearbox", semantic={"strategy": "keyword"})
        assert [r["id"] for r in fused.json()["results"]] == ["1", "2"]
        out = s.read("k-alice", collection="kb", q="gearbox", semantic={"strategy": "keyword"}, rerank=True)
        assert out.status_code == 200, out.text
        assert [r["id"] for r in out.json()["results"]] == ["2", "1"]
        assert out.json()["diagnostics"]["rerank"]["status"] == "reranked"
        first, second = out.json()["results"]
        why = s.call("GET", f"/v1/explain/{first['explainId']}", "k-alice")
        assert why.status_code == 200, why.text
        assert why.json()["rerank"] == {"fusedRank": 2, "rank": 1, "score": 2.0}  # all query words + the boost
        assert s.call("GET", f"/v1/explain/{second['explainId']}", "k-alice").json()["rerank"]["rank"] == 2
        plain = s.call("GET", f"/v1/explain/{fused.json()['results'][0]['explainId']}", "k-alice").json()
        assert "rerank" not in plain
        # a stream shows its page at every event, and sends each document to the reranker once
        stand_in.requests.clear()
        events = s.stream("k-alice", collection="kb", q="gearbox", rerank=True)
        assert events[-1][0] == "done" and [r["id"] for r in events[-1][1]["results"]] == ["2", "1"]
        sent = [d["text"] if isinstance(d, dict) else d for req in stand_in.requests for d in req["documents"]]
        assert sorted(sent) == sorted(d["body"] for d in docs)
        nodoc = s.read("k-alice", collection="kb", semantic={"query": {"doc": {"collection": "kb", "_id": "1"}}},
                       rerank=True)
        assert nodoc.status_code == 400 and "query text" in nodoc.json()["error"]["message"]



class TimingOut:
    """Fails as the HTTP adapter does when its timeout fires (shared/adapters/rerank_http.py)."""

    model_id = "rerank:slow"

    def __init__(self) -> None:
        self.calls = 0

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        self.calls += 1
        raise RerankError("reranker unreachable: ReadTimeout")


def test_a_slow_reranker_is_reported_as_a_timeout(c: Container) -> None:
    fused = _ids(_read(c, rerank=False))
    slow = TimingOut()
    c.planner.reranker = slow
    out = _read(c, rerank=True)
    assert slow.calls == 1 and _ids(out) == fused
    assert out["diagnostics"]["rerank"] == {"status": "timeout", "provider": "rerank:slow", "sent": 0, "notSent": 1,
                                            "error": "reranker unreachable: ReadTimeout"}


def test_the_reranker_reads_text_masked_as_an_embedder_would(tmp_path: Path, stand_in: RerankServer) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", rerank_url=stand_in.url,
                       rerank_model="stand-in"))
    c.start()
    try:
        c.docs.put([c.docs.parse(WRITER, "c", "m", {"body": "gearbox questions to ann.lee@example.com"})])
        out = _read(c, rerank=True)
    finally:
        c.stop()
    assert _ids(out) == ["m"] and out["diagnostics"]["rerank"]["sent"] == 1
    sent = [d["text"] if isinstance(d, dict) else d for d in stand_in.requests[0]["documents"]]
    assert sent == ["gearbox questions to [EMAIL]"]


# -- the stream's own event, named providers, the collection default, the budget and the ledger ------------

KB = [{"_id": "1", "body": "gearbox gearbox gearbox"}, {"_id": "2", "body": "gearbox sources"}]


def _order(answer: dict[str, Any]) -> list[str]:
    return [str(r["id"]) for r in answer["results"]]


def test_a_stream_sends_the_fused_page_first_and_the_reranked_page_as_its_own_event(
        tmp_path: Path, stand_in: RerankServer) -> None:
    with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url}) as s:
        assert s.bulk("k-alice", "kb", KB).status_code == 200
        events = s.stream("k-alice", collection="kb", q="gearbox", semantic={"strategy": "keyword"}, rerank=True)
        names = [n for n, _ in events]
        assert names[0] == "lexical" and names[1] == "rerank" and names[-1] == "done", names
        lexical, reranked = events[0][1], events[1][1]
        # the first event does not wait for the reranker: the fused page, no rerank diagnostics
        assert _order(lexical) == ["1", "2"] and "rerank" not in lexical["diagnostics"]
        assert _order(reranked) == ["2", "1"]
        assert reranked["diagnostics"]["rerank"] == {"status": "reranked", "provider": "rerank:" + stand_in.url,
                                                     "sent": 2, "notSent": 0}
        assert _order(events[-1][1]) == ["2", "1"]  # `done` is the final answer, reranked as JSON is
        # every ranking event is followed by its reranked page; no document is sent twice
        for i, name in enumerate(names):
            if name == "semantic":
                assert names[i + 1] == "rerank", names
        assert len(stand_in.requests) == 1
        # a read that does not rerank streams no `rerank` event
        plain = s.stream("k-alice", collection="kb", q="gearbox", semantic={"strategy": "keyword"})
        assert "rerank" not in [n for n, _ in plain] and len(stand_in.requests) == 1


def test_a_read_names_its_reranker_and_an_unknown_one_is_refused(tmp_path: Path, stand_in: RerankServer) -> None:
    with RerankServer() as alt:
        alt.boost = "gearbox"  # disagrees with the default stand-in: it puts "1" first
        providers = json.dumps({"alt": {"url": alt.url, "model": "alt-model", "protocol": "tei"}})
        with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url,
                                            "VIBE_RERANK_PROVIDERS": providers}) as s:
            assert s.bulk("k-alice", "kb", KB).status_code == 200
            body: dict[str, Any] = {"collection": "kb", "q": "gearbox sources", "semantic": {"strategy": "keyword"}}
            out = s.read("k-alice", **body, rerank={"provider": "alt"})
            assert out.status_code == 200, out.text
            assert out.json()["diagnostics"]["rerank"]["provider"] == "rerank:alt-model"
            assert len(alt.requests) == 1 and "texts" in alt.requests[0] and not stand_in.requests
            same = s.read("k-alice", **body, rerank={"provider": "default"})
            assert same.json()["diagnostics"]["rerank"]["provider"] == "rerank:" + stand_in.url
            assert len(stand_in.requests) == 1
            bad = s.read("k-alice", **body, rerank={"provider": "nope"})
            assert bad.status_code == 400, bad.text
            err = bad.json()["error"]
            assert err["code"] == "invalid_params" and err["details"]["field"] == "rerank.provider"
            assert "'nope'" in err["message"] and "alt" in err["message"]
            # the served OpenAPI document names the providers a read may choose
            choices = rerank_choices(s.call("GET", "/openapi.json", None).json())
            assert [c["properties"]["provider"]["enum"] for c in choices] == [["default", "alt"]]
            assert len(alt.requests) == 1 and len(stand_in.requests) == 1  # the refusal sent nothing


def test_a_collection_reranks_by_default_and_a_read_may_say_no(tmp_path: Path, stand_in: RerankServer) -> None:
    with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url}) as s:
        assert s.bulk("k-alice", "kb", KB).status_code == 200
        assert s.bulk("k-alice", "other", KB).status_code == 200
        on = s.call("PUT", "/v1/collections/kb/settings", "k-admin-a", {"rerank": True})
        assert on.status_code == 200 and on.json()["rerank"] is True, on.text
        assert s.call("GET", "/v1/collections/other/settings", "k-admin-a").json()["rerank"] is False
        kw = {"q": "gearbox", "semantic": {"strategy": "keyword"}}
        out = s.read("k-alice", collection="kb", **kw).json()
        assert _order(out) == ["2", "1"] and out["diagnostics"]["rerank"]["status"] == "reranked"
        off = s.read("k-alice", collection="kb", rerank=False, **kw).json()
        assert _order(off) == ["1", "2"] and "rerank" not in off["diagnostics"]
        calls = len(stand_in.requests)
        # another collection, and a read of `any`, follow only their own request
        assert "rerank" not in s.read("k-alice", collection="other", **kw).json()["diagnostics"]
        assert "rerank" not in s.read("k-alice", collection="any", **kw).json()["diagnostics"]
        assert len(stand_in.requests) == calls == 1
        reset = s.call("PUT", "/v1/collections/kb/settings", "k-admin-a", {"rerank": None})
        assert reset.status_code == 200 and reset.json()["rerank"] is False
        assert "rerank" not in s.read("k-alice", collection="kb", **kw).json()["diagnostics"]


def test_a_collection_default_needs_a_reranker(tmp_path: Path) -> None:
    with served(tmp_path / "data") as s:
        r = s.call("PUT", "/v1/collections/kb/settings", "k-admin-a", {"rerank": True})
        assert r.status_code == 400 and "VIBE_RERANK_URL" in r.json()["error"]["message"], r.text
        assert s.call("GET", "/v1/collections/kb/settings", "k-admin-a").json()["rerank"] is False


def test_rerank_calls_are_budgeted_per_tenant_and_written_to_the_ledger(tmp_path: Path,
                                                                         stand_in: RerankServer) -> None:
    with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url, "VIBE_READ_RERANK_PER_MINUTE": "1"}) as s:
        assert s.bulk("k-alice", "kb", KB).status_code == 200
        kw = {"collection": "kb", "q": "gearbox", "semantic": {"strategy": "keyword"}, "rerank": True}
        first = s.read("k-alice", **kw).json()
        assert first["diagnostics"]["rerank"]["status"] == "reranked" and _order(first) == ["2", "1"]
        over = s.read("k-alice", **kw).json()  # the tenant's one call a minute is spent: nothing is sent
        assert over["diagnostics"]["rerank"] == {"status": "budget", "provider": "rerank:" + stand_in.url,
                                                 "sent": 0, "notSent": 0}
        assert _order(over) == ["1", "2"] and len(stand_in.requests) == 1
        # another tenant has its own minute
        assert s.bulk("k-admin-b", "kb", KB).status_code == 200
        assert s.read("k-admin-b", **kw).json()["diagnostics"]["rerank"]["status"] == "reranked"
        rows = s.call("GET", "/semantic/ledger?limit=100", "k-admin-a").json()["rows"]
        rerank = [r for r in rows if r["purpose"] == "rerank"]
        assert sorted(r["_id"] for r in rerank) == ["1", "2"]  # one row per document sent, never its text
        assert {r["collection"] for r in rerank} == {"kb"} and {r["outcome"] for r in rerank} == {"ok"}
        assert all(r["tokens"] > 0 for r in rerank) and len({r["callId"] for r in rerank}) == 1
        assert {r["model"] for r in rerank} == {stand_in.url}


def test_the_daily_token_cap_holds_back_the_reranker_too(tmp_path: Path, stand_in: RerankServer) -> None:
    with served(tmp_path / "data", env={"VIBE_RERANK_URL": stand_in.url, "VIBE_TENANT_DAILY_TOKENS": "3"}) as s:
        assert s.bulk("k-alice", "kb", KB).status_code == 200
        out = s.read("k-alice", collection="kb", q="gearbox", semantic={"strategy": "keyword"}, rerank=True)
        assert out.status_code == 200, out.text
        assert out.json()["diagnostics"]["rerank"]["status"] == "budget" and _order(out.json()) == ["1", "2"]
        assert not stand_in.requests  # nothing went out: the cap is checked before the call
