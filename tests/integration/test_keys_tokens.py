"""API-made keys and end-user tokens over real sockets:
create/list/revoke, the secret shown once, revocation reaching a second API process on the
same data dir, the minting rules, expiry, a token's filter on every read path (JSON, SSE,
GET, MCP over HTTP)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, ids, served
from tests.mcp.support import http

ADMIN, ALICE, BOB, ADMIN_B = "k-admin-a", "k-alice", "k-bob", "k-admin-b"
REFRESH = 0.5  # VIBE_KEY_REFRESH_SECONDS of these servers


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Served]]:
    """Two API processes on one data dir."""
    data = tmp_path_factory.mktemp("keys") / "data"
    env = {"VIBE_KEY_REFRESH_SECONDS": str(REFRESH), "VIBE_STREAM_WAIT_SECONDS": "0.5"}
    with served(data, env=env) as a, served(data, env=env) as b:
        docs = [{"_id": f"r{i}", "team": "red", "content": f"orbit lantern report {i}"} for i in range(3)]
        docs += [{"_id": f"b{i}", "team": "blue", "content": f"orbit lantern memo {i}"} for i in range(3)]
        docs.append({"_id": "secret", "team": "red", "content": "orbit lantern private", "_acl": ["user:admin"]})
        assert a.bulk(ADMIN, "kb", docs).json()["accepted"] == 7
        yield a, b


def _key(s: Served, key: str = ADMIN, **body: Any) -> dict[str, Any]:
    body = {"name": "app", "principals": ["user:app"], "scopes": ["read"], **body}
    r = s.call("POST", "/v1/keys", key, body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _token(s: Served, key: str, **body: Any) -> dict[str, Any]:
    r = s.call("POST", "/v1/tokens", key, body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def _read_ids(s: Served, key: str, q: str = "orbit lantern") -> set[str]:
    r = s.read(key, collection="kb", q=q, limit=50, semantic={"strategy": "keyword"})
    assert r.status_code == 200, r.text
    return set(ids(r.json()["results"]))


def test_create_list_revoke_and_the_secret_is_shown_once(pair: tuple[Served, Served]) -> None:
    a, b = pair
    made = _key(a, name="ingest bot", principals=["user:app", "group:eng"], certs=["acme:gold"],
                scopes=["write", "read"])
    assert made["key"].startswith("vsk_") and made["id"].startswith("key_")
    assert made["scopes"] == ["read", "write"] and made["certs"] == ["acme:gold"] and made["createdAt"]
    listed = a.call("GET", "/v1/keys", ADMIN).json()["keys"]
    mine = [k for k in listed if k["id"] == made["id"]]
    assert mine and mine[0]["name"] == "ingest bot" and not mine[0]["bootstrap"]
    assert made["key"] not in json.dumps(listed) and all("key" not in k for k in listed)
    assert any(k["bootstrap"] for k in listed)
    # the other tenant sees none of them, and cannot delete them
    assert made["id"] not in json.dumps(a.call("GET", "/v1/keys", ADMIN_B).json())
    r = a.call("DELETE", f"/v1/keys/{made['id']}", ADMIN_B)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    # the new key works on both processes at once, with its own principals and scopes
    assert a.put(made["key"], "kb", "by-app", {"team": "green", "content": "made by app"}).status_code == 201
    assert b.call("GET", "/v1/collections/kb/docs/by-app", made["key"]).status_code == 200
    assert "secret" not in _read_ids(b, made["key"])
    r = a.call("DELETE", f"/v1/keys/{made['id']}", ADMIN)
    assert r.status_code == 204 and not r.content
    assert a.call("GET", "/v1/collections/kb/docs/by-app", made["key"]).status_code == 401
    assert made["id"] not in json.dumps(a.call("GET", "/v1/keys", ADMIN).json())
    assert a.call("DELETE", f"/v1/keys/{made['id']}", ADMIN).status_code == 404


def test_revocation_reaches_another_process_and_the_keys_tokens(pair: tuple[Served, Served]) -> None:
    a, b = pair
    made = _key(a, principals=["user:alice"], scopes=["read"])
    token = _token(b, made["key"])["token"]  # minted on the other process, by a key made a moment ago
    assert _claims(token)["kid"] == made["id"]
    for s in (a, b):  # both processes know the key and its token
        assert s.read(made["key"], collection="kb", q="orbit").status_code == 200
        assert s.read(token, collection="kb", q="orbit").status_code == 200
    assert a.call("DELETE", f"/v1/keys/{made['id']}", ADMIN).status_code == 204
    time.sleep(2 * REFRESH + 0.2)  # the bound: each process re-reads the keys' generation within REFRESH
    for s in (a, b):
        for bearer in (made["key"], token):
            r = s.read(bearer, collection="kb", q="orbit")
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (s.port, r.text)


def test_bootstrap_keys_cannot_be_deleted(pair: tuple[Served, Served]) -> None:
    a, _ = pair
    boot = [k for k in a.call("GET", "/v1/keys", ADMIN).json()["keys"] if k["bootstrap"]]
    assert {tuple(k["principals"]) for k in boot} == {("user:admin",), ("user:alice", "group:eng"),
                                                      ("user:bob", "group:sales")}
    for k in boot:
        r = a.call("DELETE", f"/v1/keys/{k['id']}", ADMIN)
        assert r.status_code == 403 and r.json()["error"]["details"] == {"reason": "bootstrap_key"}, r.text
    assert a.read(ALICE, collection="kb", q="orbit").status_code == 200


def test_key_management_needs_admin_and_stays_in_bounds(pair: tuple[Served, Served]) -> None:
    a, _ = pair
    body = {"name": "x", "principals": ["user:x"], "scopes": ["read"]}
    assert a.call("POST", "/v1/keys", ALICE, body).status_code == 403
    assert a.call("GET", "/v1/keys", BOB).status_code == 403
    assert a.call("POST", "/v1/keys", None, body).status_code == 401
    bad = [{**body, "name": ""}, {**body, "name": "n" * 129}, {**body, "name": "a\nb"},
           {**body, "principals": [f"user:{i}" for i in range(101)]}, {**body, "principals": [""]},
           {**body, "scopes": []}, {**body, "scopes": ["root"]}, {**body, "tenant": "tb"},
           {"name": "x", "scopes": ["read"]}]
    for b in bad:
        r = a.call("POST", "/v1/keys", ADMIN, b)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", (b, r.text)


def test_keys_per_tenant_are_bounded(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={"VIBE_MAX_KEYS_PER_TENANT": "2"}) as s:
        first = _key(s)
        _key(s)
        r = s.call("POST", "/v1/keys", ADMIN, {"name": "c", "principals": [], "scopes": ["read"]})
        assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
        _key(s, key=ADMIN_B)  # another tenant's count is its own
        assert s.call("DELETE", f"/v1/keys/{first['id']}", ADMIN).status_code == 204
        _key(s)


def test_minting_rules(pair: tuple[Served, Served]) -> None:
    a, _ = pair
    t = _token(a, ALICE)
    claims = _claims(t["token"])
    assert claims["scp"] == ["read"] and claims["prn"] == ["user:alice", "group:eng"]  # the defaults
    assert claims["exp"] - claims["iat"] == 3600 and t["expiresAt"].endswith("Z")
    _token(a, ALICE, principals=["group:eng"], scopes=["read", "write"])  # a subset of its own
    for body in ({"principals": ["user:bob"]}, {"principals": ["user:alice", "user:admin"]},
                 {"scopes": ["admin"]}, {"certs": ["acme:gold"]}):
        r = a.call("POST", "/v1/tokens", ALICE, body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (body, r.text)
    r = a.call("POST", "/v1/tokens", BOB, {"scopes": ["write"]})  # bob reads only
    assert r.status_code == 403
    # an admin key names any principals of its tenant (never another tenant: the tenant is its own)
    admin_token = _token(a, ADMIN, principals=["user:bob", "group:sales"], certs=["acme:gold"])["token"]
    assert _claims(admin_token)["ten"] == "ta"
    assert "secret" not in _read_ids(a, admin_token) and "r0" in _read_ids(a, admin_token)
    for body in ({"ttlSeconds": 0}, {"ttlSeconds": 86_401}, {"ttlSeconds": "60"}, {"ttlSeconds": True},
                 {"scopes": ["root"]}, {"filter": {"_acl": "x"}}, {"filter": []}, {"tenant": "tb"}):
        r = a.call("POST", "/v1/tokens", ALICE, body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", (body, r.text)
    assert _claims(_token(a, ALICE, ttlSeconds=86_400)["token"])["exp"] - claims["iat"] >= 86_400


def test_a_token_reads_as_its_principals_and_cannot_mint_or_manage(pair: tuple[Served, Served]) -> None:
    a, b = pair
    token = _token(a, ADMIN, principals=["user:bob"], scopes=["read"])["token"]
    assert _read_ids(b, token) == {"r0", "r1", "r2", "b0", "b1", "b2"}  # public ones, not `secret`
    assert b.call("GET", "/v1/collections/kb/docs/secret", token).status_code == 404
    assert b.put(token, "kb", "nope", {"content": "x"}).status_code == 403  # read scope only
    r = a.call("POST", "/v1/tokens", token, {})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    admin_token = _token(a, ADMIN, scopes=["read", "admin"])["token"]
    assert a.call("GET", "/semantic/coverage?collection=kb", admin_token).status_code == 200
    assert a.call("GET", "/v1/keys", admin_token).status_code == 403
    assert a.call("POST", "/v1/keys", admin_token, {"name": "x", "principals": [], "scopes": ["read"]}
                  ).status_code == 403


def test_bad_and_expired_tokens_are_refused(pair: tuple[Served, Served]) -> None:
    a, _ = pair
    t = _token(a, ALICE, ttlSeconds=1)
    head, payload, sig = t["token"].split(".")
    forged = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged["prn"] = ["user:admin"]
    forged_payload = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    for bad in (f"{head}.{forged_payload}.{sig}", t["token"][:-2] + "xx", "a.b.c", "vsk_not-a-key"):
        r = a.read(bad, collection="kb", q="orbit")
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", bad
    deadline = time.time() + 10  # the token is good until `exp`, then refused for good
    while time.time() < _claims(t["token"])["exp"] - 0.5 and time.time() < deadline:
        assert a.read(t["token"], collection="kb", q="orbit").status_code == 200
        time.sleep(0.1)
    time.sleep(max(0.0, _claims(t["token"])["exp"] - time.time()) + 0.2)
    r = a.read(t["token"], collection="kb", q="orbit")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_a_tokens_filter_is_anded_to_every_read(pair: tuple[Served, Served]) -> None:
    a, b = pair
    token = _token(a, ADMIN, principals=["user:admin"], filter={"team": "red"})["token"]
    reds = {"r0", "r1", "r2", "secret"}
    assert _read_ids(b, token) == reds
    # inside the engine's query, not after it: the candidates counted are the token's alone
    r = b.read(token, collection="kb", q="orbit lantern", semantic={"strategy": "keyword"})
    assert r.json()["diagnostics"]["lexical"]["candidates"] == len(reds)
    assert _read_ids(b, ADMIN) == reds | {"b0", "b1", "b2"}
    # the request's own filter is ANDed too, never widening the token's
    r = b.read(token, collection="kb", q="orbit lantern", filter={"team": "blue"})
    assert r.status_code == 200 and r.json()["results"] == []
    events = b.stream(token, collection="kb", q="orbit lantern", limit=50, semantic={"strategy": "hybrid"})
    for name, data in events:
        if "results" in data:
            assert set(ids(data["results"])) <= reds, name
    assert set(ids(events[-1][1]["results"])) == reds
    assert b.call("GET", "/v1/collections/kb/docs/b0", token).status_code == 404
    assert b.call("GET", "/v1/collections/kb/docs/r0", token).status_code == 200
    mcp = http(b.base, token)
    try:
        body = mcp.ok("search", {"query": "orbit lantern", "top_k": 50, "collection": "kb", "mode": "lexical"})
        assert {str(x["chunk_id"]) for x in body["results"]} == reds
    finally:
        mcp.close()


def test_tokens_on_sse_and_mcp_and_revoked_ones_are_refused_there(pair: tuple[Served, Served]) -> None:
    a, b = pair
    made = _key(a, principals=["user:alice", "group:eng"], scopes=["read"])
    token = _token(a, made["key"])["token"]
    events = b.stream(token, collection="kb", q="orbit lantern", limit=50)
    assert events[-1][0] == "done" and "secret" not in ids(events[-1][1]["results"])
    mcp = http(b.base, token)
    try:
        assert mcp.ok("search", {"query": "orbit", "top_k": 5, "collection": "kb", "mode": "lexical"})["count"] > 0
    finally:
        mcp.close()
    assert a.call("DELETE", f"/v1/keys/{made['id']}", ADMIN).status_code == 204
    time.sleep(2 * REFRESH + 0.2)
    r = b.call("POST", "/mcp", token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
               headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = b.call("POST", "/v1/read", token, {"collection": "kb", "q": "orbit"}, headers={"Accept": "text/event-stream"})
    assert r.status_code == 401
