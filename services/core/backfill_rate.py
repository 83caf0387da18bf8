"""A backfill's recent rate and its time to finish, for the admin views.

Samples are (the task's last step time, documents examined by then) as the store records them, so
every process that shows or steps a task (API replicas, Celery workers) measures the same thing
whatever its own clock. The rate is taken over the newest `window` seconds of samples this process
saw; with a single sample (a process that has just started, nobody polling) it is the task's
average since it started. Bounded: at most `max_tasks` tasks and `max_samples` samples each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from shared.model import BackfillTask

WINDOW_SECONDS = 60.0


class BackfillRates:
    def __init__(self, window: float = WINDOW_SECONDS, max_tasks: int = 1000, max_samples: int = 256):
        self.window = window
        self.max_tasks = max_tasks
        self.max_samples = max_samples
        self._samples: OrderedDict[str, deque[tuple[float, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, task: BackfillTask) -> None:
        with self._lock:
            got = self._samples.get(task.id)
            if got is None:
                got = self._samples[task.id] = deque(maxlen=self.max_samples)
                while len(self._samples) > self.max_tasks:
                    self._samples.popitem(last=False)
            self._samples.move_to_end(task.id)
            if not got or task.updated_at > got[-1][0]:
                got.append((task.updated_at, task.examined))
            while len(got) > 2 and got[1][0] <= task.updated_at - self.window:
                got.popleft()  # keep one sample at or before the window's start

    def rate(self, task: BackfillTask) -> float | None:
        """Documents examined per second lately (None: not measurable yet)."""
        with self._lock:
            got = list(self._samples.get(task.id, ()))
        if len(got) >= 2 and got[-1][0] > got[0][0]:
            (t0, n0), (t1, n1) = got[0], got[-1]
            return max(0.0, (n1 - n0) / (t1 - t0))
        took = task.updated_at - task.created_at
        return task.examined / took if took > 0 else None

    def figures(self, task: BackfillTask) -> dict[str, float | None]:
        """`docsPerSecond` and `etaSeconds` of a task as the admin views show them: a finished
        task has no time left, a cancelled one none to show; a running one with no measurable rate, no estimate."""
        self.observe(task)
        rate = self.rate(task)
        if task.state != "running":
            eta: float | None = 0.0 if task.state == "done" else None
        elif rate:
            eta = round(max(0, task.total - task.examined) / rate, 1)
        else:
            eta = None
        return {"docsPerSecond": None if rate is None else round(rate, 2), "etaSeconds": eta}


RATES = BackfillRates()  # the process's samples: the steps it runs and the views it serves feed it
