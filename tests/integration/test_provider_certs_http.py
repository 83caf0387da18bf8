"""Certificates gate the external provider: a document whose certificates VIBE_PROVIDER_CERTS does
not list for `openai` is never sent to it, whichever path asks for its embedding (a read's touch,
an eager write, a reindex backfill); it stays `deferred` with reason `cert`, and coverage says so.
A policy rule `{"if": {"certs": ...}, "then": {"space": ...}}` routes such documents to a space
with a local model, where they are embedded and read.

The provider is the local OpenAI-protocol stand-in, which records every input it receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import KEYS, Served, ids, served

ADMIN = "k-admin-a"
CERT_KEYS = [{**KEYS[0], "certs": ["hr:confidential", "acme:public", "acme:staff"]}, *KEYS[1:]]
SECRET = "zanzibarsecret"  # a word only the confidential documents hold
POLICY = {
    "default": {"action": "embed"},
    "rules": [{"if": {"collection": "^routed$", "certs": ["hr:confidential"]},
               "then": {"action": "embed", "space": "private"}}],
}


def body(title: str, extra: str = "", certs: list[str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"title": title, "body": f"Notes on wing flutter margins and gust loads {extra}."}
    if certs is not None:
        doc["_certs"] = certs
    return doc


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


@pytest.fixture(scope="module")
def app(api: OpenAIProtocolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_PROVIDER_CERTS": json.dumps({"openai": ["acme:public"]}),
           "VIBE_INDEX_POLICY": json.dumps(POLICY), "VIBE_JOB_BACKOFF_SECONDS": "0.1"}
    with served(Path(tmp_path_factory.mktemp("certs")) / "data", env=env, keys=CERT_KEYS) as s:
        yield s


def never_sent(api: OpenAIProtocolServer) -> None:
    assert not [t for t in api.texts if SECRET in t], "a confidential document reached the provider"


def skipped(app: Served, collection: str) -> dict[str, int]:
    r = app.call("GET", f"/semantic/coverage?collection={collection}", ADMIN)
    assert r.status_code == 200, r.text
    return dict(r.json()["skipped"])


def test_touch_sends_allowed_documents_and_defers_confidential_ones(app: Served, api: OpenAIProtocolServer) -> None:
    c = "touched"
    assert app.put(ADMIN, c, "secret", body("Secret flutter", SECRET, ["hr:confidential"])).status_code in (200, 201)
    assert app.put(ADMIN, c, "mixed", body("Mixed flutter", SECRET, ["acme:public", "acme:staff"])).status_code in (
        200, 201)
    assert app.put(ADMIN, c, "public", body("Public flutter", "", ["acme:public"])).status_code in (200, 201)
    assert app.put(ADMIN, c, "plain", body("Plain flutter")).status_code in (200, 201)
    r = app.read(ADMIN, collection=c, q="flutter margins", semantic={"strategy": "keyword"})
    assert r.status_code == 200 and set(ids(r.json()["results"])) == {"secret", "mixed", "public", "plain"}
    assert app.wait_status(ADMIN, c, "public", "ready", timeout=30) == "ready"
    assert app.wait_status(ADMIN, c, "plain", "ready", timeout=30) == "ready"
    assert app.wait_status(ADMIN, c, "secret", "deferred", timeout=30) == "deferred"
    assert app.wait_status(ADMIN, c, "mixed", "deferred", timeout=30) == "deferred"  # one unlisted cert is enough
    assert skipped(app, c) == {"cert": 2}
    assert any("Public flutter" in t for t in api.texts)  # the provider is really in use
    never_sent(api)


def test_eager_write_never_sends_a_confidential_document(app: Served, api: OpenAIProtocolServer) -> None:
    c = "eagerly"
    assert app.call("POST", "/semantic/promote", ADMIN, {"collection": c}).status_code == 200
    app.put(ADMIN, c, "open", body("Open eager"))
    app.put(ADMIN, c, "closed", body("Closed eager", SECRET, ["hr:confidential"]))
    assert app.wait_status(ADMIN, c, "open", "ready", timeout=30) == "ready"
    # MCP search may not hand certificate-bearing documents to its touch at all; if it does, the
    # job defers them: either way the provider never receives one
    assert app.status(ADMIN, c, "closed") in ("none", "deferred")
    assert skipped(app, c) in ({}, {"cert": 1})
    never_sent(api)


def test_reindex_backfill_keeps_them_deferred(app: Served, api: OpenAIProtocolServer) -> None:
    c = "touched"
    calls = api.requests
    r = app.call("POST", "/semantic/reindex", ADMIN, {"collection": c})
    assert r.status_code == 202, r.text
    app.call("POST", "/semantic/reindex", ADMIN, {"collection": c, "force": True})
    assert app.wait_status(ADMIN, c, "public", "ready", timeout=30) == "ready"
    assert app.wait_status(ADMIN, c, "secret", "deferred", timeout=30) == "deferred"
    assert skipped(app, c) == {"cert": 2}
    assert app.wait_status(ADMIN, c, "plain", "ready", timeout=30) == "ready"
    assert api.requests > calls  # the forced reindex did call the provider, for the allowed ones
    never_sent(api)


def test_a_policy_rule_routes_confidential_documents_to_a_local_space(app: Served, api: OpenAIProtocolServer) -> None:
    c = "routed"
    r = app.call("POST", "/semantic/spaces", ADMIN, {"space": "private", "model": "hash:v1@32"})
    assert r.status_code in (200, 202), r.text
    app.put(ADMIN, c, "secret", body("Routed flutter", SECRET, ["hr:confidential"]))
    app.put(ADMIN, c, "plain", body("Routed plain flutter"))
    app.read(ADMIN, collection=c, q="flutter margins", semantic={"strategy": "keyword"})
    assert app.wait_status(ADMIN, c, "secret", "deferred", timeout=30) == "deferred"  # in the active space
    assert skipped(app, c) == {"routed": 1}
    spaces = {s["space"]: s for s in app.call("GET", "/semantic/spaces", ADMIN).json()["spaces"]}
    assert spaces["core"]["coverage"]["skipped"].get("routed") == 1
    assert spaces["private"]["coverage"]["skipped"] == {}  # the local space embeds what the provider may not get
    # reads of the collection fuse the routed space in: the semantic leg finds the routed document
    # (in the active space it is only `deferred`, so its vector can come from the local space alone)
    r = app.read(ADMIN, collection=c, q="Routed flutter", semantic={"strategy": "semantic"})
    assert r.status_code == 200 and "secret" in ids(r.json()["results"]), r.text
    assert "private" in r.json()["diagnostics"]["buildingSpaces"]
    # and a reader without its certificate still never sees it
    r = app.read("k-alice", collection=c, q="Routed flutter", semantic={"strategy": "semantic"})
    assert r.status_code == 200 and "secret" not in ids(r.json()["results"]), r.text
    never_sent(api)


def test_mcp_search_never_sends_a_confidential_document(app: Served, api: OpenAIProtocolServer) -> None:
    from tests.mcp.support import http

    c = "mcpcol"
    app.put(ADMIN, c, "open", body("Open mcp flutter"))
    app.put(ADMIN, c, "closed", body("Closed mcp flutter", SECRET, ["hr:confidential"]))
    client = http(app.base, ADMIN)
    try:
        for query in ("Open mcp flutter", "Closed mcp flutter"):  # each the top hit of one search
            client.ok("search", {"query": query, "collection": c, "mode": "hybrid", "top_k": 1})
    finally:
        client.close()
    assert app.wait_status(ADMIN, c, "open", "ready", timeout=30) == "ready"
    # MCP search may not hand certificate-bearing documents to its touch at all; if it does, the
    # job defers them: either way the provider never receives one
    assert app.status(ADMIN, c, "closed") in ("none", "deferred")
    assert skipped(app, c) in ({}, {"cert": 1})
    never_sent(api)
