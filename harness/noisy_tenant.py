"""Two tenants on one served instance: tenant A runs every admin action at its limits while
tenant B reads and writes. Shared by the guarantee test (tests/integration/test_noisy_tenant.py:
B's answers stay correct and complete) and `bench/noisy_tenant.py` (B's latency, A idle vs
noisy). A's own refusals (429, 413, a migration refused while one runs) are its business: they
are counted, never failures."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

NOISY, QUIET = "k-noisy", "k-quiet"
KEYS = [
    {"key": NOISY, "tenant": "ta", "principals": ["user:a"], "scopes": ["read", "write", "admin"]},
    {"key": QUIET, "tenant": "tb", "principals": ["user:b"], "scopes": ["read", "write", "admin"]},
]
# The bounds every limit below is measured against (set on the server; small, so a test can
# reach them quickly: the point is A at the bound, not the bound's size)
MAX_BULK_DOCS, MAX_DOC_BYTES, MAX_LIMIT, MAX_K = 200, 4096, 100, 500
ENV = {"VIBE_MAX_BULK_DOCS": str(MAX_BULK_DOCS), "VIBE_MAX_DOC_BYTES": str(MAX_DOC_BYTES),
       "VIBE_MAX_LIMIT": str(MAX_LIMIT), "VIBE_MAX_K": str(MAX_K), "VIBE_PER_TENANT_PER_MIN": "100000",
       "VIBE_BACKPRESSURE_QUEUE_DEPTH": "300", "VIBE_TOUCH_BACKPRESSURE_QUEUE_DEPTH": "600",
       "VIBE_TENANT_QUEUE_MAX": "100", "VIBE_SCHEDULER_INTERVAL_SECONDS": "1"}
# Every request one token, whatever it asks for (a flat rate limit, blind to cost): tenant A is
# then as loud as its bounds allow, not as its rate allows, which is what the guarantee test and
# `bench noisy-tenant --cost flat` measure the other isolations against.
FLAT_COST = {"VIBE_RATE_COST_BODY_BYTES": str(10**12), "VIBE_RATE_COST_READ_CANDIDATES": str(10**12),
             "VIBE_RATE_COST_BACKFILL": "0"}
WORDS = ["turbine", "blade", "cooling", "film", "holes", "thermal", "barrier", "coating", "wing", "flutter", "gust",
         "loads", "propeller", "gearbox", "lubrication", "seal", "hydraulic", "pump", "valve", "actuator", "fatigue",
         "crack", "growth", "inspection"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def noisy_doc(rng: random.Random, i: int) -> dict[str, Any]:
    """A document just under the size bound (JSON-encoded, as the server measures it)."""
    return {"_id": f"n{i}", "title": _text(rng, 6), "body": _text(rng, MAX_DOC_BYTES // 4)[:MAX_DOC_BYTES - 200]}


@dataclass
class Noise:
    """Tenant A's load: threads doing the admin actions, bulks and reads at their bounds until
    `stop()`. `answers` counts A's statuses by action (for the record)."""

    base: str
    threads: int = 1  # of each kind
    answers: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _running: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for kind in (self._bulks, self._admin, self._reads):
            for i in range(self.threads):
                t = threading.Thread(target=self._loop, args=(kind, i), daemon=True, name=f"noise-{kind.__name__}")
                t.start()
                self._running.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._running:
            t.join(120)

    def _loop(self, kind: Callable[[httpx.Client, random.Random, int], None], seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.base, timeout=120, headers={"Authorization": f"Bearer {NOISY}"}) as http:
            n = 0
            while not self._stop.is_set():
                try:
                    kind(http, rng, n)
                except httpx.HTTPError as e:  # a timeout under its own load is A's business
                    self.answers[f"error:{type(e).__name__}"] += 1
                n += 1

    def _count(self, what: str, r: httpx.Response) -> None:
        self.answers[f"{what}:{r.status_code}"] += 1

    def _bulks(self, http: httpx.Client, rng: random.Random, n: int) -> None:
        """Bulks at the document-count and document-size bounds, into a collection kept eager."""
        docs = [noisy_doc(rng, (n * MAX_BULK_DOCS + i) % 5000) for i in range(MAX_BULK_DOCS)]
        self._count("bulk", http.post("/v1/collections/noise/docs:bulk", json={"docs": docs}))

    def _admin(self, http: httpx.Client, rng: random.Random, n: int) -> None:
        """Promotion (eager backfill), reindex, evict everything, demote, a space migration."""
        step = n % 6
        if step == 0:
            self._count("promote", http.post("/semantic/promote", json={"collection": "noise"}))
        elif step == 1:
            self._count("reindex", http.post("/semantic/reindex", json={"collection": "noise"}))
        elif step == 2:
            self._count("evict", http.post("/semantic/evict", json={"collection": "noise", "idleSeconds": 0}))
        elif step == 3:
            self._count("spaces", http.post("/semantic/spaces", json={"space": f"alt{n % 2}", "model": "hash:v1@16"}))
        elif step == 4:
            self._count("coverage", http.get("/semantic/coverage", params={"collection": "noise"}))
        else:
            self._count("demote", http.request("DELETE", "/semantic/promote", params={"collection": "noise"}))

    def _reads(self, http: httpx.Client, rng: random.Random, n: int) -> None:
        """Reads at the result and candidate bounds, over every collection of the tenant."""
        body = {"collection": "any", "q": _text(rng, 3), "limit": MAX_LIMIT,
                "semantic": {"strategy": "hybrid", "k": MAX_K}}
        self._count("read", http.post("/v1/read", json=body, headers={"Accept": "application/json"}))


@dataclass
class Probe:
    """Tenant B's traffic: a write, then reads that must find exactly it. `check` raises on any
    wrong answer; the latencies are kept for the benchmark."""

    http: httpx.Client
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    write_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)

    def round(self, i: int, tag: str) -> None:
        token = f"quiet{tag}{i}x"
        doc = {"title": f"note {i}", "body": f"{token} {_text(self.rng, 30)}"}
        started = time.perf_counter()
        w = self.http.put(f"/v1/collections/quiet/docs/{tag}{i}", json=doc)
        self.write_ms.append((time.perf_counter() - started) * 1000)
        assert w.status_code in (200, 201), (w.status_code, w.text)
        got = self.http.get(f"/v1/collections/quiet/docs/{tag}{i}")
        assert got.status_code == 200 and got.json()["body"] == doc["body"], got.text
        body = {"collection": "quiet", "q": token, "limit": 10, "semantic": {"strategy": "keyword"}}
        started = time.perf_counter()
        r = self.http.post("/v1/read", json=body, headers={"Accept": "application/json"})
        self.read_ms.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 200, (r.status_code, r.text)
        assert [h["id"] for h in r.json()["results"]] == [f"{tag}{i}"], r.json()
        wide = self.http.post("/v1/read", json={"collection": "any", "q": _text(self.rng, 3), "limit": 20,
                                                 "semantic": {"strategy": "hybrid"}},
                              headers={"Accept": "application/json"})
        assert wide.status_code == 200, (wide.status_code, wide.text)
        hits = wide.json()["results"]
        assert all(h["collection"] == "quiet" for h in hits), hits  # never tenant A's "noise"
        assert wide.json()["diagnostics"]["semantic"]["backpressureLimited"] == 0, wide.json()["diagnostics"]


def quiet_client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {QUIET}"})
