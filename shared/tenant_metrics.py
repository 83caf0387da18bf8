"""Tenant-labelled series of the agent tools' metrics, for operators who watch or bill tenants.

The general `/metrics` never carries a tenant label: a label per tenant multiplies every series
by the number of tenants, and anyone who may scrape would learn who the tenants are. The
extract_key_info operators' dashboards, though, expect `tool_calls_total`,
`embedding_latency_seconds` and `bm25_latency_seconds` labelled by tenant. Both hold: with
VIBE_MCP_TENANT_METRICS on, those three names with a `tenant` label live in a registry of their
own, served at `GET /metrics/tenants` (behind the same metrics token as `/metrics`), and
nowhere else. The label is

- `hashed`: the first 16 hex digits of blake3(tenant), a pseudonym a dashboard can show without
  naming the tenant (an operator recomputes it from a tenant name; it is not a secret);
- `name`: the tenant itself.

At most VIBE_MCP_TENANT_METRICS_MAX_TENANTS distinct labels per process; later tenants are
counted under `_other`, so one process's series stay bounded whatever the number of tenants.
"""

from __future__ import annotations

import threading

import blake3
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from shared.config import Settings

OTHER = "_other"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def pseudonym(tenant: str) -> str:
    return blake3.blake3(tenant.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class TenantMetrics:
    def __init__(self) -> None:
        self.mode = "off"
        self.max_tenants = 1_000
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        self.tool_calls = Counter("tool_calls_total", "MCP tool calls, by tenant", ["tool", "outcome", "tenant"],
                                  registry=self.registry)
        self.embedding_latency = Histogram("embedding_latency_seconds", "Embedding time inside an MCP tool call, "
                                           "by tenant", ["tool", "stage", "tenant"], buckets=_BUCKETS,
                                           registry=self.registry)
        self.bm25_latency = Histogram("bm25_latency_seconds", "Lexical (BM25) time inside an MCP tool call, by "
                                      "tenant", ["tool", "tenant"], buckets=_BUCKETS, registry=self.registry)

    def configure(self, s: Settings) -> None:
        self.mode = s.mcp_tenant_metrics
        self.max_tenants = s.mcp_tenant_metrics_max_tenants

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def label(self, tenant: str) -> str:
        value = pseudonym(tenant) if self.mode == "hashed" else tenant[:128]
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.max_tenants:
                return OTHER
            self._seen.add(value)
            return value

    def tool_call(self, tool: str, outcome: str, tenant: str | None) -> None:
        if self.enabled and tenant is not None:
            self.tool_calls.labels(tool=tool[:64], outcome=outcome, tenant=self.label(tenant)).inc()

    def embedding(self, tool: str, stage: str, tenant: str, seconds: float) -> None:
        if self.enabled:
            self.embedding_latency.labels(tool=tool, stage=stage, tenant=self.label(tenant)).observe(seconds)

    def bm25(self, tool: str, tenant: str, seconds: float) -> None:
        if self.enabled:
            self.bm25_latency.labels(tool=tool, tenant=self.label(tenant)).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


TENANT_METRICS = TenantMetrics()
