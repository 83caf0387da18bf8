"""What a read may reveal: keyword scores that do not count the
documents a caller cannot read, and more-like-this that never sends a document's fields to the
provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import Served, served
from tests.integration.distributed.conftest import RecordingProvider

# Every document has exactly eight tokens, so BM25's length normalisation (the tenant's
# average document length) is the same before and after the unreadable ones are added.
A = "zeppelin alpha bravo charlie delta echo foxtrot golf"
B = "zeppelin zeppelin alpha bravo charlie delta echo foxtrot"
HIDDEN = "zeppelin hotel india juliet kilo lima mike november"


def _keyword_scores(app: Served) -> dict[str, float]:
    out = app.read("k-alice", collection="stat", q="zeppelin", semantic={"strategy": "keyword"}).json()
    return {r["id"]: r["score"] for r in out["results"]}


def test_keyword_scores_do_not_count_documents_the_caller_cannot_read(tmp_path: Path) -> None:
    with served(tmp_path / "data") as app:
        for i, body in (("a", A), ("b", B)):
            assert app.put("k-alice", "stat", i, {"body": body, "_acl": ["user:alice"]}).status_code == 201
        before = _keyword_scores(app)
        hidden = [{"_id": f"h{i}", "body": HIDDEN, "_acl": ["user:admin"]} for i in range(40)]
        assert app.bulk("k-admin-a", "stat", hidden).status_code == 200
        after = _keyword_scores(app)
        assert set(before) == set(after) == {"a", "b"}
        assert after == before  # raw BM25 would fall as the 40 hidden documents lower the IDF
        assert max(after.values()) == 1.0


@pytest.fixture
def provider() -> Iterator[RecordingProvider]:
    with RecordingProvider(dim=32) as p:
        yield p


def test_more_like_this_never_sends_a_documents_fields_to_the_provider(
        provider: RecordingProvider, tmp_path: Path) -> None:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": provider.base_url, "VIBE_EMBED_MODEL": "m"}
    with served(tmp_path / "data", env=env) as app:
        secret = {"title": "Zanzibar memo", "body": "SECRETWORD launch codes for the wing flutter programme",
                  "_vibe": {"semantic": {"intent": "deny"}}}
        assert app.put("k-admin-a", "mlt", "secret", secret).status_code == 201
        opened = app.put("k-admin-a", "mlt", "open", {"title": "Wing flutter", "body": "flutter margins"})
        assert opened.status_code == 201
        # a second open document: the source is never its own result (services/planner/similar.py)
        second = app.put("k-admin-a", "mlt", "open2", {"title": "Wing flutter", "body": "flutter tests"})
        assert second.status_code == 201
        app.read("k-admin-a", collection="mlt", q="wing flutter", semantic={"strategy": "keyword"})
        assert app.wait_status("k-admin-a", "mlt", "open", "ready", timeout=30) == "ready"
        assert app.wait_status("k-admin-a", "mlt", "open2", "ready", timeout=30) == "ready"

        body = {"collection": "mlt", "q": "", "semantic": {"strategy": "semantic",
                                                            "query": {"doc": {"collection": "mlt", "_id": "secret"}}}}
        out = app.call("POST", "/v1/read", "k-admin-a", body, headers={"Accept": "application/json"}).json()
        assert out["diagnostics"]["semantic"]["reason"] == "query_doc_denied"
        body["semantic"]["query"]["doc"]["_id"] = "open"  # type: ignore[index]
        calls = len(provider.embed_calls())
        out = app.call("POST", "/v1/read", "k-admin-a", body, headers={"Accept": "application/json"}).json()
        assert out["diagnostics"]["semantic"]["state"] == "ready" and [r["id"] for r in out["results"]] == ["open2"]
        assert len(provider.embed_calls()) == calls  # the stored vector, no provider call
        sent = " ".join(t for _, texts, _ in provider.calls for t in texts)
        assert "SECRETWORD" not in sent and "Zanzibar" not in sent
