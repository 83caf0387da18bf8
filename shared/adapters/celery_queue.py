"""Placeholder for the distributed-profile adapter (issue #3): choosing it fails at start-up
with a clear message instead of silently running something else."""

from __future__ import annotations

from shared.config import Settings
from shared.ports import JobQueue


class CeleryQueue:
    @classmethod
    def from_settings(cls, settings: Settings) -> JobQueue:
        raise RuntimeError("VIBE_QUEUE=celery: this adapter is not built yet (issue #3)")
