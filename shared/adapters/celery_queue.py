"""Job queue on Celery + Redis (distributed profile): the producer side behind `JobQueue`.

- Lanes: interactive on-touch jobs go to `vibe.interactive`, everything else to `vibe.bulk`.
  Workers poll the lanes strictly in order (kombu's `priority` queue order) and take one
  message at a time (prefetch 1), so an interactive job waits at most for the batches already
  running, never behind a reindex backlog.
- Batching: one Celery message carries up to `embed_batch_size` jobs; the worker embeds them
  in one provider call.
- Dedupe: a pending job key `{docId, space, contentHash}` is a member of a per-tenant sorted
  set (score = enqueue time); enqueue adds with a Lua script only if absent, workers remove it
  when the job is finished. The same sets give the per-tenant queue depth without a counter
  that could drift. A member older than `job_dedupe_ttl_seconds` no longer blocks (a message
  lost together with its worker), and the reconciler re-enqueues such jobs.
- Redis down: enqueue returns 0 and never raises. The sidecar row already says `queued` in
  the store (the system of record), and the reconciler re-enqueues it once Redis is back.
- `on_done`: workers publish finished keys on a pub/sub channel; a listener thread turns them
  into callbacks (faster stream wake-ups). Optional: streams also poll the store.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from shared.adapters.redis_budget import REDIS_ERRORS, RedisOutage, redis_client
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import DocKey, EmbedJob

log = logging.getLogger("vibe.queue")

EMBED_TASK = "vibe.embed"
RECONCILE_TASK = "vibe.reconcile"
LIFECYCLE_TASK = "vibe.lifecycle"  # the scheduler tick (services/worker/lifecycle.py)
BACKFILL_TASK = "vibe.backfill"  # backfill steps (services/worker/backfill.py)
QUEUES = {"interactive": "vibe.interactive", "bulk": "vibe.bulk", "control": "vibe.control"}
LANES = ("interactive", "bulk")
DONE_CHANNEL = "vibe:jobs:done"
TOTALS_KEY = "vibe:pending:totals"
RECONCILE_KEY = "vibe:reconcile:"
SEP = "\x1f"

# KEYS: pending zset interactive, pending zset bulk, totals hash. ARGV: ttl, lane, members...
# Returns the members added. A job pending in the interactive lane covers both lanes; one
# pending only in bulk does not stop an interactive enqueue (it must not wait behind bulk).
_ENQUEUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local ttl, lane = tonumber(ARGV[1]), ARGV[2]
for i, k in ipairs({KEYS[1], KEYS[2]}) do
  local n = redis.call('ZREMRANGEBYSCORE', k, '-inf', now - ttl)
  if n > 0 then redis.call('HINCRBY', KEYS[3], i == 1 and 'interactive' or 'bulk', -n) end
end
local mine = (lane == 'interactive') and KEYS[1] or KEYS[2]
local added = {}
for i = 3, #ARGV do
  local m = ARGV[i]
  local dup = redis.call('ZSCORE', KEYS[1], m)
  if (not dup) and lane == 'bulk' then dup = redis.call('ZSCORE', KEYS[2], m) end
  if not dup then
    redis.call('ZADD', mine, now, m)
    added[#added + 1] = m
  end
end
if #added > 0 then redis.call('HINCRBY', KEYS[3], lane, #added) end
return added
"""

# KEYS as above. ARGV: members. Removing is idempotent, so a redelivered task cannot drive
# the totals negative.
_FINISH = """
local removed = 0
for i, k in ipairs({KEYS[1], KEYS[2]}) do
  local n = 0
  for j = 1, #ARGV do n = n + redis.call('ZREM', k, ARGV[j]) end
  if n > 0 then redis.call('HINCRBY', KEYS[3], i == 1 and 'interactive' or 'bulk', -n) end
  removed = removed + n
end
return removed
"""


def celery_config(s: Settings) -> dict[str, Any]:
    """One Celery configuration for producers (API), workers and beat."""
    timeout = s.redis_timeout_seconds
    return {
        "broker_url": s.redis_url,
        "result_backend": s.redis_url,
        "task_ignore_result": True,  # job state lives in the sidecar, not in Celery results
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,  # a message is acked only after the batch is committed
        "task_reject_on_worker_lost": True,  # a killed pool process puts its batch back
        "worker_prefetch_multiplier": 1,  # no batch waits in a busy worker's buffer
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_queues": [Queue(q, Exchange(q), routing_key=q) for q in QUEUES.values()],
        "task_default_queue": QUEUES["bulk"],
        "task_publish_retry": False,  # the read/write path never waits on a dead broker
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # workers wait for the broker to come back
        "broker_transport_options": {
            "visibility_timeout": s.celery_visibility_timeout,
            "queue_order_strategy": "priority",  # poll lanes in the configured order
            "unacked_restore_interval": s.celery_restore_interval,
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": timeout,
            "socket_timeout": max(timeout, 5.0),  # BRPOP polls for 1 s; must outlast that
        },
        "worker_hijack_root_logger": False,
        "beat_scheduler": "celery.beat:Scheduler",  # in memory: no schedule file in the data dir
        "beat_schedule": {
            "reconcile": {
                "task": RECONCILE_TASK,
                "schedule": s.reconcile_interval_seconds,
                "options": {"queue": QUEUES["control"], "expires": max(s.reconcile_interval_seconds, 1.0)},
            },
            # Promotion, eviction and pruning run on whichever worker takes the message, under a
            # store lease: one leader even if two beats run by mistake.
            "lifecycle": {
                "task": LIFECYCLE_TASK,
                "schedule": s.scheduler_interval_seconds,
                "options": {"queue": QUEUES["control"], "expires": max(s.scheduler_interval_seconds, 1.0)},
            },
            "backfill": {
                "task": BACKFILL_TASK,
                "schedule": s.backfill_interval_seconds,
                "options": {"queue": QUEUES["control"], "expires": max(s.backfill_interval_seconds, 1.0)},
            },
        },
    }


def make_celery(s: Settings) -> Celery:
    app = Celery("vibe")
    app.conf.update(celery_config(s))
    return app


def encode(j: EmbedJob) -> list[object]:
    return [j.key.tenant, j.key.collection, j.key.doc_id, j.space, j.content_hash, j.priority, j.attempt, j.fresh,
            j.purpose]


def decode(raw: Sequence[Any]) -> EmbedJob:
    t, c, d, space, h, prio, attempt, *rest = raw  # messages from before `fresh` have 7 items, `purpose` 8
    purpose = str(rest[1]) if len(rest) > 1 else "touch"
    return EmbedJob(DocKey(str(t), str(c), str(d)), str(space), str(h), prio, int(attempt), bool(rest and rest[0]),
                    purpose)


def member(j: EmbedJob) -> str:
    return SEP.join((j.key.collection, j.key.doc_id, j.space, j.content_hash))


def pending_keys(tenant: str) -> list[str]:
    return [f"vibe:pending:{lane}:{tenant}" for lane in LANES] + [TOTALS_KEY]


def _by(jobs: Sequence[EmbedJob], fn: Callable[[EmbedJob], Any]) -> dict[Any, list[EmbedJob]]:
    out: dict[Any, list[EmbedJob]] = {}
    for j in jobs:
        out.setdefault(fn(j), []).append(j)
    return out


def _chunks(jobs: list[EmbedJob], n: int) -> Iterator[list[EmbedJob]]:
    for i in range(0, len(jobs), max(1, n)):
        yield jobs[i : i + n]


class CeleryQueue:
    def __init__(self, app: Celery, client: Any, settings: Settings):
        self.app = app
        self.redis = client
        self.batch_size = settings.embed_batch_size
        self.ttl = settings.job_dedupe_ttl_seconds
        self.pubsub = settings.queue_pubsub
        self.outage = RedisOutage("queue", settings.redis_down_backoff_seconds)
        self._enqueue_script = client.register_script(_ENQUEUE)
        self._finish_script = client.register_script(_FINISH)
        self._callbacks: list[Callable[[list[DocKey]], None]] = []
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._totals: tuple[float, dict[str, int]] = (0.0, {})

    @classmethod
    def from_settings(cls, settings: Settings, app: Celery | None = None) -> CeleryQueue:
        return cls(app or make_celery(settings), redis_client(settings), settings)

    # -- producer ----------------------------------------------------------------------

    def check_ready(self) -> None:
        """The broker answers a ping (bounded by VIBE_REDIS_TIMEOUT_SECONDS)."""
        self.redis.ping()

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        """Send the jobs not already pending; 0 (never an exception) while Redis is down."""
        if not jobs:
            return 0
        if self.outage.down:
            METRICS.enqueue_errors.inc(len(jobs))
            return 0
        sent = 0
        for lane, lane_jobs in _by(jobs, lambda j: j.priority).items():
            sent += self._enqueue_lane(lane, lane_jobs)
        return sent

    def _enqueue_lane(self, lane: str, jobs: list[EmbedJob]) -> int:
        try:
            fresh = self._claim(lane, jobs)
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            METRICS.enqueue_errors.inc(len(jobs))
            return 0
        METRICS.jobs_deduped.inc(len(jobs) - len(fresh))
        sent = self.send(fresh)
        if sent:
            METRICS.jobs_queued.labels(priority=lane).inc(sent)
        return sent

    def _claim(self, lane: str, jobs: list[EmbedJob]) -> list[EmbedJob]:
        """Mark job keys pending (Lua, per tenant); returns the jobs that were not."""
        fresh: list[EmbedJob] = []
        for tenant, tj in _by(jobs, lambda j: j.key.tenant).items():
            by_member = {member(j): j for j in tj}
            added = self._enqueue_script(keys=pending_keys(tenant), args=[self.ttl, lane, *by_member])
            fresh += [by_member[m.decode() if isinstance(m, bytes) else m] for m in added]
        return fresh

    def send(self, jobs: Sequence[EmbedJob], countdown: float | None = None) -> int:
        """Publish already-claimed jobs in batches (also used by workers for retries). On a
        broker error the claims are released, so the reconciler can re-enqueue at once."""
        done: set[tuple[str, ...]] = set()
        for (lane, _space), group in _by(jobs, lambda j: (j.priority, j.space)).items():
            for chunk in _chunks(group, self.batch_size):
                try:
                    self.app.send_task(EMBED_TASK, args=[[encode(j) for j in chunk]], queue=QUEUES[lane],
                                       countdown=countdown, retry=False)
                except Exception as e:  # kombu raises transport-specific errors; none may reach a read
                    self.outage.failed(e)
                    unsent = [j for j in jobs if j.job_key not in done]
                    METRICS.enqueue_errors.inc(len(unsent))
                    self.release(unsent)
                    return len(done)
                done.update(j.job_key for j in chunk)
        self.outage.ok()
        return len(done)

    # -- worker side -------------------------------------------------------------------

    def release(self, jobs: Sequence[EmbedJob]) -> int:
        """Jobs finished (or given up): their keys stop being pending. Best effort."""
        removed = 0
        try:
            for tenant, tj in _by(jobs, lambda j: j.key.tenant).items():
                removed += int(self._finish_script(keys=pending_keys(tenant), args=[member(j) for j in tj]))
        except REDIS_ERRORS as e:
            self.outage.failed(e)
        return removed

    def announce(self, keys: Sequence[DocKey]) -> None:
        if not (self.pubsub and keys):
            return
        try:
            self.redis.publish(DONE_CHANNEL, json.dumps([list(k) for k in keys]))
        except REDIS_ERRORS as e:
            self.outage.failed(e)

    def pending_job_keys(self, tenant: str) -> set[tuple[str, ...]] | None:
        """`EmbedJob.job_key`s pending for a tenant (/semantic/mismatch compares them with
        the sidecar rows that say `queued`); None when Redis cannot be asked."""
        keys = pending_keys(tenant)[:2]
        try:
            raw = [m.decode() for k in keys for m in self.redis.zrange(k, 0, -1)]
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return None
        return {(tenant, *m.split(SEP)) for m in raw}

    # -- reconciler support --------------------------------------------------------------

    def try_lock(self, name: str, token: str, ttl_ms: int) -> bool:
        try:
            return bool(self.redis.set(name, token, nx=True, px=ttl_ms))
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return False

    def record_reconcile(self, tenant: str | None, at: float, stuck: int, requeued: int) -> None:
        """The last run (global: time only) and, per tenant, what it found for that tenant."""
        key = RECONCILE_KEY + (f"tenant:{tenant}" if tenant is not None else "last")
        try:
            self.redis.hset(key, mapping={"at": at, "stuck": stuck, "requeued": requeued})
            self.redis.expire(key, 7 * 86_400)
        except REDIS_ERRORS as e:
            self.outage.failed(e)

    def reconcile_report(self, tenant: str) -> dict[str, object]:
        """For /semantic/lag: when the reconciler last ran, and what it last found for this
        tenant (other tenants' numbers are never shown)."""
        try:
            last = self.redis.hgetall(RECONCILE_KEY + "last")
            mine = self.redis.hgetall(RECONCILE_KEY + f"tenant:{tenant}")
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return {"reachable": False}
        out: dict[str, object] = {"reachable": True, "lastRunAt": float(last[b"at"]) if last else None}
        if mine:
            out.update(lastFoundAt=float(mine[b"at"]), stuckFound=int(mine[b"stuck"]),
                       requeued=int(mine[b"requeued"]))
        return out

    # -- depth and metrics -------------------------------------------------------------

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        """Pending jobs (waiting, running or waiting for a retry) by lane. `unreachable` is
        set when Redis could not be asked."""
        try:
            if tenant is None:
                raw = self.redis.hgetall(TOTALS_KEY)
                counts = {k.decode(): int(v) for k, v in raw.items()}
                return {lane: max(0, counts.get(lane, 0)) for lane in LANES}
            keys = pending_keys(tenant)
            return {lane: int(self.redis.zcard(k)) for lane, k in zip(LANES, keys, strict=False)}
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return {**dict.fromkeys(LANES, 0), "unreachable": 1}

    def _cached_totals(self) -> dict[str, int]:
        at, totals = self._totals
        if time.monotonic() - at > 1.0:  # a scrape never hammers Redis
            totals = {} if self.outage.down else self.depth()
            self._totals = (time.monotonic(), totals)
        return totals

    def _broker_messages(self, queue: str) -> float:
        if self.outage.down:
            return float("nan")
        try:
            return float(self.redis.llen(queue))
        except REDIS_ERRORS as e:
            self.outage.failed(e)
            return float("nan")

    def _register_metrics(self) -> None:
        for lane in LANES:
            METRICS.queue_depth.labels(queue=lane).set_function(partial(self._total, lane))
        for q in QUEUES.values():
            METRICS.broker_messages.labels(queue=q).set_function(partial(self._broker_messages, q))

    def _total(self, lane: str) -> float:
        return float(self._cached_totals().get(lane, float("nan")))

    # -- lifecycle and completion signal -------------------------------------------------

    def on_done(self, callback: Callable[[list[DocKey]], None]) -> None:
        self._callbacks.append(callback)

    def start(self) -> None:
        self._register_metrics()
        if self.pubsub and self._listener is None:
            self._stop.clear()
            self._listener = threading.Thread(target=self._listen, name="vibe-jobs-done", daemon=True)
            self._listener.start()

    def stop(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.join(timeout=5)
            self._listener = None

    def _listen(self) -> None:
        """Subscribe, and re-subscribe after any Redis error; never dies while running."""
        while not self._stop.is_set():
            try:
                self._listen_once()
            except REDIS_ERRORS as e:
                self.outage.failed(e)
                self._stop.wait(1.0)

    def _listen_once(self) -> None:
        ps = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            ps.subscribe(DONE_CHANNEL)
            while not self._stop.is_set():
                msg = ps.get_message(timeout=0.5)
                if msg is not None:
                    self._fire(msg["data"])
        finally:
            ps.close()

    def _fire(self, data: bytes) -> None:
        try:
            keys = [DocKey(*k) for k in json.loads(data)]
        except (ValueError, TypeError):
            return
        for cb in self._callbacks:
            try:
                cb(keys)
            except Exception:  # a listener's bug must not stop the others
                log.exception("on_done callback failed")
