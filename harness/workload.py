"""A mixed HTTP workload against a served API, with a ledger of every acknowledged write and a
verifier that checks nothing acknowledged was lost (tests/reliability/ and bench/reliability.py).

Each client thread owns its document ids (`<run>t<thread>n<j>`), so the operations on one id
are sequential and "the last acknowledged content" is exact. A write whose answer never came
(transport error, a killed server) or came as a 5xx is *unsure*: after it the document may
hold the last acknowledged state or any unsure one attempted since.

Every document's text holds two tokens the verifier searches for: `uq<id>` (the document) and
`<id>v<version>` (this version of it), so a keyword read for the version token proves the
lexical index holds the last acknowledged content, not only the id.
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from harness.openai_server import OpenAIProtocolServer
from shared.errors import ErrorCode

_VOCABULARY = (
    "wing flutter gust load margin boundary layer transition swept tunnel shock wave pressure drag lift "
    "nozzle turbine blade cooling heat transfer laminar turbulent vortex shedding cylinder plate "
    "compressor stall surge inlet diffuser jet noise acoustic panel buckling shell stiffened fatigue "
    "crack rotor hover thrust propeller cabin lighting gear shimmy damper brake runway icing sensor "
    "control elevator rudder aileron spoiler flap slat trim stability yaw pitch roll mach number reynolds "
    "viscous inviscid supersonic subsonic hypersonic reentry ablation nose cone fin missile orbit "
    "satellite antenna radar composite laminate resin fibre weld rivet joint bolt spar rib skin "
)
WORDS = tuple(_VOCABULARY.split())

DELETED = None  # the ledger's state of a deleted document
# An SSE `error` event's code -> the HTTP status the same error has as an answer, for 5xx codes.
SERVER_ERROR_CODES = {e.code: e.status for e in ErrorCode if e.status >= 500}
State = int | None  # a version, or DELETED


def doc_text(doc_id: str, version: int, rng: random.Random) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(14))
    return {"title": f"{rng.choice(WORDS)} {rng.choice(WORDS)} report {doc_id}",
            "body": f"{words} uq{doc_id} {doc_id}v{version}", "v": version}


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


class RecordingProvider(OpenAIProtocolServer):
    """The local OpenAI-protocol provider, keeping each successful call's inputs so that
    duplicate embeddings (one text embedded twice) can be counted."""

    def __init__(self, dim: int = 64):
        super().__init__(dim)
        # apart from the base class's `texts` (every input, failed calls and probes included)
        self.answered: list[str] = []
        self.calls = 0

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        status, payload, headers = super()._answer(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if status == 200 and texts != ["dimension probe"]:
            with self._lock:
                self.calls += 1
                self.answered.extend(texts)
        return status, payload, headers

    def doc_embeddings(self) -> collections.Counter[str]:
        """Texts of documents embedded (queries excluded: only a document's text holds a
        version token `<id>v<n>` *and* its `uq<id>`)."""
        with self._lock:
            return collections.Counter(t for t in self.answered if " uq" in t)

    def duplicates(self) -> dict[str, int]:
        return {t: n for t, n in self.doc_embeddings().items() if n > 1}


# -- the ledger -----------------------------------------------------------------------------


@dataclass
class Entry:
    collection: str
    key: str  # the API key (tenant) that wrote it
    acked: State | str = "never"  # "never": no write of it was ever acknowledged
    unsure: set[State] = field(default_factory=set)
    texts: dict[int, dict[str, Any]] = field(default_factory=dict)


class Ledger:
    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    def entry(self, doc_id: str, collection: str, key: str) -> Entry:
        with self._lock:
            return self.entries.setdefault(doc_id, Entry(collection, key))

    def attempt(self, doc_id: str, collection: str, key: str, state: State, text: dict[str, Any] | None) -> None:
        """Before sending: the write may land even if its answer never comes."""
        e = self.entry(doc_id, collection, key)
        if text is not None and state is not None:
            e.texts[state] = text
        e.unsure.add(state)

    def ack(self, doc_id: str, state: State) -> None:
        e = self.entries[doc_id]
        e.acked = state
        e.unsure = set()

    def acked_live(self) -> dict[str, Entry]:
        return {d: e for d, e in self.entries.items() if isinstance(e.acked, int) and not e.unsure}

    def possible(self, doc_id: str) -> set[State | str]:
        e = self.entries[doc_id]
        return {e.acked, *e.unsure}


# -- the recorder ---------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = collections.defaultdict(list)
        self.status: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def ok(self, route: str, seconds: float, status: int) -> None:
        with self._lock:
            self.latency[route].append(seconds)
            self.status[route][str(status)] += 1

    def error(self, route: str, what: str) -> None:
        with self._lock:
            self.status[route]["error"] += 1
            if len(self.errors) < 200:
                self.errors.append(f"{route}: {what}"[:500])

    def error_count(self) -> int:
        return sum(c["error"] for c in self.status.values())

    def summary(self) -> dict[str, dict[str, Any]]:
        out = {}
        for route in sorted(set(self.latency) | set(self.status)):
            xs = self.latency.get(route, [])
            out[route] = {"n": len(xs), "errors": self.status[route]["error"],
                          "p50_ms": round(pct(xs, 0.50) * 1000, 1), "p99_ms": round(pct(xs, 0.99) * 1000, 1),
                          "max_ms": round(max(xs) * 1000, 1) if xs else None,
                          "status": dict(self.status[route])}
        return out

    def table(self) -> str:
        lines = [f"{'route':<22}{'n':>7}{'errors':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
        for route, s in self.summary().items():
            lines.append(f"{route:<22}{s['n']:>7}{s['errors']:>8}{s['p50_ms']:>10}{s['p99_ms']:>10}{s['max_ms']!s:>10}")
        return "\n".join(lines)


# -- the workload ---------------------------------------------------------------------------

MIX = {"read_json": 24, "read_sse": 8, "get": 12, "put": 22, "bulk": 6, "delete": 8, "admin": 6}
ADMIN_PATHS = ["/semantic/coverage?collection={c}", "/semantic/lag", "/semantic/queueDepth", "/semantic/mismatch",
               "/semantic/usage"]


@dataclass
class WorkloadConfig:
    keys: list[str]  # API keys (read+write+admin), one per client thread in turn
    collections: list[str]  # documents go to these in turn
    threads: int = 4
    duration: float = 10.0  # seconds, or
    ops_per_thread: int | None = None  # a count (whichever ends first)
    bulk_size: int = 25
    run: str = "r"
    seed: int = 1
    mix: dict[str, int] = field(default_factory=lambda: dict(MIX))
    timeout: float = 60.0
    # transport errors and 5xx are recorded as errors and the write as unsure; with
    # tolerate_outage they are counted as refusals instead (an outage under way).
    tolerate_outage: bool = False


class Client(threading.Thread):
    def __init__(self, base: str, n: int, cfg: WorkloadConfig, ledger: Ledger, rec: Recorder,
                 stop: threading.Event):
        super().__init__(daemon=True, name=f"load-{n}")
        self.base, self.n, self.cfg, self.ledger, self.rec, self.stop_ev = base, n, cfg, ledger, rec, stop
        self.key = cfg.keys[n % len(cfg.keys)]
        self.rng = random.Random(cfg.seed * 1000 + n)
        self.live: dict[str, tuple[str, int]] = {}  # id -> (collection, version) as far as this thread knows
        self.next_id = 0
        self.refused = collections.Counter[str]()
        self.http = httpx.Client(base_url=base, timeout=cfg.timeout,
                                 headers={"Authorization": f"Bearer {self.key}"})

    # helpers
    def _new_id(self) -> tuple[str, str]:
        doc_id = f"{self.cfg.run}t{self.n}n{self.next_id}"
        coll = self.cfg.collections[self.next_id % len(self.cfg.collections)]
        self.next_id += 1
        return doc_id, coll

    def _call(self, route: str, method: str, path: str, ok: Iterable[int], **kw: Any) -> httpx.Response | None:
        t0 = time.perf_counter()
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            self._fail(route, f"{method} {path}: {type(e).__name__}: {e}", transport=True)
            return None
        dt = time.perf_counter() - t0
        if r.status_code not in ok:
            self._fail(route, f"{method} {path} -> {r.status_code} {r.text[:200]}", status=r.status_code)
            return None
        self.rec.ok(route, dt, r.status_code)
        return r

    def _fail(self, route: str, what: str, transport: bool = False, status: int = 0) -> None:
        if self.cfg.tolerate_outage and (transport or status >= 500):
            self.refused[f"{route} {'transport' if transport else status}"] += 1
            return
        self.rec.error(route, what)

    # operations
    def op_put(self) -> None:
        if self.live and self.rng.random() < 0.5:
            doc_id = self.rng.choice(list(self.live))
            coll, version = self.live[doc_id]
            version += 1
        else:
            (doc_id, coll), version = self._new_id(), 1
        body = doc_text(doc_id, version, self.rng)
        self.ledger.attempt(doc_id, coll, self.key, version, body)
        r = self._call("put", "PUT", f"/v1/collections/{coll}/docs/{doc_id}", (200, 201), json=body)
        if r is not None:
            self.ledger.ack(doc_id, version)
            self.live[doc_id] = (coll, version)

    def op_bulk(self) -> None:
        coll = self.rng.choice(self.cfg.collections)
        docs = []
        for _ in range(self.cfg.bulk_size):
            doc_id, _c = self._new_id()
            body = doc_text(doc_id, 1, self.rng)
            self.ledger.attempt(doc_id, coll, self.key, 1, body)
            docs.append({"_id": doc_id, **body})
        r = self._call("bulk", "POST", f"/v1/collections/{coll}/docs:bulk", (200,), json={"docs": docs})
        if r is None:
            return
        out = r.json()
        for item in out["results"]:
            if item["status"] in (200, 201):
                self.ledger.ack(item["_id"], 1)
                self.live[item["_id"]] = (coll, 1)
        if out["accepted"] != len(docs):
            self.rec.error("bulk", f"accepted {out['accepted']} of {len(docs)}: {json.dumps(out)[:300]}")

    def op_delete(self) -> None:
        if not self.live:
            return self.op_put()
        doc_id = self.rng.choice(list(self.live))
        coll, _v = self.live[doc_id]
        self.ledger.attempt(doc_id, coll, self.key, DELETED, None)
        r = self._call("delete", "DELETE", f"/v1/collections/{coll}/docs/{doc_id}", (200,))
        if r is not None:
            self.ledger.ack(doc_id, DELETED)
            del self.live[doc_id]

    def op_get(self) -> None:
        if not self.live:
            return self.op_read(False)
        doc_id = self.rng.choice(list(self.live))
        coll, version = self.live[doc_id]
        # a delete whose answer never came (its server killed) may have landed
        ok = (200, 404) if DELETED in self.ledger.entries[doc_id].unsure else (200,)
        r = self._call("get", "GET", f"/v1/collections/{coll}/docs/{doc_id}?include=semantic", ok)
        if r is not None and r.json().get("v") != version and not self.ledger.entries[doc_id].unsure:
            self.rec.error("get", f"read-your-writes: {doc_id} has v={r.json().get('v')}, acknowledged v={version}")

    def _query(self) -> tuple[str, str]:
        coll = self.rng.choice([*self.cfg.collections, "any"])
        q = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 3)))
        if self.live and self.rng.random() < 0.3:
            q += f" uq{self.rng.choice(list(self.live))}"
        return coll, q

    def op_read(self, sse: bool) -> None:
        coll, q = self._query()
        strategy = self.rng.choice(["keyword", "hybrid", "auto", "semantic"]) if not sse else "hybrid"
        body = {"collection": coll, "q": q, "limit": 10, "semantic": {"strategy": strategy}}
        if not sse:
            self._call("read_json", "POST", "/v1/read", (200,), json=body, headers={"Accept": "application/json"})
            return
        t0 = time.perf_counter()
        try:
            events: list[str] = []
            error: dict[str, Any] = {}
            with self.http.stream("POST", "/v1/read", json=body, headers={"Accept": "text/event-stream"}) as r:
                if r.status_code != 200:
                    self._fail("read_sse", f"{r.status_code} {r.read()[:200]!r}", status=r.status_code)
                    return
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        events.append(line[7:])
                    elif line.startswith("data: ") and events and events[-1] == "error":
                        error = json.loads(line[6:])
                        break
                    if events and events[-1] == "done":
                        break
        except httpx.HTTPError as e:
            self._fail("read_sse", f"{type(e).__name__}: {e}", transport=True)
            return
        # A stream that has started cannot change its status: a failure after `lexical` (the
        # store or broker gone mid-stream) is refused in-band, as an `error` event whose code is
        # a 5xx one. That is the same clean refusal as a 5xx answer, and counted as one.
        status = SERVER_ERROR_CODES.get(str(error.get("code")), 0)
        if events and events[0] == "lexical" and events[-1] == "error" and status:
            self._fail("read_sse", f"events {events}: {error}", status=status)
            return
        if not events or events[0] != "lexical" or events[-1] != "done":
            self.rec.error("read_sse", f"events {events}")
            return
        self.rec.ok("read_sse", time.perf_counter() - t0, 200)

    def op_admin(self) -> None:
        path = self.rng.choice(ADMIN_PATHS).format(c=self.rng.choice(self.cfg.collections))
        self._call("admin " + path.split("?")[0].rsplit("/", 1)[-1], "GET", path, (200,))

    def run(self) -> None:
        names, weights = zip(*self.cfg.mix.items(), strict=True)
        ops: dict[str, Callable[[], None]] = {
            "put": self.op_put, "bulk": self.op_bulk, "delete": self.op_delete, "get": self.op_get,
            "read_json": lambda: self.op_read(False), "read_sse": lambda: self.op_read(True), "admin": self.op_admin}
        deadline = time.monotonic() + self.cfg.duration
        done = 0
        try:
            while not self.stop_ev.is_set() and time.monotonic() < deadline:
                if self.cfg.ops_per_thread is not None and done >= self.cfg.ops_per_thread:
                    break
                ops[self.rng.choices(names, weights)[0]]()
                done += 1
        except Exception as e:  # noqa: BLE001 - a harness bug must show, not hang the run
            self.rec.error("harness", f"{type(e).__name__}: {e}")
        finally:
            self.http.close()


def run_workload(base: str, cfg: WorkloadConfig, ledger: Ledger | None = None,
                 rec: Recorder | None = None) -> tuple[Ledger, Recorder, list[Client]]:
    ledger = ledger if ledger is not None else Ledger()
    rec = rec if rec is not None else Recorder()
    stop = threading.Event()
    clients = [Client(base, n, cfg, ledger, rec, stop) for n in range(cfg.threads)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(cfg.duration + 600)
    return ledger, rec, clients


# -- verification ---------------------------------------------------------------------------


@dataclass
class Verdict:
    checked: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged, absent or another content
    resurrected: list[str] = field(default_factory=list)  # deletion acknowledged, still readable
    keyword_missing: list[str] = field(default_factory=list)  # present in the store, not found by keyword
    keyword_deleted: list[str] = field(default_factory=list)  # deleted, still returned by keyword
    semantic_missing: list[str] = field(default_factory=list)  # ready, not found by a semantic read of its text
    states: dict[str, collections.Counter[str]] = field(default_factory=dict)  # collection -> status counts
    not_ready: list[str] = field(default_factory=list)  # in an eager collection, not `ready`
    unsure_outcomes: collections.Counter[str] = field(default_factory=collections.Counter)

    def ok(self) -> bool:
        return not (self.lost or self.resurrected or self.keyword_missing or self.keyword_deleted
                    or self.semantic_missing or self.not_ready)

    def summary(self) -> dict[str, Any]:
        return {"checked": self.checked, "lost": len(self.lost), "resurrected": len(self.resurrected),
                "keyword_missing": len(self.keyword_missing), "keyword_deleted": len(self.keyword_deleted),
                "semantic_missing": len(self.semantic_missing), "not_ready": len(self.not_ready),
                "states": {c: dict(s) for c, s in self.states.items()},
                "unsure_outcomes": dict(self.unsure_outcomes),
                "examples": {"lost": self.lost[:5], "resurrected": self.resurrected[:5],
                             "keyword_missing": self.keyword_missing[:5], "keyword_deleted": self.keyword_deleted[:5],
                             "semantic_missing": self.semantic_missing[:5], "not_ready": self.not_ready[:5]}}


def _h(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def wait_settled(base: str, ledger: Ledger, eager: set[str], timeout: float,
                 lazy_states: Iterable[str] = ("none", "ready"), stall: float = 10.0) -> None:
    """Wait until every live document of an eager collection is `ready` and every other is in
    `lazy_states` (coverage per collection and key); give up after `timeout`, or once the
    coverage has not changed for `stall` seconds (stuck: the verifier reports what is not)."""
    want: set[tuple[str, str]] = set()
    for e in ledger.entries.values():
        if isinstance(e.acked, int) or any(isinstance(s, int) for s in e.unsure):
            want.add((e.key, e.collection))
    deadline = time.monotonic() + timeout
    last: object = None
    since = time.monotonic()
    with httpx.Client(base_url=base, timeout=30) as http:
        while time.monotonic() < deadline:
            settled = True
            seen = []
            for key, coll in sorted(want):
                cov = http.get(f"/semantic/coverage?collection={coll}", headers=_h(key)).json()
                states = cov.get("states", {})
                seen.append(sorted(states.items()))
                if coll in eager:
                    settled &= states.get("ready", 0) == cov.get("total", -1)
                else:
                    settled &= sum(states.get(s, 0) for s in lazy_states) == cov.get("total", -1)
            if settled:
                return
            if seen != last:
                last, since = seen, time.monotonic()
            elif time.monotonic() - since > stall:
                return
            time.sleep(0.5)


def verify(base: str, ledger: Ledger, eager: set[str], semantic_sample: int = 50, keyword_limit: int | None = None,
           seed: int = 7) -> Verdict:
    """Read back every document the ledger knows: each acknowledged one present with its last
    acknowledged content (or, after an unsure write, one of the contents it may hold), each
    acknowledged deletion absent; a keyword read of each live document's version token finds
    it; a semantic read of the text of a sample of `ready` ones finds them; in `eager`
    collections every live document is `ready`."""
    v = Verdict()
    rng = random.Random(seed)
    present: dict[str, tuple[Entry, int, str]] = {}  # id -> entry, version found, status
    with httpx.Client(base_url=base, timeout=60) as http:
        for doc_id, e in ledger.entries.items():
            if e.acked == "never" and not any(isinstance(s, int) for s in e.unsure):
                continue
            v.checked += 1
            r = http.get(f"/v1/collections/{e.collection}/docs/{doc_id}?include=semantic", headers=_h(e.key))
            if r.status_code not in (200, 404):
                v.lost.append(f"{doc_id}: GET answered {r.status_code} {r.text[:200]}")
                continue
            got: State = r.json().get("v") if r.status_code == 200 else DELETED
            possible = ledger.possible(doc_id)
            if e.unsure:
                v.unsure_outcomes["last acknowledged" if got == e.acked
                                  else "never written" if got is DELETED and e.acked == "never"
                                  else "unsure write applied" if got in e.unsure else "other"] += 1
            if got not in possible and not (e.acked == "never" and got is DELETED):
                (v.resurrected if e.acked is DELETED else v.lost).append(
                    f"{doc_id} ({e.collection}): found {got}, acknowledged {e.acked}, "
                    f"unsure {sorted(map(str, e.unsure))}")
            if got is not None:
                status = r.json().get("__semantic", {}).get("status", "?")
                present[doc_id] = (e, int(got), status)
                v.states.setdefault(e.collection, collections.Counter())[status] += 1
                if e.collection in eager and status != "ready":
                    v.not_ready.append(f"{doc_id} ({e.collection}): {status}")
        # keyword: each live document by the token of the version it holds
        ids = list(present)
        if keyword_limit is not None and len(ids) > keyword_limit:
            ids = rng.sample(ids, keyword_limit)
        for doc_id in ids:
            e, ver, _s = present[doc_id]
            r = http.post("/v1/read", headers={**_h(e.key), "Accept": "application/json"},
                          json={"collection": e.collection, "q": f"{doc_id}v{ver}", "limit": 5,
                                "semantic": {"strategy": "keyword"}})
            if r.status_code != 200 or doc_id not in [x["id"] for x in r.json()["results"]]:
                v.keyword_missing.append(f"{doc_id} v{ver} ({e.collection}): {r.status_code} {r.text[:150]}")
        # keyword: deleted documents are not returned
        gone = [d for d, e in ledger.entries.items() if e.acked is DELETED and not e.unsure]
        for doc_id in rng.sample(gone, min(len(gone), keyword_limit or len(gone))):
            e = ledger.entries[doc_id]
            r = http.post("/v1/read", headers={**_h(e.key), "Accept": "application/json"},
                          json={"collection": e.collection, "q": f"uq{doc_id}", "limit": 5,
                                "semantic": {"strategy": "keyword"}})
            if r.status_code != 200 or doc_id in [x["id"] for x in r.json()["results"]]:
                v.keyword_deleted.append(f"{doc_id}: {r.status_code} {r.text[:150]}")
        # semantic: a sample of ready documents, by their own text
        ready = [d for d, (_e, _v, s) in present.items() if s == "ready"]
        for doc_id in rng.sample(ready, min(semantic_sample, len(ready))):
            e, ver, _s = present[doc_id]
            text = e.texts.get(ver)
            if text is None:
                continue
            r = http.post("/v1/read", headers={**_h(e.key), "Accept": "application/json"},
                          json={"collection": e.collection, "q": f"{text['title']}\n\n{text['body']}", "limit": 20,
                                "semantic": {"strategy": "semantic"}})
            if r.status_code != 200 or doc_id not in [x["id"] for x in r.json()["results"]]:
                v.semantic_missing.append(f"{doc_id} v{ver} ({e.collection}): {r.status_code} {r.text[:150]}")
    return v


def mismatch(base: str, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=base, timeout=60) as http:
        return {k: http.get("/semantic/mismatch", headers=_h(k)).json() for k in keys}
