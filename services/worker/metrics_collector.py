"""The collector behind a worker's /metrics. Imported only once the multiprocess mode is chosen
(services/worker/metrics_server.py), since importing prometheus_client fixes the mode."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# Gauges whose value lives in the API process (computed on scrape there, or planner state); a
# worker never sets them, so its files hold only zeros that would read as real values.
API_ONLY = frozenset({"vibe_queue_depth", "vibe_celery_broker_messages", "vibe_explain_cache_entries",
                      "vibe_explain_records", "vibe_index_follower_lag_changes"})


class WorkerCollector(Collector):
    """Every process's files summed (each Gauge as its `multiprocess_mode` says), minus the
    API-only gauges."""

    def __init__(self, path: Path):
        self._inner = MultiProcessCollector(None, path=str(path))

    def collect(self) -> Iterable[Metric]:
        return (m for m in self._inner.collect() if m.name not in API_ONLY)
