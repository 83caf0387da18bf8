"""The Python SDK (sdk/python, `vibe-semantic-client`) against the real served app, and its
retry policy against a local stand-in that answers 429/503 the way a proxy or the API does."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from vibe_semantic_client import (
    AsyncClient,
    Client,
    Conflict,
    Done,
    EmbedderUnavailable,
    Error,
    Forbidden,
    Hit,
    InvalidParams,
    Lexical,
    NotFound,
    RateLimited,
    ReadAnswer,
    Rerank,
    ServiceUnavailable,
    Timeout,
    TransportError,
    Unauthorized,
    VibeError,
    Warming,
    answers,
)
from vibe_semantic_client.answers import (
    Backfill,
    Coverage,
    ExplainReason,
    Explanation,
    Keys,
    KeyView,
    LegContribution,
    MatchReason,
    Space,
    Spaces,
    Usage,
    UsageDay,
    UsageToday,
)
from vibe_semantic_client.models import Neighbor, Passage, parse_event

from harness.openapi_responses import OpenApiResponses
from harness.server import REPO, free_port
from tests.integration.test_read_path import DOCS, FILLER, FORBIDDEN_FOR_ALICE  # the same corpus as the HTTP tests
from tests.sdk.conftest import ADMIN, ALICE, BOB, OTHER_ADMIN

CORPUS = cast(list[dict[str, Any]], DOCS)


Connect = Callable[..., Client]


@pytest.fixture(scope="module")
def spec(base_url: str) -> OpenApiResponses:
    return OpenApiResponses(base_url)


@pytest.fixture(scope="module")
def connect(base_url: str, spec: OpenApiResponses) -> Iterator[Connect]:
    """`connect(key, **options)`: a Client whose every JSON answer is checked against the served
    /openapi.json on the way in (harness/openapi_responses.py); a mismatch fails the call."""
    opened: list[httpx.Client] = []

    def make(key: str, **options: Any) -> Client:
        http = httpx.Client(timeout=60, event_hooks={"response": [spec.check]})
        opened.append(http)
        return Client(base_url, key, http_client=http, **options)

    yield make
    for http in opened:
        http.close()


@pytest.fixture(scope="module")
def admin(connect: Connect) -> Iterator[Client]:
    with connect(ADMIN) as c:
        yield c


@pytest.fixture(scope="module")
def loaded(admin: Client, connect: Connect) -> str:
    """Collection `notes` with DOCS (tenant ta) and one launch document of tenant tb."""
    out = admin.bulk("notes", CORPUS)
    assert out.accepted == 4 and not out.errors, out
    with connect(OTHER_ADMIN) as other:
        other.put("notes", "tb1", {"title": "Other tenant launch", "body": "launch quarter" + FILLER})
    return "notes"


# -- documents -------------------------------------------------------------------------------

def test_documents_round_trip(admin: Client) -> None:
    assert admin.put("docs", "a 1?x#é", {"title": "Hello", "n": 1}, acl=["user:admin"])["result"] == "created"
    assert admin.put("docs", "a 1?x#é", {"title": "Hello again", "n": 2}, acl=["user:admin"])["result"] == "updated"
    got = admin.get("docs", "a 1?x#é")
    assert got["_id"] == "a 1?x#é" and got["title"] == "Hello again" and got["n"] == 2 and "__semantic" not in got
    projected = admin.get("docs", "a 1?x#é", include_semantic=True)
    assert {"status", "lastEmbeddedAt", "space"} <= set(projected["__semantic"])
    admin.put("docs", "private", {"title": "no ai"}, semantic_intent="deny")
    assert admin.get("docs", "private")["_vibe"] == {"semantic": {"intent": "deny"}}
    assert admin.delete("docs", "a 1?x#é")["result"] == "deleted"
    with pytest.raises(NotFound):
        admin.get("docs", "a 1?x#é")


def test_mget_in_order_and_unreadable_looks_absent(admin: Client, loaded: str, connect: Connect) -> None:
    with connect(ALICE) as alice:
        docs = alice.mget(loaded, ["d3", "d2", "missing", "d1"])
    assert [d["_id"] if d else None for d in docs] == ["d3", None, None, "d1"]
    assert "Discount" not in json.dumps(docs)


def test_typed_errors(connect: Connect, admin: Client, loaded: str) -> None:
    with connect("not-a-key", retries=0) as stranger, pytest.raises(Unauthorized) as e401:
        stranger.get(loaded, "d3")
    with connect(BOB) as bob, pytest.raises(Forbidden) as e403:
        bob.put(loaded, "x", {"title": "bob has no write scope"})
    with pytest.raises(NotFound) as e404:
        admin.get(loaded, "no-such-doc")
    with pytest.raises(InvalidParams) as e400:
        admin.read(loaded, "launch", limit=0)
    with pytest.raises(InvalidParams):
        admin.read(loaded, "launch", no_such_option=True)  # sent as given; the server refuses it
    with pytest.raises(InvalidParams):
        next(admin.read_once(loaded, "launch", limit=0))  # the stream cannot start: raised at its first event
    for info, code, status in ((e401, "unauthorized", 401), (e403, "forbidden", 403), (e404, "not_found", 404),
                               (e400, "invalid_params", 400)):
        err = info.value
        assert isinstance(err, VibeError) and err.code == code and err.status == status and err.message
    with connect(ALICE) as alice, pytest.raises(Forbidden):
        alice.coverage(loaded)  # admin scope


# -- read ------------------------------------------------------------------------------------

def test_read_typed_answer_respects_acl_and_tenant(connect: Connect, loaded: str) -> None:
    with connect(ALICE) as alice:
        answer = alice.read("any", "launch", strategy="keyword", limit=10, highlights=True)
    assert isinstance(answer, ReadAnswer) and answer.strategy == "keyword"
    assert set(answer.ids) == {"d1", "d3"}
    hit = answer.results[0]
    assert hit.collection == loaded and isinstance(hit.score, float) and hit.matched_by == ["keyword"]
    assert hit.explain_id and isinstance(answer.warming, Warming) and "strategy" in answer.diagnostics
    assert any(h.highlights for h in answer.results)
    scores = [h.score for h in answer.results]
    assert scores == sorted(scores, reverse=True)
    eng_only = next(h for h in answer.results if h.id == "d1")
    with connect(ALICE) as alice:
        why = alice.explain(str(eng_only.explain_id))
    assert isinstance(why, Explanation) and why.id == "d1" and why.collection == loaded and why.reasons
    assert all(isinstance(r, ExplainReason) and r.type for r in why.reasons)
    keyword = [r for r in why.reasons if isinstance(r, MatchReason) and r.leg == "keyword"]
    assert keyword and keyword[0].rank >= 1 and keyword[0].field and keyword[0].highlights
    assert why.fusion == "none" and why.shown_score == eng_only.score and why.expires_at > 0
    assert [(c.leg, c.contribution) for c in why.contributions] == [("keyword", why.score)]
    assert isinstance(why.contributions[0], LegContribution) and why.contributions[0].raw_score == why.score
    with connect(BOB) as bob, pytest.raises(NotFound):
        bob.explain(str(eng_only.explain_id))  # bob may not read d1: its explanation looks absent


def test_fields_filter_and_pages(admin: Client, connect: Connect) -> None:
    docs = [{"_id": f"p{i:02}", "title": f"paging report {i}", "year": 2000 + i, "tag": ["odd", "even"][i % 2 == 0],
             "body": "paging" + FILLER} for i in range(12)]
    docs.append({"_id": "hidden", "title": "paging hidden", "year": 2005, "tag": "odd", "_acl": ["user:admin"]})
    admin.bulk("paged", docs)
    with connect(ALICE) as alice:
        answer = alice.read("paged", "paging", strategy="keyword", limit=5, fields=["title", "year"],
                            filter={"year": {"gte": 2004}, "tag": {"in": ["odd"]}})
        assert answer.results and all(h.fields and set(h.fields) <= {"title", "year"} for h in answer.results)
        assert {h.id for h in answer.results} == {"p05", "p07", "p09", "p11"}  # `hidden`: not alice's
        assert answer.next_cursor is None
        pages = list(alice.pages("paged", "paging", strategy="keyword", limit=5))
        with pytest.raises(InvalidParams):
            alice.read("paged", "paging", strategy="keyword", filter={"year": {"near": 3}})
    assert [len(p.results) for p in pages] == [5, 5, 2]
    seen = [h.id for p in pages for h in p.results]
    assert sorted(seen) == [f"p{i:02}" for i in range(12)]  # every readable hit once, across pages


def test_more_like_this_over_every_collection_and_vector_queries(admin: Client, connect: Connect,
                                                                  loaded: str) -> None:
    """`like=` with collection `semantic.nodes` never returns the source; `vector=` is an admin's."""
    with connect(ALICE) as alice:
        got = alice.read("semantic.nodes", like=(loaded, "d1"), strategy="keyword", limit=20)
        shown = {(h.collection, h.id) for h in got.results}
        assert (loaded, "d3") in shown and (loaded, "d1") not in shown  # the source: never a result
        assert (loaded, "d4") not in shown  # the admin's alone
        with pytest.raises(Forbidden):
            alice.read(loaded, vector=[0.5] * 8)
    with pytest.raises(InvalidParams):  # no space has 3 dimensions
        admin.read(loaded, vector=[0.5, 0.5, 0.5])


def test_read_once_streams_events_in_order_and_no_leak(admin: Client, connect: Connect) -> None:
    admin.bulk("fresh", CORPUS)  # nothing has touched these yet: the stream has something to warm
    with connect(ALICE) as alice:
        events = list(alice.read_once("fresh", "launch date", strategy="hybrid", limit=10, highlights=True))
    names = [e.event for e in events]
    assert isinstance(events[0], Lexical) and isinstance(events[-1], Done), names
    assert set(names) <= {"lexical", "warming", "semantic", "done"} and "warming" in names
    seen = {h.id for e in events for h in e.results}
    assert "d1" in seen and not seen & FORBIDDEN_FOR_ALICE
    assert "Discount" not in repr(events) and "Only the admin" not in repr(events)
    assert events[-1].diagnostics["semantic"]["pending"] == 0
    event_ids = [int(e.id or 0) for e in events]
    assert event_ids == sorted(event_ids) and event_ids[0] >= 1 and len(set(event_ids)) == len(events)


def test_stream_of_a_forbidden_collection_yields_nothing(admin: Client, connect: Connect) -> None:
    admin.put("vault", "v1", {"title": "Vault launch codes", "body": "launch launch" + FILLER}, acl=["user:admin"])
    for key in (ALICE, BOB, OTHER_ADMIN):
        with connect(key) as other:
            events = list(other.read_once("vault", "launch codes", strategy="hybrid"))
            answer = other.read("vault", "launch codes", strategy="hybrid")
        assert events and events[0].event == "lexical" and events[-1].event == "done"
        assert not any(e.results for e in events) and not answer.results
        assert "Vault" not in repr(events)


def test_breaking_out_of_a_stream_closes_it(connect: Connect, loaded: str) -> None:
    with connect(ALICE) as alice:
        for event in alice.read_once(loaded, "launch", strategy="hybrid"):
            assert event.event == "lexical"
            break
        # the connection went back (or was closed): the client still works
        assert alice.read(loaded, "launch", strategy="keyword").results


def test_read_once_final_gives_the_last_ranking_without_a_warning(connect: Connect, loaded: str) -> None:
    with connect(ALICE) as alice, warnings.catch_warnings():
        warnings.simplefilter("error")  # the supported way: no DeprecationWarning
        stream = alice.read_once(loaded, "launch", strategy="hybrid")
        events = list(stream)
        assert isinstance(events[-1], Done) and stream.final() == events[-1].answer
        assert alice.read_once(loaded, "launch", strategy="hybrid").final().results  # unread: read to the end


def test_read_once_used_as_the_old_one_shot_answer_still_works_and_warns(connect: Connect, loaded: str) -> None:
    """Code from before `read_once` streamed reads `.results`/`.ids` (or awaits it): it gets the
    stream's last ranking, told by a DeprecationWarning that the one-shot answer is `read`."""
    with connect(ALICE) as alice:
        with pytest.warns(DeprecationWarning, match=r"use read\(\)"):
            ids = alice.read_once(loaded, "launch", strategy="keyword").ids
        assert set(ids) == set(alice.read(loaded, "launch", strategy="keyword").ids) == {"d1", "d3"}
        assert Client.stream is Client.read_once and AsyncClient.stream is AsyncClient.read_once  # the old name

    async def run() -> ReadAnswer:
        async with AsyncClient(alice.base_url, ALICE) as a:
            with pytest.warns(DeprecationWarning, match=r"use read\(\)"):
                return await a.read_once(loaded, "launch", strategy="keyword")

    answer = asyncio.run(run())
    assert isinstance(answer, ReadAnswer) and set(answer.ids) == {"d1", "d3"}


# Every property the OpenAPI document declares for a hit, an answer, a warming and an error
# event, and the SDK attribute that carries it: a field the server adds fails here until the
# SDK models it (the Python models are written by hand; this keeps them generated-types-true).
HIT = {"id": ("id", "x"), "collection": ("collection", "c"), "score": ("score", 0.5),
       "matchedBy": ("matched_by", ["keyword"]), "explainId": ("explain_id", "e"), "highlights": ("highlights", ["h"]),
       "fields": ("fields", {"title": "t"}), "__semantic": ("semantic", {"status": "ready"}),
       "passage": ("passage", Passage("body", 120, 980, ["Setup", "Tyres"])),
       "neighbors": ("neighbors", [Neighbor("n", "c", "cites", 0.5, "out", 1, ("c", "x"), ["c/x", "c/n"],
                                            [{"edge": "e", "from": "c/x", "to": "c/n", "predicate": "cites",
                                              "weight": 0.5}], "en", {"title": "t"})])}
HIT_JSON = {wire: value for wire, (_, value) in HIT.items()}
HIT_JSON["passage"] = {"field": "body", "start": 120, "end": 980, "headings": ["Setup", "Tyres"]}
HIT_JSON["neighbors"] = [{"id": "n", "collection": "c", "predicate": "cites", "weight": 0.5, "direction": "out",
                          "depth": 1, "via": {"id": "x", "collection": "c"}, "path": ["c/x", "c/n"],
                          "edges": [{"edge": "e", "from": "c/x", "to": "c/n", "predicate": "cites", "weight": 0.5}],
                          "explainId": "en", "fields": {"title": "t"}}]
WARMING = {"queued": ("queued", 3), "message": ("message", "Warming up")}
ERROR = {"code": ("code", "conflict"), "message": ("message", "m"), "details": ("details", {"waiting": 1}),
         "requestId": ("request_id", "r-1")}
ANSWER_FIELDS = {"results": "results", "strategy": "strategy", "warming": "warming", "diagnostics": "diagnostics",
                 "nextCursor": "next_cursor"}


def test_models_cover_the_openapi_document(spec: OpenApiResponses) -> None:
    doc = spec.doc()
    schemas = doc["components"]["schemas"]
    for name, table in (("Hit", HIT), ("Warming", WARMING), ("ErrorDetail", ERROR), ("ReadAnswer", ANSWER_FIELDS)):
        assert set(schemas[name]["properties"]) == set(table), name
    hit = Hit.from_json(HIT_JSON)
    assert all(getattr(hit, attr) == value for attr, value in HIT.values())
    warming = Warming.from_json({wire: value for wire, (_, value) in WARMING.items()})
    assert all(getattr(warming, attr) == value for attr, value in WARMING.values())
    error = parse_event("error", {wire: value for wire, (_, value) in ERROR.items()})
    assert all(getattr(error, attr) == value for attr, value in ERROR.values())
    assert error.exception().request_id == "r-1"  # type: ignore[union-attr]
    answer = ReadAnswer.from_json({"results": [HIT_JSON], "strategy": "hybrid", "diagnostics": {"a": 1},
                                   "warming": {"queued": 1, "message": "m"}, "nextCursor": "cur"})
    assert (answer.results[0].id, answer.strategy, answer.warming.queued, answer.diagnostics, answer.next_cursor) == (
        "x", "hybrid", 1, {"a": 1}, "cur")
    sse = doc["paths"]["/v1/read"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    names = {n for alt in sse["itemSchema"]["oneOf"] for n in alt["properties"]["event"].get("enum", [])}
    names |= {alt["properties"]["event"]["const"] for alt in sse["itemSchema"]["oneOf"]
              if "const" in alt["properties"]["event"]}
    assert names == {"lexical", "semantic", "rerank", "warming", "done", "error"}
    # every event the server declares is one the SDK types (an unknown name parses to None)
    ranking = {"results": [HIT_JSON], "strategy": "hybrid", "diagnostics": {"rerank": {"status": "reranked"}},
               "warming": {"queued": 0, "message": "m"}, "nextCursor": None}
    data = {"warming": {"queued": 0, "message": "m"}, "error": {"code": "internal_error", "message": "m"}}
    parsed = {n: parse_event(n, data.get(n, ranking)) for n in names}
    assert all(e is not None and e.event == n for n, e in parsed.items()), parsed
    rerank = parsed["rerank"]
    assert isinstance(rerank, Rerank) and rerank.answer.diagnostics["rerank"]["status"] == "reranked"


# -- bulk ------------------------------------------------------------------------------------

def test_bulk_batches_and_reports_progress(admin: Client) -> None:
    docs: list[dict[str, Any]] = [{"_id": f"b{i}", "title": f"bulk item {i}", "body": "bulkword"} for i in range(25)]
    docs.insert(7, {"title": "no id"})  # a bad document does not sink the others
    seen: list[tuple[int, int]] = []
    out = admin.bulk("bulk", docs, batch_size=10, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(10, 26), (20, 26), (26, 26)]
    assert out.accepted == 25 and out.rejected == 1 and out.errors and len(out.results) == 26
    assert out.failed[0]["error"]["code"] == "invalid_params"
    assert admin.get("bulk", "b24")["title"] == "bulk item 24"


# -- admin -----------------------------------------------------------------------------------

def test_admin_calls(admin: Client, loaded: str) -> None:
    assert admin.coverage(loaded).total >= 4
    assert admin.status(loaded, "d3").status
    promoted = admin.promote(loaded)
    assert promoted.mode == "eager" and isinstance(promoted.task, Backfill) and promoted.task.collection == loaded
    assert any(c.collection == loaded and c.state == "eager" for c in admin.promotions().collections)
    assert admin.demote(loaded).mode == "lazy"
    assert admin.reindex(loaded).collection == loaded
    assert admin.queue_depth().total >= 0 and admin.lag().queued >= 0
    assert admin.spaces().spaces[0].state == "active"
    sched = admin.scheduler()
    assert sched.interval_seconds > 0 and sched.policy.cold_codec in ("float16", "int8")
    assert isinstance(admin.status(loaded, "d3").lifecycle.eager, bool)
    assert admin.usage(loaded).collection == loaded
    assert admin.evict(loaded, idle_seconds=3600).collection == loaded
    assert admin.mismatch().missing_vectors == 0
    assert isinstance(admin.backfills().backfills, list) and isinstance(admin.dead_letters().dead_letters, list)
    # GET /semantic/touch: the page's parameters reach the server (a bad one is refused by name)
    touch = admin.touch(limit=5)
    assert touch.follow_up in ("auto", True, False) and len(touch.collections) <= 5
    assert admin.touch(after="zzzz").collections == []  # nothing sorts after it
    with pytest.raises(InvalidParams, match="after"):
        admin.touch(after="not a name!")
    with pytest.raises(InvalidParams, match="limit"):
        admin.touch(limit=0)
    active = admin.spaces().spaces[0].space
    with pytest.raises(Conflict):
        admin.create_space(active, "hash:v1@64")  # already the active space
    with pytest.raises(InvalidParams, match="scope"):  # the scope is sent (else this started a migration)
        admin.create_space("sdk-v2", "hash:v1@64", scope="some")
    assert "sdk-v2" not in {s.space for s in admin.spaces().spaces}
    with pytest.raises(NotFound):
        admin.activate_space("no-such-space")
    assert admin.health().status == "ok"


def test_admin_answers_are_typed_with_their_fields_filled(admin: Client, loaded: str) -> None:
    """The typed answers hold the served values (not the zero a missing field would give)."""
    admin.read(loaded, "launch", strategy="hybrid")  # a read touches documents: some are embedded
    coverage = admin.coverage(loaded)
    assert isinstance(coverage, Coverage) and coverage.collection == loaded and coverage.total == 4
    assert coverage.space and sum(coverage.states.values()) == coverage.total
    assert 0 <= coverage.indexed_pct <= 100 and coverage.ready == coverage.states.get("ready", 0)
    usage = admin.usage(loaded, days=3)
    assert isinstance(usage, Usage) and usage.model and usage.currency and usage.price_per_million_tokens >= 0
    assert isinstance(usage.today, UsageToday) and usage.today.day and len(usage.days) <= 3
    assert all(isinstance(d, UsageDay) and d.day for d in usage.days)
    spaces = admin.spaces()
    assert isinstance(spaces, Spaces) and all(isinstance(s, Space) for s in spaces.spaces)
    active = next(s for s in spaces.spaces if s.state == "active")
    assert active.model and active.dim > 0 and active.space == coverage.space
    keys = admin.list_keys()
    assert isinstance(keys, Keys) and keys.keys and all(isinstance(k, KeyView) for k in keys.keys)
    boot = next(k for k in keys.keys if k.bootstrap)
    assert boot.id and boot.name and boot.scopes and isinstance(boot.principals, list)
    # the wire JSON stays readable by its name (what these calls returned before they were typed)
    assert coverage["indexedPct"] == coverage.indexed_pct and "states" in coverage and coverage.get("nope") is None


# Each typed answer is the OpenAPI schema it mirrors, property for property: a field the server
# adds (or renames) fails here until the SDK's model has it, as the TypeScript types would.
ANSWER_MODELS = [m for m in vars(answers).values()
                 if isinstance(m, type) and issubclass(m, answers.Model) and m is not answers.Model]


def test_answer_models_cover_the_openapi_document(spec: OpenApiResponses) -> None:
    schemas = spec.doc()["components"]["schemas"]
    mirrored = [m for m in ANSWER_MODELS if answers.schema_name(m)]
    assert len(mirrored) >= 40, [m.__name__ for m in mirrored]
    for model in mirrored:
        name = answers.schema_name(model)
        assert name in schemas, f"{model.__name__}: no schema {name}"
        assert answers.wire_names(model) == set(schemas[name]["properties"]), model.__name__


# -- async parity ----------------------------------------------------------------------------

def test_async_client_parity(admin: Client, base_url: str, loaded: str, spec: OpenApiResponses) -> None:
    sync_answer = admin.read(loaded, "launch quarter", strategy="keyword")

    async def check(response: httpx.Response) -> None:
        await response.aread()
        spec.check(response)

    async def run() -> dict[str, Any]:
        progress: list[tuple[int, int]] = []
        http = httpx.AsyncClient(timeout=60, event_hooks={"response": [check]})
        async with http, AsyncClient(base_url, ADMIN, http_client=http) as a:
            answer = await a.read(loaded, "launch quarter", strategy="keyword")
            events = [e async for e in a.read_once(loaded, "launch quarter", strategy="hybrid")]
            put = await a.put("async", "x1", {"title": "async doc"})
            got = await a.get("async", "x1", include_semantic=True)
            bulk = await a.bulk("async", [{"_id": f"y{i}"} for i in range(3)], batch_size=2,
                                progress=lambda d, t: progress.append((d, t)))
            coverage = await a.coverage("async")
            with pytest.raises(NotFound):
                await a.get("async", "nope")
            deleted = await a.delete("async", "x1")
        async with AsyncClient(base_url, ALICE) as alice:
            with pytest.raises(Forbidden):
                await alice.lag()
        return {"answer": answer, "events": events, "put": put, "got": got, "bulk": bulk, "progress": progress,
                "coverage": coverage, "deleted": deleted}

    out = asyncio.run(run())
    assert out["answer"].ids == sync_answer.ids
    names = [e.event for e in out["events"]]
    assert names[0] == "lexical" and names[-1] == "done"
    assert out["put"]["result"] == "created" and out["got"]["__semantic"]["status"]
    assert out["bulk"].accepted == 3 and out["progress"] == [(2, 3), (3, 3)]
    assert out["coverage"]["total"] == 4 and out["deleted"]["result"] == "deleted"


# -- retries, against a stand-in --------------------------------------------------------------

class StandIn:
    """A local HTTP server that answers each path from a script: a list of (status, headers,
    body) used in turn, the last one repeated. Counts the requests it saw per path."""

    def __init__(self) -> None:
        self.script: dict[str, list[tuple[int, dict[str, str], Any]]] = {}
        self.hits: dict[str, int] = {}
        self.delay = 0.0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                path = self.path.split("?")[0]
                n = stand_in.hits.get(path, 0)
                stand_in.hits[path] = n + 1
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                steps = stand_in.script.get(path) or [(404, {}, {"error": {"code": "not_found", "message": "no"}})]
                status, headers, body = steps[min(n, len(steps) - 1)]
                if stand_in.delay:
                    threading.Event().wait(stand_in.delay)
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


LIMITED = (429, {"Retry-After": "1"}, {"error": {"code": "rate_limited", "message": "slow down"}})
ANSWER = {"results": [{"id": "r1", "collection": "c", "score": 1.0, "matchedBy": ["keyword"], "explainId": "e"}],
          "strategy": "keyword", "warming": {"queued": 0, "message": "Nothing to warm up"}, "diagnostics": {}}
SSE_BODY = ("event: lexical\nid: 1\ndata: " + json.dumps(ANSWER) + "\n\n: heartbeat\n\n"
            "event: done\nid: 2\ndata: " + json.dumps(ANSWER) + "\n\n")


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.close()


def _client(stand_in: StandIn, waits: list[tuple[int, float, str]], **kw: Any) -> Client:
    return Client(stand_in.base, "k", backoff=0.01, on_retry=lambda a, w, r: waits.append((a, w, r)), **kw)


def test_idempotent_calls_retry_a_429_after_retry_after(stand_in: StandIn) -> None:
    stand_in.script = {"/v1/collections/c/docs/d": [LIMITED, (200, {}, {"_id": "d", "title": "t"})],
                       "/v1/read": [LIMITED, (200, {}, ANSWER)]}
    waits: list[tuple[int, float, str]] = []
    with _client(stand_in, waits) as c:
        assert c.get("c", "d")["title"] == "t"
        assert c.read("c", "q").ids == ["r1"]  # POST /v1/read is safe to repeat
    assert stand_in.hits == {"/v1/collections/c/docs/d": 2, "/v1/read": 2}
    assert [(a, r) for a, _, r in waits] == [(1, "HTTP 429"), (1, "HTTP 429")]
    assert all(w >= 1.0 for _, w, _ in waits)  # Retry-After is a floor, not a hint


def test_stream_retries_before_it_starts(stand_in: StandIn) -> None:
    stand_in.script = {"/v1/read": [(503, {"Retry-After": "0"}, {"error": {"code": "embedder_unavailable",
                                                                           "message": "later"}}),
                                    (200, {"Content-Type": "text/event-stream"}, SSE_BODY)]}
    waits: list[tuple[int, float, str]] = []
    with _client(stand_in, waits) as c:
        events = list(c.read_once("c", "q"))
    assert [(e.event, e.id) for e in events] == [("lexical", "1"), ("done", "2")]
    assert stand_in.hits["/v1/read"] == 2 and len(waits) == 1


def test_stream_error_event_cut_body_and_wrong_type(stand_in: StandIn) -> None:
    sse = {"Content-Type": "text/event-stream"}
    lexical = "event: lexical\ndata: " + json.dumps(ANSWER) + "\n\n"
    stand_in.script = {"/v1/read": [
        (200, sse, lexical + "event: shiny-new\ndata: {}\n\n"
                   'event: error\ndata: {"code": "embedder_unavailable", "message": "provider down"}\n\n'),
        (200, sse, lexical),  # the body ends without done
        (200, {}, ANSWER),  # JSON where a stream was asked for
    ]}
    with Client(stand_in.base, "k") as c:
        events = list(c.read_once("c", "q"))
        assert [e.event for e in events] == ["lexical", "error"]  # an unknown event is skipped
        err = events[-1]
        assert isinstance(err, Error) and isinstance(err.exception(), EmbedderUnavailable)
        assert err.exception().message == "provider down" and err.results == []
        stand_in.hits.clear()  # the same stream again: `final()` raises its error event as the typed error
        with pytest.raises(EmbedderUnavailable, match="provider down"):
            c.read_once("c", "q").final()
        with pytest.raises(TransportError, match="before its done"):
            list(c.read_once("c", "q"))
        with pytest.raises(TransportError):
            list(c.read_once("c", "q"))


def test_async_client_retries_like_the_sync_one(stand_in: StandIn) -> None:
    stand_in.script = {"/v1/read": [LIMITED, (200, {}, ANSWER)], "/semantic/evict": [LIMITED]}
    waits: list[float] = []

    async def run() -> list[str]:
        async with AsyncClient(stand_in.base, "k", backoff=0.01, on_retry=lambda a, w, r: waits.append(w)) as c:
            answer = await c.read("c", "q")
            with pytest.raises(RateLimited):
                await c.evict("c")
            return answer.ids

    assert asyncio.run(run()) == ["r1"]
    assert stand_in.hits == {"/v1/read": 2, "/semantic/evict": 1} and len(waits) == 1 and waits[0] >= 1.0


def test_non_idempotent_post_is_never_retried(stand_in: StandIn) -> None:
    stand_in.script = {"/semantic/promote": [LIMITED, (200, {}, {"mode": "eager"})],
                       "/semantic/reindex": [(503, {}, {"error": {"code": "embedder_unavailable", "message": "x"}})]}
    waits: list[tuple[int, float, str]] = []
    with _client(stand_in, waits) as c:
        with pytest.raises(RateLimited) as e:
            c.promote("c")
        with pytest.raises(EmbedderUnavailable):
            c.reindex("c")
    assert e.value.retry_after == 1.0 and e.value.status == 429
    assert stand_in.hits == {"/semantic/promote": 1, "/semantic/reindex": 1} and waits == []


def test_retries_give_up_with_the_typed_error(stand_in: StandIn) -> None:
    stand_in.script = {"/v1/read": [(429, {"Retry-After": "0"}, {"error": {"code": "rate_limited", "message": "x"}})],
                       "/healthz": [(503, {}, "<html>bad gateway</html>")],
                       "/semantic/lag": [(429, {"Retry-After": "3600"}, {"error": {"code": "rate_limited",
                                                                                   "message": "tomorrow"}})]}
    waits: list[tuple[int, float, str]] = []
    with _client(stand_in, waits, retries=2) as c:
        with pytest.raises(RateLimited):
            c.read("c", "q")
        with pytest.raises(ServiceUnavailable):  # no error body: typed by status
            c.health()
        with pytest.raises(RateLimited) as e:  # a wait longer than max_retry_after is the caller's call
            c.lag()
    assert stand_in.hits == {"/v1/read": 3, "/healthz": 3, "/semantic/lag": 1}
    assert e.value.retry_after == 3600
    with Client(stand_in.base, "k", retries=0) as c, pytest.raises(RateLimited):
        c.read("c", "q")
    assert stand_in.hits["/v1/read"] == 4


def test_transport_errors_and_timeouts_are_typed(stand_in: StandIn) -> None:
    waits: list[tuple[int, float, str]] = []
    with Client(f"http://127.0.0.1:{free_port()}", "k", retries=2, backoff=0.01,
                on_retry=lambda a, w, r: waits.append((a, w, r))) as c, pytest.raises(TransportError):
        c.promote("c")  # refused: nothing was sent, so even a POST may be tried again
    assert [r for _, _, r in waits] == ["ConnectError", "ConnectError"]
    stand_in.script = {"/semantic/promote": [(200, {}, {"mode": "eager"})]}
    stand_in.delay = 2.0
    with Client(stand_in.base, "k", timeout=0.2, retries=3) as c, pytest.raises(Timeout):
        c.promote("c")  # the server may have acted: not repeated
    assert stand_in.hits["/semantic/promote"] == 1


# -- packaging -------------------------------------------------------------------------------

def test_package_installs_alone(tmp_path: Path) -> None:
    """`pip install ./sdk/python` on its own (no repository code) gives an importable, typed package."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "sdk" / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, timeout=240)
    assert (target / "vibe_semantic_client" / "py.typed").exists()
    code = ("import vibe_semantic_client as v; from vibe_semantic_client import Client, AsyncClient, VibeError; "
            "print(v.__file__)")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip().startswith(str(target)), out.stdout


def test_readme_example_runs(base_url: str) -> None:
    """The Python example of docs/clients.md (the README's quick start links it), as written, against
    the served app."""
    readme = (REPO / "docs" / "clients.md").read_text()
    block = readme.split("## Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = block.replace("http://127.0.0.1:8080", base_url)
    printed: list[str] = []
    exec(compile(code, "docs/clients.md", "exec"),
         {"KEY": ADMIN, "print": lambda *a: printed.append(" ".join(map(str, a)))})
    assert any(line.startswith("lexical") for line in printed) and "998/998" in printed


def test_readme_quickstart_runs(base_url: str) -> None:
    """The README's Python quick start (put, read, the streaming read), as written, against the served app."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("**Python**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    printed: list[str] = []
    code = block.replace("http://127.0.0.1:8080", base_url).replace('"notes"', '"quickstart"')  # its own collection
    exec(compile(code, "README.md", "exec"),
         {"KEY": ADMIN, "print": lambda *a: printed.append(" ".join(map(str, a)))})
    assert "n1" in printed[0] and any(line.startswith("lexical") for line in printed), printed
    assert printed[-1].startswith("done"), printed


def test_an_explanation_carries_what_rerank_did() -> None:
    base = {"id": "1", "collection": "kb", "strategy": "keyword", "score": 1.0, "fusion": "none", "shownScore": 1.0,
            "weights": {"keyword": 1.0}, "contributions": [], "reasons": [], "expiresAt": 1.0}
    assert answers.Explanation.from_json(base).rerank is None
    got = answers.Explanation.from_json({**base, "rerank": {"fusedRank": 2, "rank": 1, "score": 0.5}}).rerank
    assert got == answers.RerankContribution.from_json({"fusedRank": 2, "rank": 1, "score": 0.5})
    assert got is not None and (got.fused_rank, got.rank, got.score) == (2, 1, 0.5)
