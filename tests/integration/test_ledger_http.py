"""The provider-call ledger over HTTP (GET /semantic/ledger), against a recording provider: the
local OpenAI-protocol stand-in logs every request it receives, and every one of them (the
start-up dimension probes aside: no tenant asked for those) has its ledger rows, one per
document it carried, and no row stands for a request it did not see, over touch, eager,
backfill, a space re-embed, a query, an MCP tool and a failed call. GET /semantic/usage and the
daily cap agree with the ledger's sums; a tenant's admin sees only its rows; bad parameters are
refused with 400 and change nothing."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.server import Served, served
from tests.integration.distributed.conftest import PROBE, RecordingProvider, wait_for
from tests.integration.test_lifecycle_http import metric
from tests.mcp.support import http

MARK = re.compile(r"\bmk[a-z0-9]+\b")
BODY = " about flutter margins, gust loads and the certification of composite wings"


def docs(collection: str, n: int) -> list[dict[str, Any]]:
    return [{"_id": f"d{i}", "title": f"Report {i}", "body": f"mk{collection}d{i}" + BODY, "secret_note": "x"}
            for i in range(n)]


@pytest.fixture(scope="module")
def api() -> Iterator[RecordingProvider]:
    provider = RecordingProvider(dim=32)
    with provider:
        yield provider


@pytest.fixture(scope="module")
def app(api: RecordingProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_SCHEDULER_INTERVAL_SECONDS": "0.5", "VIBE_BACKFILL_INTERVAL_SECONDS": "0.2",
           "VIBE_PER_TENANT_PER_MIN": "100000", "VIBE_JOB_BACKOFF_SECONDS": "0.2",
           "VIBE_EMBED_FIELDS": '{"t1": ["title", "body"]}'}
    with served(Path(tmp_path_factory.mktemp("ledger")) / "data", env=env) as s:
        yield s


def ledger(app: Served, key: str = "k-admin-a", **params: Any) -> list[dict[str, Any]]:
    """Every row, page by page through the cursor (a small page, so paging is exercised)."""
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        q = {"limit": 7, **params, **({"cursor": cursor} if cursor else {})}
        r = app.call("GET", "/semantic/ledger", key, params=q)
        assert r.status_code == 200, r.text
        rows += r.json()["rows"]
        cursor = r.json()["nextCursor"]
        if cursor is None:
            return rows


def seen(api: RecordingProvider) -> list[tuple[float, list[str], int]]:
    return api.embed_calls()


def billed(api: RecordingProvider) -> int:
    """Tokens the provider billed for tenants' calls: all it billed but the start-up probes."""
    return api.billed - sum(api.tokens_of(t) for _, inputs, _ in api.calls if inputs == PROBE for t in inputs)


def as_calls_seen(api: RecordingProvider) -> Counter[tuple[frozenset[str], bool]]:
    """Each request the provider received: the documents it carried (by their markers; none for a
    query) and whether it was answered."""
    return Counter((frozenset(m for t in inputs for m in MARK.findall(t)), status == 200)
                   for _, inputs, status in seen(api))


def as_calls_ledgered(rows: list[dict[str, Any]]) -> Counter[tuple[frozenset[str], bool]]:
    by_call: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_call.setdefault(r["callId"], []).append(r)
    return Counter((frozenset(f"mk{r['collection']}{r['_id']}" for r in mine if r["_id"] is not None),
                    all(r["outcome"] == "ok" for r in mine)) for mine in by_call.values())


def settled(app: Served, api: RecordingProvider) -> list[dict[str, Any]]:
    """The ledger once every request the provider saw has its rows (a row is written right after
    its call answers)."""
    wait_for(lambda: len({r["callId"] for r in ledger(app)}) == len(seen(api)), 60,
             "a ledger row for every provider call")
    return ledger(app)


def ready(app: Served, collection: str, n: int) -> None:
    wait_for(lambda: app.call("GET", f"/semantic/coverage?collection={collection}", "k-admin-a").json()["ready"]
             == n, 90, f"{collection} to be embedded")


def test_every_provider_call_has_its_rows_and_none_without_one(app: Served, api: RecordingProvider) -> None:
    # touch: a read touches what it finds (and embeds its query)
    assert app.bulk("k-admin-a", "t1", docs("t1", 6)).status_code == 200
    app.read("k-admin-a", collection="t1", q="flutter report", semantic={"strategy": "hybrid"}, limit=10)
    ready(app, "t1", 6)
    # eager: a promoted collection embeds on write
    assert app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "e1"}).status_code == 200
    assert app.bulk("k-admin-a", "e1", docs("e1", 4)).status_code == 200
    ready(app, "e1", 4)
    # backfill: a forced reindex
    before = len(seen(api))
    assert app.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "t1", "force": True}).status_code == 202
    wait_for(lambda: sum(len(c[1]) for c in seen(api)[before:]) >= 6, 90, "the forced re-embed")
    # a failed call: the provider answers 500 once, the job retries
    api.fail_next(1, 500)
    assert app.bulk("k-admin-a", "f1", docs("f1", 2)).status_code == 200
    app.read("k-admin-a", collection="f1", q="gust certification", semantic={"strategy": "keyword"}, limit=10)
    ready(app, "f1", 2)
    # a query, and an MCP tool's query
    r = app.read("k-admin-a", collection="t1", q="composite wings margins", semantic={"strategy": "semantic"})
    assert r.status_code == 200
    tool = http(app.base, "k-admin-a")
    try:
        tool.ok("search", {"query": "transonic gust margins", "mode": "semantic", "collection": "t1"})
    finally:
        tool.close()
    # a space re-embed: every document again, into the new space's model
    r = app.call("POST", "/semantic/spaces", "k-admin-a", {"space": "core@v2", "model": "openai:test-embed-v2"})
    assert r.status_code == 202, r.text
    wait_for(lambda: (v2 := {s["space"]: s for s in app.call("GET", "/semantic/spaces", "k-admin-a").json()
                             ["spaces"]}["core@v2"])["migration"]["state"] == "done"
             and v2["coverage"]["ready"] == 12, 90, "the re-embed into core@v2")

    rows = settled(app, api)
    assert as_calls_ledgered(rows) == as_calls_seen(api)
    assert metric(app, "vibe_ledger_rows_written_total") == len(rows)  # one tenant so far
    assert {r["purpose"] for r in rows} == {"touch", "eager", "backfill", "migration", "query", "tool"}, \
        Counter((r["space"], r["purpose"]) for r in rows)
    assert sum(r["tokens"] for r in rows) == billed(api)
    failed = [r for r in rows if r["outcome"] != "ok"]
    assert failed and all(r["tokens"] == 0 and r["outcome"] == "embedder_unavailable" for r in failed)
    queries = [r for r in rows if r["_id"] is None]
    assert queries and all(r["fields"] is None and r["collection"] for r in queries)
    assert {(r["purpose"], r["space"]) for r in queries} == {("query", "core"), ("tool", "core")}
    t1 = [r for r in rows if r["collection"] == "t1" and r["_id"] is not None]
    assert all(r["fields"] == ["title", "body"] for r in t1)  # the allowlisted fields, never secret_note
    e1 = [r for r in rows if r["collection"] == "e1"]  # no allowlist: every field went
    assert e1 and all(r["fields"] == ["title", "body", "secret_note"] for r in e1)
    migrated = [r for r in rows if r["purpose"] == "migration"]
    assert migrated and {(r["space"], r["provider"], r["model"]) for r in migrated} == {
        ("core@v2", "openai", "test-embed-v2")}
    # never text: no row carries any of what was sent
    sent = {t for _, inputs, _ in seen(api) for t in inputs}
    raw = orjson.dumps(rows).decode()
    assert not any(t in raw for t in sent) and "flutter" not in raw


def test_usage_and_the_daily_cap_count_what_the_ledger_holds(app: Served, api: RecordingProvider) -> None:
    rows = settled(app, api)
    usage = app.call("GET", "/semantic/usage", "k-admin-a", params={"days": 30}).json()
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert sum(d["tokens"] for d in usage["days"]) == sum(r["tokens"] for r in rows) > 0
    assert sum(d["calls"] for d in usage["days"]) == len({r["callId"] for r in ok})
    assert sum(d["documents"] for d in usage["days"]) == len([r for r in ok if r["_id"] is not None])
    today = usage["today"]["day"]
    assert usage["today"]["tokens"] == sum(r["tokens"] for r in rows if r["at"].startswith(today))
    one = app.call("GET", "/semantic/usage", "k-admin-a", params={"collection": "e1"}).json()
    assert sum(d["tokens"] for d in one["days"]) == sum(r["tokens"] for r in rows if r["collection"] == "e1")


def test_filters_since_and_ndjson_export(app: Served, api: RecordingProvider) -> None:
    rows = settled(app, api)
    assert ledger(app, collection="e1") == [r for r in rows if r["collection"] == "e1"]
    assert ledger(app, collection="t1", _id="d3") == [r for r in rows if r["collection"] == "t1"
                                                       and r["_id"] == "d3"]
    assert ledger(app, _id="d1") == [r for r in rows if r["_id"] == "d1"]  # in every collection
    assert {r["collection"] for r in ledger(app, _id="d1")} == {"t1", "e1", "f1"}
    stamps = sorted({r["at"] for r in rows})
    middle = stamps[len(stamps) // 2]
    later = [r for r in rows if r["at"] >= middle]
    assert ledger(app, since=middle) == later and 0 < len(later) < len(rows)
    epoch = datetime.fromisoformat(middle).timestamp()
    assert ledger(app, since=f"{epoch:.3f}") == later
    out = app.call("GET", "/semantic/ledger", "k-admin-a", params={"format": "ndjson"})
    assert out.status_code == 200 and out.headers["content-type"].startswith("application/x-ndjson")
    assert [orjson.loads(line) for line in out.text.splitlines()] == rows
    accept = app.call("GET", "/semantic/ledger?collection=e1", "k-admin-a", headers={"Accept": "application/x-ndjson"})
    assert [orjson.loads(line) for line in accept.text.splitlines()] == ledger(app, collection="e1")
    page = app.call("GET", "/semantic/ledger", "k-admin-a", params={"limit": 1}).json()
    assert page["oldestAt"] == rows[0]["at"] and page["retentionDays"] == 90 and page["nextCursor"]


def test_an_admin_sees_only_its_tenants_rows(app: Served, api: RecordingProvider) -> None:
    assert app.bulk("k-admin-b", "t1", docs("t1", 2)).status_code == 200
    app.read("k-admin-b", collection="t1", q="flutter report", semantic={"strategy": "hybrid"}, limit=10)
    wait_for(lambda: len(ledger(app, "k-admin-b")) >= 3, 60, "tenant b's rows")
    mine, theirs = ledger(app, "k-admin-a"), ledger(app, "k-admin-b")
    assert {r["tenant"] for r in mine} == {"ta"} and {r["tenant"] for r in theirs} == {"tb"}
    assert not {r["callId"] for r in mine} & {r["callId"] for r in theirs}
    assert ledger(app, "k-admin-b", collection="e1") == []  # a's collection, from b: nothing
    # a's cursor in b's hands pages b's rows only
    cursor = str(10 ** 6)
    assert app.call("GET", "/semantic/ledger", "k-admin-b", params={"cursor": cursor}).json()["rows"] == []
    assert app.call("GET", "/semantic/ledger", "k-alice").status_code == 403  # not an admin


@pytest.mark.parametrize("params", [
    {"since": "yesterday"}, {"since": "-5"}, {"since": "2026-13-40"}, {"since": "1" * 30}, {"limit": 0},
    {"limit": 1001}, {"limit": "many"}, {"cursor": "abc"}, {"cursor": "9" * 19}, {"_id": ""},
    {"collection": "bad name"}, {"format": "xml"}, {"collection": "t1", "_id": "x" * 300}])
def test_bad_parameters_are_400_and_change_nothing(app: Served, api: RecordingProvider,
                                                   params: dict[str, Any]) -> None:
    before = ledger(app)
    r = app.call("GET", "/semantic/ledger", "k-admin-a", params=params)
    assert r.status_code == 400, (params, r.text)
    assert r.json()["error"]["code"] == "invalid_params"
    assert ledger(app) == before
