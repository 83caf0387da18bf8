"""Background reindex jobs (Rifflux's `reindex(background=true)`): the call answers with a
`job_id` at once and `reindex_status(job_id)` reports `queued` → `running` → `done` (with the
reindex answer) or `failed` (with the error body).

One worker thread per process runs the jobs in order, so background reindexes never compete
with each other for the embedder. Jobs live in this process's memory: a job started through
one API replica is reported by that replica, and a restart forgets them (the indexed chunks
stay). A job belongs to the identity that started it; another identity asking for its id gets
`not_found`, the same answer as for an id that never existed. At most KEEP finished jobs per
process are remembered. Each tenant may have at most VIBE_MCP_REINDEX_JOBS_PER_TENANT jobs
queued or running; one more is refused with `quota_exceeded`, saying so.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from services.mcp.errors import QUOTA_EXCEEDED, ToolFailure
from shared.errors import ErrorCode, VibeError

KEEP = 1000


class Jobs:
    def __init__(self, per_tenant: int = 0) -> None:
        self._jobs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._owners: dict[str, str] = {}
        self._tenants: dict[str, str] = {}  # job id -> tenant, while it is queued or running
        # Jobs of one tenant queued or running at once (0: no bound). The one worker runs jobs in
        # order, so without it one tenant could queue enough to hold every other tenant's
        # background reindex back for as long as it liked.
        self.per_tenant = per_tenant
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-reindex")

    def submit(self, owner: str, kind: str, work: Callable[[], dict[str, Any]],
               tenant: str | None = None) -> dict[str, Any]:
        job_id = secrets.token_hex(12)
        rec = {"job_id": job_id, "kind": kind, "status": "queued", "submitted_at": time.time()}
        with self._lock:
            if tenant is not None:
                waiting = sum(1 for t in self._tenants.values() if t == tenant)
                if self.per_tenant and waiting >= self.per_tenant:
                    raise ToolFailure(QUOTA_EXCEEDED, f"this tenant has {waiting} background {kind} jobs queued or "
                                      f"running (the limit is {self.per_tenant}); wait for one to finish "
                                      "(reindex_status) or run it without background")
                self._tenants[job_id] = tenant
            self._jobs[job_id], self._owners[job_id] = rec, owner
            self._trim()
        self._pool.submit(self._run, job_id, work)
        return dict(rec)

    def _run(self, job_id: str, work: Callable[[], dict[str, Any]]) -> None:
        self._set(job_id, status="running", started_at=time.time())
        try:
            result = work()
        except ToolFailure as e:
            self._set(job_id, status="failed", finished_at=time.time(), **e.body())
        except VibeError as e:
            self._set(job_id, status="failed", finished_at=time.time(), **ToolFailure.of(e).body())
        except Exception:  # noqa: BLE001 - a job's crash is reported, never raised into the pool
            err = ToolFailure(ErrorCode.INTERNAL_ERROR.code, "internal error")
            self._set(job_id, status="failed", finished_at=time.time(), **err.body())
        else:
            self._set(job_id, status="done", finished_at=time.time(), result=result)

    def _set(self, job_id: str, **fields: Any) -> None:
        with self._lock:
            if job_id in self._jobs:
                self._jobs[job_id].update(fields)
            if fields.get("status") in ("done", "failed"):
                self._tenants.pop(job_id, None)

    def _trim(self) -> None:
        finished = [j for j, r in self._jobs.items() if r["status"] in ("done", "failed")]
        for j in finished[: max(0, len(self._jobs) - KEEP)]:
            del self._jobs[j]
            self._owners.pop(j, None)

    def status(self, owner: str, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            rec = self._jobs.get(job_id)
            return dict(rec) if rec is not None and self._owners.get(job_id) == owner else None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
