"""The permission-matrix harness: randomized (principal x document x endpoint)
cases over every read path, with ACL changes, deletes and re-creations interleaved, checked
against an oracle built only from the writes the harness made.

A *case* is one assertion "this principal, through this endpoint call, is shown this document
only if the oracle says it may read it" — every document of the caller's tenant universe is
checked against every answer (ids, content, counts), so one call yields many cases.

Every document version carries a unique token (`zq<doc>x<version>`) in its text, so content
that reaches a caller through any field (highlights, snippets, MCP contexts, explain) is
recognised wherever it appears. A version's token may be shown to a principal only if that
principal could read that version (its own ACL) AND can read the document now (revocation).
Showing an older version the caller could and can still read is counted as `stale`, not a leak.
"""

from __future__ import annotations

import base64
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from harness.server import Served
from shared.adapters.embedders.hash_embedder import HashEmbedder
from tests.mcp.support import McpClient, http

WRITER = {"ta": "m-writer", "tb": "m-b-writer"}
# Certificates: documents require none, one or two; readers hold none, one, both, or others.
ALL_CERTS = frozenset({"iss:a", "iss:b", "other:c"})
CERT_SETS: list[list[str]] = [[], [], ["iss:a"], ["iss:b"], ["iss:a", "iss:b"], ["other:c"]]
READERS: dict[str, tuple[str, tuple[str, ...], frozenset[str]]] = {
    "m-u1": ("ta", ("user:u1", "group:g1"), frozenset()),
    "m-u2": ("ta", ("user:u2", "group:g1", "group:g2"), frozenset({"iss:a"})),
    "m-u3": ("ta", ("user:u3", "group:g2"), frozenset({"iss:a", "iss:b"})),
    "m-u4": ("ta", ("user:u4",), frozenset({"other:c", "iss:z"})),
    "m-b-u1": ("tb", ("user:u1", "group:g1"), frozenset({"iss:a", "iss:b"})),  # same names, other tenant
    # an admin of narrow reach: `{vector}` queries are admin-only, and still see what its ACL and certificates allow
    "m-admin-u2": ("ta", ("user:u2", "group:g2"), frozenset({"iss:b"})),
}
ADMIN_READERS = frozenset({"m-admin-u2"})
# The writers hold every certificate: only a reader may overwrite a document (routes_docs.py).
KEYS: list[dict[str, Any]] = [
    {"key": "m-writer", "tenant": "ta", "principals": ["svc:writer"], "certs": sorted(ALL_CERTS),
     "scopes": ["read", "write", "admin"]},
    {"key": "m-b-writer", "tenant": "tb", "principals": ["svc:writer"], "certs": sorted(ALL_CERTS),
     "scopes": ["read", "write", "admin"]},
    *({"key": k, "tenant": t, "principals": list(ps), "certs": sorted(cs),
       "scopes": ["read", "admin"] if k in ADMIN_READERS else ["read"]}
      for k, (t, ps, cs) in READERS.items()),
]
ENV = {"VIBE_ENABLE_INNER_VOICE": "1", "VIBE_STREAM_WAIT_SECONDS": "0.5"}
COLLECTIONS = ("kb", "kg", "thoughts")
WORDS = ("orbit", "quartz", "lantern", "meadow", "cipher", "harbor")
# ACLs the writer chooses from: None = public (no `_acl`); the writer is in every other one,
# so it may always overwrite (routes_docs: only a reader may overwrite).
ACLS: list[list[str] | None] = [None, ["user:u1"], ["group:g1"], ["group:g2"], ["user:u4", "group:g2"],
                                ["user:u3"], [], ["user:nobody"]]
TOKEN = re.compile(r"zq(\d+)x(\d+)")
MATERIAL = re.compile(r"mtok([a-z0-9-]+)q(\d+)n\d+")


@dataclass
class Version:
    acl: frozenset[str]  # "*" = public
    words: tuple[str, ...]
    certs: frozenset[str] = frozenset()  # every one required of a reader


@dataclass
class Doc:
    num: int
    tenant: str
    collection: str
    doc_id: str
    current: int | None = None  # version number; None = deleted / never created
    versions: dict[int, Version] = field(default_factory=dict)


@dataclass
class Leak:
    variant: str
    endpoint: str
    key: str
    doc: str
    why: str
    request: str

    def __str__(self) -> str:
        return f"[{self.variant}] {self.endpoint} as {self.key}: {self.doc}: {self.why}\n    request: {self.request}"


def _exp(token: str) -> float:
    """A token's `exp` claim (its payload is readable by anyone; only the signature is secret)."""
    part = token.split(".")[1]
    return float(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["exp"])


def _error(r: Any) -> Any:
    """An error answer as a client tells one from another (the request id differs every time)."""
    try:
        err = r.json().get("error") or {}
    except ValueError:
        return r.text
    return {k: v for k, v in err.items() if k != "requestId"}


def readable(acl: frozenset[str], principals: tuple[str, ...]) -> bool:
    return "*" in acl or bool(acl & set(principals))


class Reader(NamedTuple):
    """Who a bearer reads as: a key's or a token's tenant and principals, and a token's filter
    (`{"title": "<first> note"}`: only versions whose first word is `first`)."""

    tenant: str
    principals: tuple[str, ...]
    first: str | None = None
    certs: frozenset[str] = frozenset()  # certificates held

    def fits(self, v: Version) -> bool:
        return (self.first is None or v.words[0] == self.first) and v.certs <= self.certs


class Oracle:
    def __init__(self) -> None:
        self.docs: dict[tuple[str, str, str], Doc] = {}
        self.by_num: dict[int, Doc] = {}
        self.next_version = 0

    def add(self, tenant: str, collection: str, doc_id: str) -> Doc:
        d = Doc(len(self.by_num), tenant, collection, doc_id)
        self.docs[(tenant, collection, doc_id)] = d
        self.by_num[d.num] = d
        return d

    def new_version(self, d: Doc, acl: list[str] | None, words: tuple[str, ...],
                    certs: list[str] | None = None) -> tuple[int, dict[str, Any]]:
        self.next_version += 1
        v = self.next_version
        if acl is not None:  # the writer stays in every ACL, or it could not overwrite (routes_docs.py)
            acl = [*acl, "svc:writer"]
        d.versions[v] = Version(frozenset(["*"] if acl is None else acl), words, frozenset(certs or ()))
        text = f"{' '.join(words)} marker zq{d.num}x{v}"
        body: dict[str, Any] = {"title": f"{words[0]} note"}
        if d.collection == "kb":
            body["content"] = text
        else:
            body["text"] = text
            body["kind" if d.collection == "kg" else "origin"] = "entity" if d.collection == "kg" else "human"
        if acl is not None:
            body["_acl"] = acl
        if certs:
            body["_certs"] = certs
        return v, body

    def can_read(self, d: Doc, tenant: str, principals: tuple[str, ...], first: str | None = None,
                 certs: frozenset[str] = frozenset()) -> bool:
        return (d.tenant == tenant and d.current is not None and readable(d.versions[d.current].acl, principals)
                and (first is None or d.versions[d.current].words[0] == first)
                and d.versions[d.current].certs <= certs)

    def universe(self, tenant: str) -> list[Doc]:
        return [d for d in self.by_num.values() if d.tenant == tenant]

    def count(self, tenant: str, principals: tuple[str, ...], collection: str, word: str | None,
              first: str | None = None, certs: frozenset[str] = frozenset()) -> int:
        """Documents the caller may read in scope (containing `word`, when given)."""
        n = 0
        for d in self.universe(tenant):
            if (collection in ("any", d.collection) and d.current is not None
                    and self.can_read(d, tenant, principals, first, certs)
                    and (word is None or word in d.versions[d.current].words)):
                n += 1
        return n


@dataclass
class Stats:
    variant: str
    cases: int = 0
    calls: int = 0
    stale: int = 0
    cert_cases: int = 0  # cases whose document required a certificate at the time
    leaks: list[Leak] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # 5xx / internal errors: not leaks, but reported
    by_endpoint: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        eps = ", ".join(f"{k}={v}" for k, v in sorted(self.by_endpoint.items()))
        return (f"permission matrix [{self.variant}]: {self.cases} cases over {self.calls} calls, "
                f"{len(self.leaks)} leaks ({self.cert_cases} cases on documents requiring certificates), "
                f"{self.stale} stale-but-permitted, {len(self.errors)} server errors; "
                f"per endpoint: {eps}")


class Matrix:
    """`writer` takes every write; `reader` answers every read (the same server, or another
    process on the same data dir)."""

    def __init__(self, writer: Served, reader: Served, variant: str, seed: int):
        self.w = writer
        self.r = reader
        self.rng = random.Random(seed)
        self.o = Oracle()
        self.stats = Stats(variant)
        self.mcp: dict[str, McpClient] = {}
        self.explains: list[tuple[str, str, Doc]] = []  # (key, explainId, doc)
        self.conversations: dict[str, list[tuple[str, int]]] = {}  # key -> [(conversation, n)]
        self.tasks = 0
        # Every bearer that reads, keys of VIBE_API_KEYS and (after `credentials`) API-made keys
        # and end-user tokens; `alias` names each in reports and in texts the harness writes
        # (a token is long and holds dots); `dead`: revoked and expired ones, refused everywhere.
        self.readers: dict[str, Reader] = {k: Reader(t, ps, None, cs) for k, (t, ps, cs) in READERS.items()}
        self.alias: dict[str, str] = {k: k for k in READERS}
        self.dead: dict[str, str] = {}  # bearer -> alias
        self.dead_after = 0.0  # time.time() from which every dead bearer must be refused

    # -- set-up and writes ---------------------------------------------------------

    def _made_key(self, tenant: str, principals: list[str], certs: list[str] | None = None) -> dict[str, Any]:
        r = self.w.call("POST", "/v1/keys", WRITER[tenant], {"name": "matrix", "principals": principals,
                                                             "certs": certs or [], "scopes": ["read"]})
        assert r.status_code == 201, r.text
        return dict(r.json())

    def _minted(self, minter: str, **body: Any) -> dict[str, Any]:
        r = self.w.call("POST", "/v1/tokens", minter, body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def credentials(self) -> None:
        """API-made keys and end-user tokens as readers (made on the writer process, used on the
        reader), and dead ones: a revoked key, a token it minted, an expired token."""
        made = self._made_key("ta", ["user:u5", "group:g1"], ["iss:b"])
        a, b = frozenset({"iss:a"}), frozenset({"iss:b"})
        live = {
            "m-made": (made["key"], Reader("ta", ("user:u5", "group:g1"), None, b)),
            # a token minted without `certs` holds its key's; with `certs: []`, none
            "m-made-tok": (self._minted(made["key"], principals=["group:g1"])["token"],
                           Reader("ta", ("group:g1",), None, b)),
            "m-made-tok-none": (self._minted(made["key"], principals=["group:g1"], certs=[])["token"],
                                Reader("ta", ("group:g1",))),
            "m-u3-tok": (self._minted("m-u3")["token"], self.readers["m-u3"]),  # the key's own principals
            "m-u3-tok-a": (self._minted("m-u3", certs=["iss:a"])["token"],
                           Reader("ta", ("user:u3", "group:g2"), None, a)),
            "m-filter-tok": (self._minted(WRITER["ta"], principals=["user:u6", "group:g2"], certs=["iss:a", "other:c"],
                                          filter={"title": f"{WORDS[0]} note"})["token"],
                             Reader("ta", ("user:u6", "group:g2"), WORDS[0], frozenset({"iss:a", "other:c"}))),
            "m-b-tok": (self._minted(WRITER["tb"], principals=["user:u1"], certs=["iss:a"])["token"],
                        Reader("tb", ("user:u1",), None, a)),
        }
        for alias, (bearer, who) in live.items():
            self.readers[bearer] = who
            self.alias[bearer] = alias
        doomed = self._made_key("ta", ["user:u1", "group:g1"])
        expiring = self._minted("m-u1", ttlSeconds=1)
        self.dead = {doomed["key"]: "m-revoked", self._minted(doomed["key"])["token"]: "m-revoked-tok",
                     expiring["token"]: "m-expired"}
        r = self.w.call("DELETE", f"/v1/keys/{doomed['id']}", WRITER["ta"])
        assert r.status_code == 204, r.text
        # revocation reaches every process within VIBE_KEY_REFRESH_SECONDS (at most 1 s); `exp` is whole seconds
        self.dead_after = max(time.time() + 1.0, _exp(expiring["token"]) + 0.1)

    def setup(self, per_collection: dict[str, int]) -> None:
        self.credentials()
        for tenant, n in per_collection.items():
            for col in COLLECTIONS:
                r = self.w.call("POST", "/semantic/promote", WRITER[tenant], {"collection": col})
                assert r.status_code == 200, r.text
                docs = [self.o.add(tenant, col, f"d{i}") for i in range(n)]
                if tenant == "ta":
                    docs.append(self.o.add(tenant, col, "ta-only"))
                self._bulk(tenant, col, docs)
        for key in self.readers:
            self.mcp[key] = http(self.r.base, key)
        time.sleep(max(0.0, self.dead_after - time.time()))

    def close(self) -> None:
        for c in self.mcp.values():
            c.close()

    def _words(self) -> tuple[str, ...]:
        return tuple(self.rng.sample(WORDS, 3))

    def _put(self, d: Doc, acl: list[str] | None) -> None:
        v, body = self.o.new_version(d, acl, self._words(), self.rng.choice(CERT_SETS))
        r = self.w.put(WRITER[d.tenant], d.collection, d.doc_id, body)
        assert r.status_code in (200, 201), r.text
        d.current = v

    def _bulk(self, tenant: str, col: str, docs: list[Doc]) -> None:
        items, versions = [], []
        for d in docs:
            v, body = self.o.new_version(d, self.rng.choice(ACLS), self._words(), self.rng.choice(CERT_SETS))
            items.append({"_id": d.doc_id, **body})
            versions.append(v)
        r = self.w.bulk(WRITER[tenant], col, items)
        assert r.status_code == 200 and not r.json()["errors"], r.text
        for d, v in zip(docs, versions, strict=True):
            d.current = v

    def mutate(self) -> None:
        tenant = "ta" if self.rng.random() < 0.8 else "tb"
        docs = self.o.universe(tenant)
        d = self.rng.choice(docs)
        op = self.rng.random()
        if d.current is None or op < 0.35:  # re-create, usually with another ACL
            self._put(d, self.rng.choice(ACLS))
        elif op < 0.55:
            r = self.w.call("DELETE", f"/v1/collections/{d.collection}/docs/{d.doc_id}", WRITER[tenant])
            assert r.status_code == 200, r.text
            d.current = None
        elif op < 0.7:  # delete and re-create at once
            r = self.w.call("DELETE", f"/v1/collections/{d.collection}/docs/{d.doc_id}", WRITER[tenant])
            assert r.status_code == 200, r.text
            d.current = None
            self._put(d, self.rng.choice(ACLS))
        elif op < 0.85:  # two edits in a row (one follower batch)
            self._put(d, self.rng.choice(ACLS))
            self._put(d, self.rng.choice(ACLS))
        else:
            same = [x for x in docs if x.collection == d.collection]
            self._bulk(tenant, d.collection, self.rng.sample(same, min(3, len(same))))

    # -- checks --------------------------------------------------------------------

    def _leak(self, endpoint: str, key: str, doc: str, why: str, request: Any) -> None:
        key = self.alias.get(key) or self.dead.get(key) or key
        self.stats.leaks.append(Leak(self.stats.variant, endpoint, key, doc, why,
                                     json.dumps(request)[:600] if not isinstance(request, str) else request))

    def _who(self, key: str) -> Reader:
        """Who a bearer reads as (a writer reads every document of its tenant)."""
        return self.readers.get(key) or (Reader("ta", ("svc:writer",), None, ALL_CERTS) if key == "m-writer"
                                         else Reader("tb", ("svc:writer",), None, ALL_CERTS))

    def _case(self, endpoint: str, n: int) -> None:
        self.stats.cases += n
        self.stats.by_endpoint[endpoint] = self.stats.by_endpoint.get(endpoint, 0) + n

    def check_shown(self, endpoint: str, key: str, shown: set[tuple[str, str]], text: str, request: Any) -> None:
        """`shown`: (collection, id) pairs the answer names; `text`: all of it, for tokens."""
        who = self._who(key)
        tenant, principals, first, certs = who
        universe = self.o.universe(tenant)
        self.stats.calls += 1
        self._case(endpoint, len(universe))
        self.stats.cert_cases += sum(1 for d in universe if d.current is not None and d.versions[d.current].certs)
        known = {(d.collection, d.doc_id) for d in universe}
        for col, doc_id in shown:
            d = self.o.docs.get((tenant, col, doc_id))
            if d is None or (col, doc_id) not in known:
                self._leak(endpoint, key, f"{col}/{doc_id}", "names a document this tenant's writes never made",
                           request)
            elif not self.o.can_read(d, tenant, principals, first, certs):
                cur = d.versions[d.current] if d.current is not None else None
                state = "deleted" if cur is None else f"acl={sorted(cur.acl)} certs={sorted(cur.certs)}"
                self._leak(endpoint, key, f"{tenant}/{col}/{doc_id}", f"unreadable document shown ({state})", request)
        for m in TOKEN.finditer(text):
            d = self.o.by_num.get(int(m.group(1)))
            v = int(m.group(2))
            if d is None or v not in d.versions:
                self._leak(endpoint, key, m.group(0), "unknown content token", request)
                continue
            ver_ok = readable(d.versions[v].acl, principals) and d.tenant == tenant and who.fits(d.versions[v])
            if not ver_ok or not self.o.can_read(d, tenant, principals, first, certs):
                why = ("content of a version this caller could never read" if not ver_ok
                       else "content of a document it can no longer read")
                self._leak(endpoint, key, f"{d.tenant}/{d.collection}/{d.doc_id}@v{v}", why, request)
            elif v != d.current:
                self.stats.stale += 1
        for m in MATERIAL.finditer(text):
            self._leak(endpoint, key, m.group(0), "extract_key_info material outside its task", request)

    def check_count(self, endpoint: str, key: str, what: str, got: Any, limit: int, request: Any) -> None:
        self._case(endpoint + ":count", 1)
        if isinstance(got, int) and got > limit:
            self._leak(endpoint, key, what, f"count {got} > {limit} documents the caller may read", request)

    # -- read paths ------------------------------------------------------------------

    def _read_body(self) -> tuple[dict[str, Any], str, str]:
        col = self.rng.choice([*COLLECTIONS, "any"])
        word = self.rng.choice(WORDS)
        body = {"collection": col, "q": word, "limit": 50,
                "semantic": {"strategy": self.rng.choice(["auto", "keyword", "semantic", "hybrid"]), "k": 500},
                "include": {"highlights": self.rng.random() < 0.6, "semantic": self.rng.random() < 0.5}}
        if col == "any" and self.rng.random() < 0.5:
            body["global"] = True  # a global read: every collection of the caller's tenant
        return body, col, word

    def _check_payload(self, endpoint: str, key: str, payload: dict[str, Any], col: str, word: str,
                       body: dict[str, Any]) -> None:
        tenant, principals, first, certs = self.readers[key]
        results = payload.get("results") or []
        self.check_shown(endpoint, key, {(str(x["collection"]), str(x["id"])) for x in results},
                         json.dumps(payload), body)
        in_scope = self.o.count(tenant, principals, col, None, first, certs)
        diag = payload.get("diagnostics") or {}
        lex = (diag.get("lexical") or {}).get("candidates")
        self.check_count(endpoint, key, "diagnostics.lexical.candidates", lex,
                         self.o.count(tenant, principals, col, word, first, certs), body)
        sem = diag.get("semantic") or {}
        for name in ("hits", "pending"):
            self.check_count(endpoint, key, f"diagnostics.semantic.{name}", sem.get(name), in_scope, body)
        self.check_count(endpoint, key, "warming.queued", (payload.get("warming") or {}).get("queued"), in_scope,
                         body)
        for x in results:
            if x.get("explainId"):
                d = self.o.docs.get((tenant, str(x["collection"]), str(x["id"])))
                if d is not None:
                    self.explains.append((key, str(x["explainId"]), d))

    def read_json(self, key: str) -> None:
        body, col, word = self._read_body()
        r = self.r.read(key, **body)
        assert r.status_code == 200, r.text
        self._check_payload("read.json", key, r.json(), col, word, body)

    def read_sse(self, key: str) -> None:
        body, col, word = self._read_body()
        for event, data in self.r.stream(key, **body):
            assert event != "error", data
            if event == "warming":
                tenant, principals, first, certs = self.readers[key]
                self.check_count("read.sse.warming", key, "warming.queued", data.get("queued"),
                                 self.o.count(tenant, principals, col, None, first, certs), body)
                continue
            self._check_payload(f"read.sse.{event}", key, data, col, word, body)

    def _like_source(self, key: str) -> tuple[Doc | None, str, str, bool]:
        """A more-like-this source: mostly one the caller may read now, else one it may not (another
        tenant's, deleted, outside its ACL or certificates) or an id never written."""
        tenant, principals, first, certs = self.readers[key]
        mine = [d for d in self.o.universe(tenant) if self.o.can_read(d, tenant, principals, first, certs)]
        if mine and self.rng.random() < 0.7:
            d = self.rng.choice(mine)
            return d, d.collection, d.doc_id, True
        if self.rng.random() < 0.15:
            return None, self.rng.choice(COLLECTIONS), "never-written", False
        d = self.rng.choice(list(self.o.by_num.values()))
        return d, d.collection, d.doc_id, d.tenant == tenant and self.o.can_read(d, tenant, principals, first, certs)

    def _check_similar(self, endpoint: str, key: str, payload: dict[str, Any], body: dict[str, Any],
                       source: tuple[str, str] | None) -> None:
        """A more-like-this or vector answer: every shown document readable, every count within the
        documents the caller may read, and the source never its own result."""
        tenant, principals, first, certs = self._who(key)
        results = payload.get("results") or []
        shown = {(str(x["collection"]), str(x["id"])) for x in results}
        self.check_shown(endpoint, key, shown, json.dumps(payload), body)
        if source is not None and source in shown:
            self._leak(endpoint, key, "/".join(source), "the source document is its own result", body)
        col = body["collection"] if body["collection"] in COLLECTIONS else "any"
        in_scope = self.o.count(tenant, principals, col, None, first, certs)
        diag = payload.get("diagnostics") or {}
        self.check_count(endpoint, key, "diagnostics.lexical.candidates", (diag.get("lexical") or {}).get("candidates"),
                         in_scope, body)
        for name in ("hits", "pending"):
            self.check_count(endpoint, key, f"diagnostics.semantic.{name}", (diag.get("semantic") or {}).get(name),
                             in_scope, body)

    def _refused_like_missing(self, endpoint: str, key: str, r: Any, missing: Any, body: dict[str, Any]) -> None:
        """A refusal must say nothing about the document: the very answer a missing one gets."""
        self.stats.calls += 1
        self._case(endpoint + ":refused", 1)
        if r.status_code != missing.status_code or _error(r) != _error(missing):
            self._leak(endpoint, key, json.dumps(body["semantic"]["query"]), f"answered {r.status_code} "
                       f"{r.text[:200]} where a missing source answers {missing.status_code}", body)
        else:
            self.check_shown(endpoint, key, set(), r.text, body)

    def read_nodes(self, key: str) -> None:
        """More-like-this over `semantic.nodes` (every collection the caller may read)."""
        d, col, doc_id, may = self._like_source(key)
        body: dict[str, Any] = {"collection": "semantic.nodes", "limit": 50, "semantic": {
            "strategy": self.rng.choice(["auto", "keyword", "semantic", "hybrid"]), "k": 500,
            "query": {"doc": {"collection": col, "_id": doc_id}}},
            "include": {"highlights": self.rng.random() < 0.5, "semantic": self.rng.random() < 0.5}}
        sse = self.rng.random() < 0.3
        if not may:
            headers = {"Accept": "text/event-stream" if sse else "application/json"}
            r = self.r.call("POST", "/v1/read", key, body, headers=headers)
            missing = {**body, "semantic": {**body["semantic"], "query": {"doc": {"collection": col,
                                                                                   "_id": "never-written"}}}}
            self._refused_like_missing("read.nodes", key, r, self.r.call("POST", "/v1/read", key, missing,
                                                                         headers=headers), body)
            return
        source = (col, doc_id)
        if not sse:
            r = self.r.read(key, **body)
            assert r.status_code == 200, r.text
            self._check_similar("read.nodes.json", key, r.json(), body, source)
            return
        for event, data in self.r.stream(key, **body):
            assert event != "error", data
            if event != "warming":
                self._check_similar(f"read.nodes.sse.{event}", key, data, body, source)

    def _dim(self) -> int:
        if not hasattr(self, "_dims"):
            self._dims = int(self.r.call("GET", "/readyz", None).json()["dim"])
        return self._dims

    def read_vector(self, key: str) -> None:
        """`{vector}` queries: an admin's (a writer of either tenant, or the narrow admin reader) see
        only what they may read in their own tenant; any other key is refused with 403."""
        admin = self.rng.random() < 0.6
        if admin:
            key = self.rng.choice([*WRITER.values(), *ADMIN_READERS])
        text = " ".join(self.rng.sample(WORDS, 3)) + " note marker"
        vec = HashEmbedder(self._dim()).embed([text])[0]
        wrong = self.rng.random() < 0.1
        body: dict[str, Any] = {"collection": self.rng.choice([*COLLECTIONS, "any", "semantic.nodes"]), "limit": 50,
                                "semantic": {"query": {"vector": vec[:-1] if wrong else vec}, "k": 500},
                                "include": {"highlights": self.rng.random() < 0.5}}
        r = self.r.read(key, **body)
        may = key in WRITER.values() or key in ADMIN_READERS
        want = 200 if may and not wrong else 400 if may else 403
        self.stats.calls += 1
        if r.status_code != want:
            self._case("read.vector:refused", 1)
            self._leak("read.vector", key, f"HTTP {r.status_code}", f"expected {want}: {r.text[:200]}",
                       {**body, "semantic": "<vector>"})
            return
        if want != 200:
            self._case("read.vector:refused", 1)
            self.check_shown("read.vector", key, set(), r.text, "{vector} refused")
            return
        self._check_similar("read.vector", key, r.json(), {**body, "semantic": {"query": "<vector>"}}, None)

    def get_doc(self, key: str) -> None:
        tenant, principals, first, certs = self.readers[key]
        # ids of both tenants: the same ids exist in each
        d = self.rng.choice(list(self.o.by_num.values()))
        path = f"/v1/collections/{d.collection}/docs/{d.doc_id}"
        if self.rng.random() < 0.7:
            path += "?include=semantic"
        r = self.r.call("GET", path, key)
        assert r.status_code in (200, 404), r.text
        mine = self.o.docs.get((tenant, d.collection, d.doc_id))
        shown = {(d.collection, d.doc_id)} if r.status_code == 200 else set()
        self.check_shown("get", key, shown, r.text if r.status_code == 200 else "", f"GET {path}")
        if r.status_code == 404 and mine is not None and self.o.can_read(mine, tenant, principals, first, certs):
            pass  # a miss, not a leak
        if r.status_code == 200 and f"zq{mine.num if mine else -1}x" not in r.text:
            self._leak("get", key, path, "answered 200 with another document's content", f"GET {path}")

    def explain(self, key: str) -> None:
        if not self.explains:
            return
        owner, eid, d = self.rng.choice(self.explains)
        asker = owner if self.rng.random() < 0.5 else self.rng.choice(list(self.readers))
        tenant = self.readers[asker].tenant
        r = self.r.call("GET", f"/v1/explain/{eid}", asker)
        assert r.status_code in (200, 404), r.text
        shown = set()
        if r.status_code == 200:
            body = r.json()
            shown = {(str(body.get("collection")), str(body.get("id")))}
            if d.tenant != tenant:
                self._leak("explain", asker, f"{d.tenant}/{d.collection}/{d.doc_id}",
                           "another tenant's explain record", f"GET /v1/explain/{eid} (issued to {owner})")
                return
        self.check_shown("explain", asker, shown, r.text if r.status_code == 200 else "",
                         f"GET /v1/explain/{eid} (issued to {owner})")

    def admin(self, _: str) -> None:
        tenant = self.rng.choice(["ta", "tb"])
        key = WRITER[tenant]
        col = self.rng.choice(COLLECTIONS)
        r = self.r.call("GET", f"/semantic/coverage?collection={col}", key)
        assert r.status_code == 200, r.text
        cov = r.json()
        total = cov.get("total")
        if total is None:
            total = sum(v for k, v in cov.items() if isinstance(v, int) and k in (
                "none", "queued", "ready", "stale", "denied", "deferred", "failed", "cold"))
        existing = sum(1 for d in self.o.universe(tenant) if d.collection == col and d.current is not None)
        self.stats.calls += 1
        self.check_count("admin.coverage", key, f"{tenant}/{col} total", total, existing,
                         f"GET /semantic/coverage?collection={col}")
        d = self.rng.choice(list(self.o.by_num.values()))
        path = f"/semantic/status?collection={d.collection}&_id={d.doc_id}"
        r = self.r.call("GET", path, key)
        assert r.status_code in (200, 404), r.text
        mine = self.o.docs.get((tenant, d.collection, d.doc_id))
        self._case("admin.status", 1)
        if r.status_code == 200 and (mine is None or mine.current is None):
            self._leak("admin.status", key, f"{tenant}/{d.collection}/{d.doc_id}",
                       "status of a document absent from this tenant", f"GET {path}")

    def _tool(self, key: str, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        err, body = self.mcp[key].call(tool, args)
        if err:
            code = str((body.get("error") or {}).get("code", body))
            assert code == "internal_error", body  # anything else is a harness bug
            self.stats.errors.append(f"{tool} as {key}: {json.dumps(body)[:200]} <- {json.dumps(args)[:300]}")
            return None
        return body

    def mcp_search(self, key: str) -> None:
        col = self.rng.choice(COLLECTIONS)
        args: dict[str, Any] = {"query": self.rng.choice(WORDS), "top_k": 50, "collection": col,
                                "mode": self.rng.choice(["lexical", "semantic", "hybrid"])}
        if self.rng.random() < 0.5:
            conv = f"conv-{self.alias[key]}-{self.rng.randrange(3)}"
            args["conversation_id"] = conv
        body = self._tool(key, "search", args)
        if body is None:
            return
        results = body.get("results") or []
        self.check_shown("mcp.search", key, {(col, str(x["chunk_id"])) for x in results}, json.dumps(body),
                         {"tool": "search", **args})
        if "conversation_id" in args:
            self.conversations.setdefault(key, []).extend((args["conversation_id"], int(x["n"])) for x in results)

    def mcp_inner_voice(self, key: str) -> None:
        args = {"query": self.rng.choice(WORDS), "top_k": 50, "floor": 0.0, "mix": 0.5}
        body = self._tool(key, "inner_voice.retrieve", args)
        if body is None:
            return
        tenant, principals, first, certs = self.readers[key]
        shown = set()
        for s in body.get("snippets") or []:
            kind, _, doc_id = str(s["id"]).partition(":")
            shown.add(("kg" if kind == "kg" else "thoughts", doc_id))
        self.check_shown("mcp.inner_voice", key, shown, json.dumps(body), {"tool": "inner_voice.retrieve", **args})
        diag = body.get("diagnostics") or {}
        for name, col in (("kg_candidates", "kg"), ("thought_candidates", "thoughts")):
            self.check_count("mcp.inner_voice", key, f"diagnostics.{name}", diag.get(name),
                             self.o.count(tenant, principals, col, None, first, certs), args)

    def mcp_extract(self, key: str) -> None:
        """Each call's materials carry tokens of (key, task); contexts may hold only this
        task's own tokens — never another key's or task's, nor any document's."""
        task = self.rng.randrange(3)
        self.tasks += 1
        word = self.rng.choice(WORDS)
        name = self.alias[key]
        mats = "\n\n".join(f"{word} {self.rng.choice(WORDS)} material mtok{name}q{task}n{self.tasks}{i}."
                           for i in range(3))
        args = {"query": word, "materials": mats, "topK": 20, "task_id": f"task-{task}"}
        body = self._tool(key, "extract_key_info", args)
        if body is None:
            return
        # Seed 004's answer is a list of strings (`result` in the structured content). A body
        # without it must fail here, not pass with nothing checked.
        result = body.get("result")
        assert isinstance(result, list), f"extract_key_info answered without a result list: {sorted(body)}"
        text = json.dumps(result)
        own = [m for m in MATERIAL.finditer(text) if m.group(1) == name and m.group(2) == str(task)]
        foreign = [m.group(0) for m in MATERIAL.finditer(text) if m not in own and not (
            m.group(1) == name and m.group(2) == str(task))]
        self.stats.calls += 1
        self._case("mcp.extract_key_info", len(self.o.universe(self.readers[key].tenant)) + 1)
        for f in foreign:
            self._leak("mcp.extract_key_info", key, f, "another key's or task's material", {"tool": "extract", **args})
        stripped = MATERIAL.sub("", text)
        self.check_shown("mcp.extract_key_info", key, set(), stripped, {"tool": "extract", **args})

    def mcp_citations(self, key: str) -> None:
        owner = self.rng.choice([k for k in self.conversations] or [key])
        cites = self.conversations.get(owner) or []
        if not cites:
            return
        conv = self.rng.choice(sorted({c for c, _ in cites}))
        numbers = sorted({n for c, n in cites if c == conv})[:50]
        asker = owner if self.rng.random() < 0.7 else key
        body = self._tool(asker, "citations.resolve", {"conversation_id": conv, "numbers": numbers})
        if body is None:
            return
        shown = set()
        for entry in (body.get("citations") or {}).values():
            loc = entry.get("locator") or {}
            shown.add((str(loc.get("collection")), str(loc.get("id"))))
        req = {"tool": "citations.resolve", "conversation_id": conv, "numbers": numbers, "registered_by": owner}
        if asker != owner and shown and self.readers[asker] != self.readers[owner]:
            self._leak("mcp.citations", asker, conv, "resolved another key's conversation", req)
        self.check_shown("mcp.citations", asker, shown, json.dumps(body), req)

    def dead_bearer(self) -> None:
        """A revoked key, a token it minted, or an expired token, on a read path: 401, and nothing shown."""
        bearer = self.rng.choice(list(self.dead))
        col, word = self.rng.choice(COLLECTIONS), self.rng.choice(WORDS)
        calls = {
            "dead.read.json": ("POST", "/v1/read", {"collection": col, "q": word}, {"Accept": "application/json"}),
            "dead.read.sse": ("POST", "/v1/read", {"collection": col, "q": word}, {"Accept": "text/event-stream"}),
            "dead.get": ("GET", f"/v1/collections/{col}/docs/d0", None, {}),
            "dead.mcp": ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "search", "arguments": {"query": word, "collection": col}}},
                {"Accept": "application/json, text/event-stream"}),
        }
        endpoint = self.rng.choice(list(calls))
        method, path, body, headers = calls[endpoint]
        r = self.r.call(method, path, bearer, body, headers=headers)
        self.stats.calls += 1
        self._case(endpoint, 1)
        if r.status_code != 401:
            self._leak(endpoint, bearer, f"HTTP {r.status_code}", "a revoked or expired bearer was not refused",
                       f"{method} {path}")
        else:
            self.check_shown(endpoint, bearer, set(), r.text, f"{method} {path}")

    # -- the run -------------------------------------------------------------------

    def endpoints(self) -> list[Callable[[str], None]]:
        return [self.read_json, self.read_json, self.read_sse, self.get_doc, self.get_doc, self.explain,
                self.admin, self.mcp_search, self.mcp_inner_voice, self.mcp_extract, self.mcp_citations,
                self.read_nodes, self.read_vector]

    def run(self, rounds: int, mutations: int = 3, reads: int = 10) -> Stats:
        eps = self.endpoints()
        for _ in range(rounds):
            for _ in range(mutations):
                self.mutate()
            for _ in range(reads):
                if self.dead and self.rng.random() < 0.08:
                    self.dead_bearer()
                else:
                    self.rng.choice(eps)(self.rng.choice(list(self.readers)))
        return self.stats
