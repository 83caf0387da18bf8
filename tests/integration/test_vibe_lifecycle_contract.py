"""A client and operator following the Vibe spec to the letter, over HTTP against a served app.

- Collection promotion fires on at least X queries OR at least Y hits within the window: by
  queries alone, by hits alone, and the reason says which fired.
- `contentHash` is `sha256:<hex>` of the normalised text wherever a client reads one
  (GET /semantic/status, and its pending job `{docId, space, contentHash}`); a client may send
  back either `sha256:` or the store's own `blake3:`; rewriting the same text changes no hash
  and makes no provider call.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from tests.integration.distributed.conftest import wait_for

ADMIN = "k-admin-a"
MIN_QUERIES, MIN_HITS = 5, 6
SHA = re.compile(r"sha256:[0-9a-f]{64}")


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


@pytest.fixture(scope="module")
def app(api: OpenAIProtocolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_SCHEDULER_INTERVAL_SECONDS": "0.5", "VIBE_USAGE_FLUSH_SECONDS": "0.2",
           "VIBE_PROMOTE_MIN_QUERIES": str(MIN_QUERIES), "VIBE_PROMOTE_MIN_HITS": str(MIN_HITS),
           "VIBE_PER_TENANT_PER_MIN": "100000"}
    with served(Path(tmp_path_factory.mktemp("seed003")) / "data", env=env) as s:
        yield s


def _normalized(text: str) -> str:
    """The normalisation as the spec's clients implement it: NFKC, lowercase, zero-width and
    control characters dropped, whitespace runs to one space, trimmed."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(ch for ch in t if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf"))
    return " ".join(t.split())


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(_normalized(text).encode()).hexdigest()


def _modes(app: Served) -> dict[str, dict[str, Any]]:
    body = app.call("GET", "/semantic/promotions", ADMIN).json()
    return {m["collection"]: m for m in body["collections"]}


def _docs(n: int) -> list[dict[str, Any]]:
    return [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"gust loads on wing {i}"} for i in range(n)]


def test_queries_alone_promote(app: Served) -> None:
    assert app.bulk(ADMIN, "byq", _docs(4)).status_code == 200
    for _ in range(MIN_QUERIES):  # nothing matches: no hits at all
        r = app.read(ADMIN, collection="byq", q="zeppelin", semantic={"strategy": "keyword"})
        assert r.status_code == 200 and r.json()["results"] == []
    wait_for(lambda: _modes(app).get("byq", {}).get("state") == "eager", 30, "promotion of `byq` by queries")
    mode = _modes(app)["byq"]
    assert mode["figures"]["fired"] == ["queries"] and mode["figures"]["hits"] == 0
    assert mode["reason"].startswith("auto: ") and "queries" in mode["reason"] and "hits" not in mode["reason"]


def test_hits_alone_promote(app: Served) -> None:
    assert app.bulk(ADMIN, "byh", _docs(MIN_HITS + 2)).status_code == 200
    r = app.read(ADMIN, collection="byh", q="flutter report", semantic={"strategy": "keyword"}, limit=20)
    assert len(r.json()["results"]) >= MIN_HITS  # one query, enough first-page hits
    wait_for(lambda: _modes(app).get("byh", {}).get("state") == "eager", 30, "promotion of `byh` by hits")
    mode = _modes(app)["byh"]
    assert mode["figures"]["fired"] == ["hits"] and mode["figures"]["queries"] == 1
    assert "hits" in mode["reason"] and "queries" not in mode["reason"]


def test_below_both_thresholds_stays_lazy(app: Served) -> None:
    assert app.bulk(ADMIN, "calm", _docs(3)).status_code == 200
    app.read(ADMIN, collection="calm", q="flutter report", semantic={"strategy": "keyword"})  # 1 query, 3 hits
    def last_tick() -> object:
        return app.call("GET", "/semantic/scheduler", ADMIN).json().get("lastTickAt")

    for _ in range(3):  # usage is flushed every 0.2 s and the scheduler ticks every 0.5 s
        tick = last_tick()
        wait_for(lambda: last_tick() != tick, 30, "a scheduler tick")  # noqa: B023 - waited for at once
    assert _modes(app).get("calm", {}).get("state", "lazy") == "lazy"


def _status(app: Served, collection: str, doc_id: str, **extra: str) -> dict[str, Any]:
    q = "&".join(f"{k}={v}" for k, v in {"collection": collection, "_id": doc_id, **extra}.items())
    r = app.call("GET", f"/semantic/status?{q}", ADMIN)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_content_hash_is_sha256_and_either_scheme_is_accepted(app: Served) -> None:
    doc = {"title": "Ｇust  Loads", "body": "Wing\u200b flutter\n\nreport."}
    assert app.put(ADMIN, "hashes", "h1", doc).status_code in (200, 201)
    st = _status(app, "hashes", "h1")
    text = "Ｇust  Loads\nWing\u200b flutter\n\nreport."  # title first, then the other fields by name
    assert SHA.fullmatch(st["contentHash"]) and st["contentHash"] == _sha(text)
    assert {"status", "lastEmbeddedAt", "space"} <= set(st)
    b3 = "blake3:" + blake3.blake3(_normalized(text).encode()).hexdigest()
    for given in (st["contentHash"], b3, st["contentHash"].upper().replace("SHA256", "sha256")):
        assert _status(app, "hashes", "h1", contentHash=given)["contentMatches"] is True
    assert _status(app, "hashes", "h1", contentHash=_sha("other text"))["contentMatches"] is False
    for bad in ("md5:abc", "sha256:xyz", "0" * 64):
        r = app.call("GET", f"/semantic/status?collection=hashes&_id=h1&contentHash={bad}", ADMIN)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params"


def test_the_pending_job_is_keyed_by_doc_space_and_content_hash(app: Served, api: OpenAIProtocolServer) -> None:
    assert app.call("POST", "/semantic/promote", ADMIN, {"collection": "jobs"}).status_code == 200
    api.hang(4)  # the provider is slow: the write's embedding job stays pending meanwhile
    try:
        assert app.put(ADMIN, "jobs", "j1", {"title": "Queued flutter report"}).status_code in (200, 201)
        st = _status(app, "jobs", "j1")
        assert st["status"] == "queued", st
        assert st["job"] == {"docId": "j1", "space": st["space"], "contentHash": st["contentHash"]}
        assert st["contentHash"] == _sha("Queued flutter report")
    finally:
        api.clear()
    assert app.wait_status(ADMIN, "jobs", "j1", "ready", timeout=30) == "ready"
    assert "job" not in _status(app, "jobs", "j1")  # nothing pending once it is embedded


def test_rewriting_the_same_text_keeps_the_hash_and_calls_no_provider(app: Served,
                                                                      api: OpenAIProtocolServer) -> None:
    assert app.call("POST", "/semantic/promote", ADMIN, {"collection": "same"}).status_code == 200
    assert app.put(ADMIN, "same", "s1", {"title": "Gust loads", "body": "Wing flutter report."}).status_code in (
        200, 201)
    assert app.wait_status(ADMIN, "same", "s1", "ready", timeout=30) == "ready"
    before, calls = _status(app, "same", "s1"), api.requests
    # the same text as normalised: other case, spacing and a zero-width space
    assert app.put(ADMIN, "same", "s1", {"title": "GUST  loads", "body": "Wing\u200b flutter   report."}
                   ).status_code in (200, 201)
    after = _status(app, "same", "s1")
    assert after["contentHash"] == before["contentHash"] and after["status"] == "ready"
    assert after["lastEmbeddedAt"] == before["lastEmbeddedAt"] and api.requests == calls
