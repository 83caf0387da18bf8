"""The service over a real socket with its keyword leg on a real OpenSearch node
(`VIBE_LEXICAL=opensearch`): documents in, keyword and hybrid reads as JSON and SSE, ACLs,
deletes; then faults: the node away (writes still accepted and durable, reads a clear 503, the
index catching up from the store's change log once the node is back) and a change the engine
refuses (quarantined, listed, nothing lost).

Each test keeps to its own index prefix (`VIBE_OPENSEARCH_PREFIX`) and deletes it afterwards;
the fault test stops and restarts a node of its own, never the session's.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from harness.opensearch_server import opensearch_node
from harness.server import Served, ids, served


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    name = f"vibe-app-{uuid.uuid4().hex[:10]}-"
    yield name
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    client.indices.delete(index=name + "*", ignore_unavailable=True, allow_no_indices=True)
    client.indices.delete_index_template(name=name + "template", ignore=[404])
    client.close()


def _env(url: str, prefix: str) -> dict[str, str]:
    return {"VIBE_LEXICAL": "opensearch", "VIBE_OPENSEARCH_URL": url, "VIBE_OPENSEARCH_PREFIX": prefix}


def _keyword(s: Served, key: str, q: str, strategy: str = "keyword", **kw: Any) -> dict[str, Any]:
    r = s.read(key, collection="c", q=q, semantic={"strategy": strategy}, **kw)
    assert r.status_code == 200, r.text
    return dict(r.json())


DOCS: dict[str, dict[str, Any]] = {
    "pub": {"title": "Rotor icing", "body": "icing on the rotor blades <script>alert(1)</script> & more"},
    "eng": {"title": "Rotor icing tests", "body": "engineering notes on icing", "_acl": ["group:eng"]},
    "bob": {"title": "Rotor icing budget", "body": "sales figures for icing kits", "_acl": ["user:bob"]},
}


def test_the_service_answers_from_opensearch(opensearch_url: str, prefix: str, tmp_path: Path) -> None:
    with served(tmp_path / "data", env=_env(opensearch_url, prefix)) as s:
        for doc_id, body in DOCS.items():
            assert s.put("k-alice", "c", doc_id, body).status_code == 201
        r = s.bulk("k-alice", "c", [{"_id": f"b{i}", "title": f"Wing report {i}", "body": "flutter of the wing"}
                                    for i in range(5)])
        assert r.status_code == 200, r.text
        assert s.put("k-admin-b", "c", "other", {"title": "Rotor icing elsewhere"}).status_code == 201

        alice = _keyword(s, "k-alice", "icing", include={"highlights": True})
        assert set(ids(alice["results"])) == {"pub", "eng"}  # not bob's, not tenant tb's
        assert all(r["matchedBy"] == ["keyword"] for r in alice["results"])
        snippets = " ".join(h for r in alice["results"] for h in r.get("highlights", []))
        assert "<b>icing</b>" in snippets.lower() and "<script>" not in snippets and "&lt;script&gt;" in snippets
        assert set(ids(_keyword(s, "k-bob", "icing")["results"])) == {"pub", "bob"}
        assert set(ids(_keyword(s, "k-admin-b", "icing")["results"])) == {"other"}
        assert set(ids(_keyword(s, "k-alice", "flutter")["results"])) == {f"b{i}" for i in range(5)}
        hybrid = _keyword(s, "k-alice", "rotor icing", strategy="hybrid")
        assert set(ids(hybrid["results"])) >= {"pub", "eng"} and "bob" not in ids(hybrid["results"])

        events = s.stream("k-bob", collection="c", q="icing", semantic={"strategy": "keyword"})
        names = [e for e, _ in events]
        assert names[0] == "lexical" and names[-1] == "done"
        for _, data in events:
            assert "eng" not in ids(data.get("results"))
        assert set(ids(events[-1][1]["results"])) == {"pub", "bob"}

        assert s.call("DELETE", "/v1/collections/c/docs/eng", "k-alice").status_code in (200, 204)
        assert set(ids(_keyword(s, "k-alice", "icing")["results"])) == {"pub"}
        s.put("k-alice", "c", "bob", {**DOCS["bob"], "_acl": ["user:bob"]})  # refused: alice cannot read it
        assert set(ids(_keyword(s, "k-bob", "icing")["results"])) == {"pub", "bob"}


def test_opensearch_away_then_back(tmp_path: Path) -> None:
    """The node hangs (SIGSTOP): a read answers 503 `index_unavailable` once its search times
    out, not after retries. The node is killed: writes are still accepted and durable in the
    store of record, reads answer 503 `index_unavailable` (JSON, and the stream too), never a
    stack trace. Restarted on its data, the index catches up from the change log: the write made
    meanwhile is found, the delete made meanwhile is gone."""
    with opensearch_node(tmp_path / "os") as node, \
            served(tmp_path / "data", env=_env(node.url, "vibe-lex-")) as s:
        assert s.put("k-alice", "c", "a", {"title": "Rotor icing", "body": "first"}).status_code == 201
        assert ids(_keyword(s, "k-alice", "icing")["results"]) == ["a"]

        assert node.proc is not None
        node.proc.send_signal(signal.SIGSTOP)
        try:
            r = s.read("k-alice", collection="c", q="icing", semantic={"strategy": "keyword"})
            assert r.status_code == 503 and r.json()["error"]["code"] == "index_unavailable", r.text
        finally:
            node.proc.send_signal(signal.SIGCONT)
        assert ids(_keyword(s, "k-alice", "icing")["results"]) == ["a"]

        node.stop(signal.SIGKILL)
        r = s.put("k-alice", "c", "b", {"title": "Rotor icing", "body": "written while the index was away"})
        assert r.status_code == 201, r.text
        assert s.call("DELETE", "/v1/collections/c/docs/a", "k-alice").status_code in (200, 204)
        got = s.call("GET", "/v1/collections/c/docs/b", "k-alice")
        assert got.status_code == 200 and got.json()["body"] == "written while the index was away"
        r = s.read("k-alice", collection="c", q="icing", semantic={"strategy": "keyword"})
        assert r.status_code == 503 and r.json()["error"]["code"] == "index_unavailable", r.text
        assert "Traceback" not in r.text
        stream = s.client.post("/v1/read", json={"collection": "c", "q": "icing"},
                               headers={"Authorization": "Bearer k-alice", "Accept": "text/event-stream"})
        assert stream.status_code == 503 or "index_unavailable" in stream.text, stream.text

        node.start()
        assert ids(_keyword(s, "k-alice", "icing")["results"]) == ["b"]

    with served(tmp_path / "data") as again:  # the store of record had every write all along
        assert again.call("GET", "/v1/collections/c/docs/b", "k-alice").status_code == 200
        assert again.call("GET", "/v1/collections/c/docs/a", "k-alice").status_code == 404


def test_a_change_opensearch_refuses_is_listed_and_nothing_is_lost(opensearch_url: str, prefix: str,
                                                                  tmp_path: Path) -> None:
    """Tenant ta's index has a conflicting mapping (made by hand: `doc_id` a number), so the
    engine refuses ta's document `x` for good: the write is accepted (the store of record has
    it, GET answers it), the change is a dead letter of ta with the engine's reason, the other
    documents stay searchable, and tenant tb is untouched."""
    with served(tmp_path / "data", env=_env(opensearch_url, prefix)) as s:
        assert s.put("k-admin-b", "c", "first", {"title": "Rotor icing"}).status_code == 201  # template in place
        client = OpenSearch(hosts=[opensearch_url], timeout=30)
        from shared.adapters.opensearch_lexical import index_name

        client.indices.create(index=index_name("ta", prefix), body={
            "mappings": {"properties": {"doc_id": {"type": "long"}}}})
        client.close()
        r = s.bulk("k-alice", "c", [{"_id": "1", "title": "Rotor icing one"}, {"_id": "x", "title": "Rotor icing x"},
                                    {"_id": "2", "title": "Rotor icing two"}])
        assert r.status_code == 200, r.text
        assert s.call("GET", "/v1/collections/c/docs/x", "k-alice").status_code == 200
        assert set(ids(_keyword(s, "k-alice", "icing")["results"])) == {"1", "2"}
        letters = s.call("GET", "/semantic/deadLetters", "k-admin-a").json()["deadLetters"]
        assert [(d["doc_id"], d["op"]) for d in letters] == [("x", "doc")]
        assert "mapper_parsing_exception" in str(letters[0])
        assert s.call("GET", "/semantic/deadLetters", "k-admin-b").json()["deadLetters"] == []
        assert set(ids(_keyword(s, "k-admin-b", "icing")["results"])) == {"first"}
