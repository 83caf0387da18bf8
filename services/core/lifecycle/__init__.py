"""The lifecycle scheduler, the other half of lazy embedding: a domain service the embedded
process (a daemon thread per API process) and the Celery workers (beat tasks) both run. One
module per concern; `Lifecycle` (scheduler.py) combines them and runs the tick."""

from services.core.lifecycle.model import DocLifecycle, LifecycleConfig, TickReport
from services.core.lifecycle.scheduler import Lifecycle

__all__ = ["DocLifecycle", "Lifecycle", "LifecycleConfig", "TickReport"]
