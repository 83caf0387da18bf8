"""The embed job handler (V§16): load → eligibility → redact → embed (batched) → upsert.

The same handler runs in the in-process runner and in Celery tasks. It is idempotent by
`{docId, space, contentHash}`: a duplicate or redelivered job finds the sidecar `ready` (or
its hash moved on) and does nothing. Vector and sidecar state are written in one
transaction by `DocumentStore.commit_vectors`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from shared.metrics import METRICS
from shared.model import DocKey, EmbedJob, SemanticStatus, SidecarEntry, StoredDoc
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import DocumentStore, Embedder, EmbedderError
from shared.text.hashing import doc_text
from shared.text.redaction import redact, select_fields

log = logging.getLogger("vibe.worker")


@dataclass
class BatchOutcome:
    """What a batch did: keys whose state changed, and jobs to try again later."""

    changed: list[DocKey] = field(default_factory=list)
    retry: list[EmbedJob] = field(default_factory=list)
    retry_after: float | None = None
    provider_calls: int = 0


@dataclass
class _Work:
    job: EmbedJob
    doc: StoredDoc
    side: SidecarEntry
    text: str = ""


class EmbedHandler:
    def __init__(
        self,
        store: DocumentStore,
        embedder: Embedder,
        policy: EligibilityPolicy,
        embed_fields: dict[str, list[str]],
        max_attempts: int,
    ):
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.embed_fields = embed_fields
        self.max_attempts = max_attempts

    def run(self, jobs: Sequence[EmbedJob]) -> BatchOutcome:
        out = BatchOutcome()
        work = self._load(jobs)
        work = self._eligible(work, out)
        work = self._reuse_stored_vectors(work, out)
        if work:
            self._embed(work, out)
        return out

    def _load(self, jobs: Sequence[EmbedJob]) -> list[_Work]:
        """Drop jobs that no longer apply: duplicates, document gone, content changed, ready."""
        jobs = list({j.job_key: j for j in jobs}.values())
        keys = [j.key for j in jobs]
        space = jobs[0].space if jobs else ""
        docs = self.store.get_docs(keys)
        sides = self.store.sidecars(keys, space)
        work = []
        for j in jobs:
            doc, side = docs.get(j.key), sides.get(j.key)
            if doc is None or side is None or doc.content_hash != j.content_hash:
                continue
            if side.status == SemanticStatus.READY and side.content_hash == j.content_hash:
                METRICS.jobs_skipped.labels(reason="already_ready").inc()
                continue
            work.append(_Work(j, doc, side))
        return work

    def _eligible(self, work: list[_Work], out: BatchOutcome) -> list[_Work]:
        keep = []
        for w in work:
            allow = self.embed_fields.get(w.doc.key.collection)
            text = doc_text(select_fields(w.doc.fields, allow), allow)
            d = self.policy.decide(w.doc.key.collection, w.doc.fields, w.doc.intent, text, vibe=w.doc.vibe)
            if d.action == "embed":
                w.text = redact(doc_text(select_fields(w.doc.fields, d.fields or allow), d.fields or allow))[0]
                keep.append(w)
                continue
            status = SemanticStatus.DENIED if d.action == "ignore" else SemanticStatus.DEFERRED
            out.changed += self.store.set_status([w.doc.key], w.job.space, status, d.reason)
        return keep

    def _reuse_stored_vectors(self, work: list[_Work], out: BatchOutcome) -> list[_Work]:
        """Content already embedded for this tenant and space (or evicted to the cold store)
        becomes ready again without a provider call."""
        rest, found = [], []
        for w in work:
            vec = self.store.vector_for_hash(w.doc.key.tenant, w.job.content_hash, w.job.space)
            if vec is None:
                rest.append(w)
            else:
                found.append((replace(w.side, content_hash=w.job.content_hash), vec))
        if found:
            out.changed += self.store.commit_vectors(found, self.embedder.model_id)
            METRICS.jobs_reused.inc(len(found))
        return rest

    def _embed(self, work: list[_Work], out: BatchOutcome) -> None:
        started = time.perf_counter()
        try:
            out.provider_calls += 1
            vectors = self.embedder.embed([w.text for w in work])
        except EmbedderError as e:
            self._failed(work, out, e)
            return
        METRICS.embed_seconds.observe(time.perf_counter() - started)
        good: list[tuple[_Work, list[float]]] = []
        wrong_dim: list[tuple[_Work, list[float]]] = []
        for w, vec in zip(work, vectors, strict=True):
            (good if len(vec) == self.embedder.dim else wrong_dim).append((w, vec))
        for w, _ in wrong_dim:  # dim safety (seed 000): refused, never compared
            self.store.record_failure(w.doc.key, w.job.space, "dimension_mismatch", final=True)
            out.changed.append(w.doc.key)
        entries = [(replace(w.side, content_hash=w.job.content_hash), vec) for w, vec in good]
        out.changed += self.store.commit_vectors(entries, self.embedder.model_id)
        METRICS.jobs_completed.inc(len(good))

    def _failed(self, work: list[_Work], out: BatchOutcome, e: EmbedderError) -> None:
        log.warning("embed batch failed", extra={"jobs": len(work), "error": str(e)[:200],
                                                 "transient": e.transient})
        for w in work:
            final = (not e.transient) or w.job.attempt + 1 >= self.max_attempts
            reason = f"embed_error: {str(e)[:120]}"
            self.store.record_failure(w.doc.key, w.job.space, reason, final=final)
            if final:
                METRICS.jobs_failed.inc()
                out.changed.append(w.doc.key)
            else:
                out.retry.append(replace(w.job, attempt=w.job.attempt + 1))
        out.retry_after = e.retry_after
