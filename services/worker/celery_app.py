"""Placeholder (issue #3): the Celery worker and beat are not built yet."""

from __future__ import annotations

from shared.config import Settings


def run_worker(settings: Settings, concurrency: int | None) -> None:
    raise SystemExit("the Celery worker is not built yet (issue #3)")


def run_scheduler(settings: Settings) -> None:
    raise SystemExit("the Celery scheduler is not built yet (issue #3)")
