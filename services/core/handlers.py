"""The embed job handler: load → eligibility → redact → embed (batched) → upsert.

The same handler runs in the in-process runner and in Celery tasks. It is idempotent by
`{docId, space, contentHash}`: a duplicate or redelivered job finds the sidecar `ready` (or
its hash moved on) and does nothing. Vector and sidecar state are written in one
transaction by `DocumentStore.commit_vectors`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shared.collection_settings import embed_fields_of
from shared.costs import billed_tokens, estimate_tokens, utc_day
from shared.ledger import (
    LedgerRow,
    UsageDelta,
    new_call_id,
    outcome_of,
    provider_and_model,
    reached_provider,
    shares,
    tenant_call_id,
)
from shared.metrics import METRICS
from shared.model import Decision, DocKey, DocVectors, EmbedJob, SemanticStatus, SidecarEntry, StoredDoc, unflatten
from shared.policy.eligibility import EligibilityPolicy
from shared.policy.provider_certs import REASON_CERT, ProviderCerts
from shared.ports import ColdStore, DocumentStore, Embedder, EmbedderError, LifecycleStore, ProviderLedger
from shared.text.hashing import doc_text
from shared.text.passages import PassageConfig
from shared.text.passages import split as split_passages
from shared.text.redaction import redact, select_fields

log = logging.getLogger("vibe.worker")
REASON_ROUTED = "routed"  # the policy sends the document to another space


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
    texts: list[str] = field(default_factory=list)  # one per passage (shared/text/passages.py)
    charged: bool = False  # its tokens are reserved against the daily cap already
    fields: tuple[str, ...] = ()  # the fields its texts come from (the ledger names them, never their text)

    @property
    def tokens(self) -> int:
        """Estimated tokens of every passage: usage and budgets count what is sent."""
        return sum(estimate_tokens(t) for t in self.texts)


class EmbedHandler:
    def __init__(
        self,
        store: DocumentStore,
        embedder: Embedder,
        policy: EligibilityPolicy,
        embed_fields: Mapping[str, list[str]],  # shared/collection_settings.py EmbedFields
        max_attempts: int,
        cold: ColdStore | None = None,
        daily_tokens: int = 0,
        clock: Callable[[], float] = time.time,
        embedders: Callable[[str, str | None], Embedder] | None = None,
        default_space: str | None = None,
        live: Callable[[str], set[str]] | None = None,
        passages: PassageConfig | None = None,
        calls: ProviderLedger | None = None,
        provider_certs: ProviderCerts | None = None,
        max_inputs: int = 0,
    ):
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.embed_fields = embed_fields
        self.max_attempts = max_attempts
        self.cold = cold
        self.daily_tokens = daily_tokens  # per tenant per UTC day; 0 = no cap
        self.clock = clock
        self.embedders = embedders  # space -> its model's embedder (spaces in migration)
        self.default_space = default_space
        self.live = live  # tenant -> the spaces it reads or builds (None: every space is)
        self.ledger = store if isinstance(store, LifecycleStore) else None
        self.passages = passages or PassageConfig()
        # Certificate-bearing documents an external provider may not receive (default: none may).
        self.provider_certs = provider_certs or ProviderCerts()
        self.calls = calls  # the provider-call ledger; with it, usage is settled with each call's rows
        # Passages per provider request (VIBE_EMBED_BATCH_SIZE, what the OpenAI adapter sends at
        # most per request); 0 = any. A batch past it goes as several calls of whole documents, so
        # each call the ledger records is one request the provider sees.
        self.max_inputs = max_inputs

    def run(self, jobs: Sequence[EmbedJob]) -> BatchOutcome:
        out = BatchOutcome()
        by_space: dict[str, list[EmbedJob]] = {}
        for j in jobs:  # each space has its own model: a batch never mixes them
            by_space.setdefault(j.space, []).append(j)
        for space, group in by_space.items():
            group = self._live(space, group, out)
            if not group:
                continue
            for embedder, part in self._by_model(space, group, out):
                work = self._load(part)
                work = self._eligible(work, out, embedder)
                work = self._reuse_stored_vectors(work, out, embedder)
                work = self._within_daily_cap(work, out)
                if work:
                    self._embed(work, out, embedder)
        return out

    def _by_model(self, space: str, jobs: list[EmbedJob], out: BatchOutcome) -> list[tuple[Embedder, list[EmbedJob]]]:
        """The jobs by the embedder of their tenant's space: space names are per tenant, so one
        name may mean two models; tenants of one model still share a batch."""
        found: dict[str, Embedder | None] = {}
        groups: dict[int, tuple[Embedder, list[EmbedJob]]] = {}
        for j in jobs:
            tenant = j.key.tenant
            if tenant not in found:
                try:
                    found[tenant] = self.embedder_for(space, tenant)
                except LookupError as e:  # a space retired or never bound: nothing to embed it with
                    log.warning("no embedder for space", extra={"space": space, "error": str(e)[:200]})
                    found[tenant] = None
            emb = found[tenant]
            if emb is None:
                self.store.record_failure(j.key, space, "unknown_space", final=True)
                out.changed.append(j.key)
                continue
            groups.setdefault(id(emb), (emb, []))[1].append(j)
        return list(groups.values())

    def _live(self, space: str, jobs: list[EmbedJob], out: BatchOutcome) -> list[EmbedJob]:
        """Jobs of a space their tenant no longer reads or builds (retired by a cut-over while
        they waited, touches of the old space among them) are dropped and their rows go back to
        `none`, as the reconciler puts them (services/worker/repair.py): before, they went to the
        provider for a space nobody reads, and the next move to the cold store kept them."""
        if self.live is None:
            return jobs
        reads = {t: self.live(t) for t in {j.key.tenant for j in jobs}}
        dead = [j.key for j in jobs if space not in reads[j.key.tenant]]
        if not dead:
            return jobs
        out.changed += self.store.set_status(dead, space, SemanticStatus.NONE, only_from=[SemanticStatus.QUEUED])
        METRICS.jobs_skipped.labels(reason="space_not_live").inc(len(dead))
        gone = set(dead)
        return [j for j in jobs if j.key not in gone]

    def embedder_for(self, space: str, tenant: str | None = None) -> Embedder:
        if self.embedders is None or space == self.default_space:
            return self.embedder
        return self.embedders(space, tenant)

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

    def _eligible(self, work: list[_Work], out: BatchOutcome, embedder: Embedder) -> list[_Work]:
        keep = []
        for w in work:
            allow = embed_fields_of(self.embed_fields, w.doc.key.tenant, w.doc.key.collection)
            text = doc_text(select_fields(w.doc.fields, allow), allow)
            d = self.policy.decide_text(w.doc, text)
            d = route_or_gate(d, w.job.space, embedder.model_id, w.doc.certs, self.provider_certs)
            if d.action == "embed":
                used = d.fields or allow
                chosen = select_fields(w.doc.fields, used)
                w.fields = tuple(k for k in chosen if not k.startswith("_"))
                parts = split_passages(chosen, used, self.passages)
                if len(parts) > self.passages.max_passages:  # bounded, and said
                    METRICS.passages_capped.inc(len(parts) - self.passages.max_passages)
                    log.warning("passages past the bound not embedded",
                                extra={"passages": len(parts), "max": self.passages.max_passages})
                    parts = parts[: self.passages.max_passages]
                w.texts = [redact(p.text)[0] for p in parts]
                keep.append(w)
                continue
            status = SemanticStatus.DENIED if d.action == "ignore" else SemanticStatus.DEFERRED
            out.changed += self.store.set_status([w.doc.key], w.job.space, status, d.reason)
        return keep

    def _reuse_stored_vectors(self, work: list[_Work], out: BatchOutcome, embedder: Embedder) -> list[_Work]:
        """Content already embedded for this tenant and space, or evicted to the cold store,
        becomes ready again without a provider call (a forced re-embed skips both)."""
        rest, found, rehydrated = [], [], 0
        for w in work:
            if w.job.fresh:
                rest.append(w)
                continue
            tenant = w.doc.key.tenant
            vecs = self.store.vector_for_hash(tenant, w.job.content_hash, w.job.space)
            if vecs is None and self.cold is not None:
                flat = self.cold.get(tenant, w.job.space, w.job.content_hash)
                # dim safety: never trust vectors of another shape (None when not whole dim-vectors)
                vecs = None if flat is None else unflatten(flat, embedder.dim)
                rehydrated += vecs is not None
            if vecs is None:
                rest.append(w)
            else:
                found.append((replace(w.side, content_hash=w.job.content_hash), vecs))
        if found:
            out.changed += self.store.commit_vectors(found, embedder.model_id, self.clock())
            METRICS.jobs_reused.inc(len(found) - rehydrated)
            METRICS.rehydrations.inc(rehydrated)
        return rest

    def _within_daily_cap(self, work: list[_Work], out: BatchOutcome) -> list[_Work]:
        """Per-tenant daily token caps: a tenant past its cap
        gets `deferred` with reason `budget` (the scheduler puts it back the next day, and a read
        still answers lexically); nothing is sent to the provider for it."""
        if not self.daily_tokens or self.ledger is None or not work:
            return work
        day = utc_day(self.clock())
        keep: list[_Work] = []
        by_tenant: dict[str, list[_Work]] = {}
        for w in work:
            by_tenant.setdefault(w.doc.key.tenant, []).append(w)
        for tenant, items in by_tenant.items():
            room = self.daily_tokens - self.ledger.tokens_used(tenant, day)
            fits: list[_Work] = []
            refused: list[_Work] = []
            for w in items:
                cost = w.tokens
                (fits if cost <= room else refused).append(w)
                room -= cost if cost <= room else 0
            # Reserve before the call, all or nothing under the store's per-tenant-day lock, so two
            # workers that both saw room cannot together pass the cap.
            if fits and not self.ledger.charge_tokens(tenant, day, _by_collection(fits), 0, self.daily_tokens):
                refused, fits = refused + fits, []
            for w in fits:
                w.charged = True
            keep += fits
            for w in refused:
                METRICS.budget_denied.labels(budget="daily_tokens").inc()
                out.changed += self.store.set_status([w.doc.key], w.job.space, SemanticStatus.DEFERRED, "budget")
        return keep

    def _charge(self, work: Sequence[_Work], calls: int) -> None:
        """Provider usage per tenant, collection and day (GET /semantic/usage)."""
        if self.ledger is None or not work:
            return
        day = utc_day(self.clock())
        by_tenant: dict[str, list[_Work]] = {}
        for w in work:
            by_tenant.setdefault(w.doc.key.tenant, []).append(w)
        for tenant, items in by_tenant.items():
            # reserved work was counted when reserved: only the call is added now
            cols = _by_collection([w for w in items if not w.charged])
            if not cols:
                cols = {items[0].doc.key.collection: (0, 0)}
            try:
                self.ledger.charge_tokens(tenant, day, cols, calls, 0)
            except Exception:  # noqa: BLE001 - the vectors are committed; a lost usage row is only a report
                log.warning("usage ledger write failed", exc_info=True)
            METRICS.provider_tokens.labels(kind="documents").inc(sum(w.tokens for w in items))

    def _bill(self, work: Sequence[_Work], billed: list[int]) -> None:
        """Replace the estimate charged for `work` by what the provider reported it billed
        (`usage.total_tokens`), shared out over the batch's documents by their estimates (one
        batch may hold several tenants' documents): the daily cap and GET /semantic/usage then
        count what is paid for, multibyte text included. No report: the estimate stands."""
        if self.ledger is None or not billed or not work:
            return
        estimates = [w.tokens for w in work]
        scale = sum(billed) / max(1, sum(estimates))
        delta: dict[str, dict[str, int]] = {}
        for w, est in zip(work, estimates, strict=True):
            cols = delta.setdefault(w.doc.key.tenant, {})
            cols[w.doc.key.collection] = cols.get(w.doc.key.collection, 0) + round(est * scale) - est
        day = utc_day(self.clock())
        for tenant, cols in delta.items():
            moved = {c: (0, d) for c, d in cols.items() if d}
            if not moved:
                continue
            try:
                self.ledger.charge_tokens(tenant, day, moved, 0, 0)
            except Exception:  # noqa: BLE001 - the vectors are committed; the estimate stays counted
                log.warning("usage correction failed", exc_info=True)

    def _refund(self, work: Sequence[_Work]) -> None:
        """A failed call gives its reservation back (its retry reserves again)."""
        if self.ledger is None:
            return
        day = utc_day(self.clock())
        for w in work:
            if w.charged:
                w.charged = False
                try:
                    self.ledger.charge_tokens(w.doc.key.tenant, day,
                                              {w.doc.key.collection: (-1, -w.tokens)}, 0, 0)
                except Exception:  # noqa: BLE001 - a lost refund only over-counts a report
                    log.warning("usage refund failed", exc_info=True)

    def _embed(self, work: list[_Work], out: BatchOutcome, embedder: Embedder) -> None:
        if self.max_inputs and len(work) > 1 and sum(len(w.texts) for w in work) > self.max_inputs:
            for group in _requests(work, self.max_inputs):
                self._embed(group, out, embedder)
            return
        started, call, at = time.perf_counter(), new_call_id(), self.clock()
        try:
            out.provider_calls += 1
            with billed_tokens() as billed:
                flat = embedder.embed([t for w in work for t in w.texts])
        except EmbedderError as e:
            if not e.transient and len(work) > 1:
                # One document the provider refuses (too long, bad input) must not sink the
                # documents of other tenants batched with it: try each on its own.
                self._settle_failed(work, embedder, call, at, e, refund=False)
                for w in work:
                    self._embed([w], out, embedder)
                return
            self._settle_failed(work, embedder, call, at, e)
            self._failed(work, out, e)
            return
        except BaseException as e:  # postponed by the job layer, or a crash: the reservation goes back
            self._settle_failed(work, embedder, call, at, e)
            raise
        METRICS.embed_seconds.observe(time.perf_counter() - started)
        if self.calls is None:
            self._charge(work, 1)
            self._bill(work, billed)
        else:
            self._settle_ok(work, billed, embedder, call, at)
        vectors = _regroup(flat, [len(w.texts) for w in work])
        good: list[tuple[_Work, DocVectors]] = []
        wrong_dim: list[tuple[_Work, DocVectors]] = []
        for w, vecs in zip(work, vectors, strict=True):
            (good if all(len(v) == embedder.dim for v in vecs) else wrong_dim).append((w, vecs))
        for w, _ in wrong_dim:  # dim safety: refused, never compared
            self.store.record_failure(w.doc.key, w.job.space, "dimension_mismatch", final=True)
            out.changed.append(w.doc.key)
        entries = [(replace(w.side, content_hash=w.job.content_hash), vec) for w, vec in good]
        out.changed += self.store.commit_vectors(entries, embedder.model_id, self.clock())
        METRICS.jobs_completed.inc(len(good))

    def _rows(self, work: Sequence[_Work], embedder: Embedder, call: str, at: float, tokens: Sequence[int],
              outcome: str) -> list[LedgerRow]:
        provider, model = provider_and_model(embedder.model_id)
        day = utc_day(at)
        return [LedgerRow(tenant_call_id(call, w.doc.key.tenant), w.doc.key.tenant, w.doc.key.collection,
                          w.doc.key.doc_id, w.fields, w.job.space, provider, model, n, w.job.purpose, at, day, outcome)
                for w, n in zip(work, tokens, strict=True)]

    def _settle_ok(self, work: Sequence[_Work], billed: list[int], embedder: Embedder, call: str, at: float) -> None:
        """A call that answered: one ledger row per document with its share of what the provider
        billed (the estimate when it reported nothing), and the usage totals moved to match, in
        one transaction, so the daily cap counts exactly what the ledger holds. A reserved
        document's estimate is already counted: only the difference is added for it."""
        assert self.calls is not None
        estimates = [w.tokens for w in work]
        tokens = shares(sum(billed) if billed else sum(estimates), estimates)
        day = utc_day(at)
        totals: dict[tuple[str, str], list[int]] = {}  # (tenant, collection) -> [docs in the call, docs, tokens]
        for w, est, n in zip(work, estimates, tokens, strict=True):
            row = totals.setdefault((w.doc.key.tenant, w.doc.key.collection), [0, 0, 0])
            row[0] += 1
            row[1] += 0 if w.charged else 1
            row[2] += n - est if w.charged else n
        busiest: dict[str, str] = {}  # the call is counted once per tenant, on its busiest collection
        for (tenant, collection), (n_docs, _, _) in sorted(totals.items()):
            if tenant not in busiest or n_docs > totals[(tenant, busiest[tenant])][0]:
                busiest[tenant] = collection
        usage = [UsageDelta(t, day, c, int(busiest[t] == c), docs, toks) for (t, c), (_, docs, toks) in totals.items()]
        try:
            self.calls.record(self._rows(work, embedder, call, at, tokens, "ok"), usage)
        except Exception:  # noqa: BLE001 - the vectors are committed; a lost ledger write is only a report
            log.warning("provider ledger write failed", exc_info=True)
        METRICS.provider_tokens.labels(kind="documents").inc(sum(tokens))

    def _settle_failed(self, work: Sequence[_Work], embedder: Embedder, call: str, at: float, e: BaseException,
                       refund: bool = True) -> None:
        """A call that failed: its reservations go back (its retry reserves again) and, when it
        reached the provider, one row per document with the outcome and no tokens, together."""
        if self.calls is None:
            if refund:
                self._refund(work)
            return
        day = utc_day(self.clock())
        usage = []
        if refund:
            for w in work:
                if w.charged:
                    w.charged = False
                    usage.append(UsageDelta(w.doc.key.tenant, day, w.doc.key.collection, 0, -1, -w.tokens))
        rows = self._rows(work, embedder, call, at, [0] * len(work), outcome_of(e)) if reached_provider(e) else []
        try:
            self.calls.record(rows, usage)
        except Exception:  # noqa: BLE001 - a lost refund only over-counts a report
            log.warning("provider ledger write failed", exc_info=True)

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


def _requests(work: Sequence[_Work], max_inputs: int) -> list[list[_Work]]:
    """Consecutive whole documents, at most `max_inputs` passages a group (a document with more
    goes alone: the provider adapter splits it into several requests, under one ledger call)."""
    groups: list[list[_Work]] = []
    size = 0
    for w in work:
        if not groups or size + len(w.texts) > max_inputs:
            groups.append([])
            size = 0
        groups[-1].append(w)
        size += len(w.texts)
    return groups


def _by_collection(work: Sequence[_Work]) -> dict[str, tuple[int, int]]:
    """(documents, estimated tokens) per collection."""
    cols: dict[str, tuple[int, int]] = {}
    for w in work:
        docs, tokens = cols.get(w.doc.key.collection, (0, 0))
        cols[w.doc.key.collection] = (docs + 1, tokens + w.tokens)
    return cols


def _regroup(flat: Sequence[list[float]], counts: Sequence[int]) -> list[DocVectors]:
    """The provider's answer for every passage of a batch, back into one list per document."""
    if len(flat) != sum(counts):
        raise EmbedderError(f"provider answered {len(flat)} vectors for {sum(counts)} passages", transient=True)
    out, at = [], 0
    for n in counts:
        out.append([list(v) for v in flat[at:at + n]])
        at += n
    return out


def route_or_gate(d: Decision, space: str, model_id: str, certs: Sequence[str], gate: ProviderCerts) -> Decision:
    """The policy's decision for this job's space. A document the policy routes to another
    space is embedded by that space's jobs only, so here it is `deferred` (`routed`); one whose
    certificates the space's external provider may not receive is `deferred` (`cert`) and its
    text is never sent. Checked at every job, so touch, eager writes, backfills and MCP agree."""
    if d.action != "embed":
        return d
    if d.space is not None and not in_space(space, d.space):
        METRICS.jobs_skipped.labels(reason=REASON_ROUTED).inc()
        return Decision("defer", REASON_ROUTED)
    if not gate.allows(model_id, certs):
        METRICS.jobs_skipped.labels(reason=REASON_CERT).inc()
        return Decision("defer", REASON_CERT)
    return d


def in_space(space: str, routed: str) -> bool:
    """Whether a job's space is the one a rule names: the name itself or one of its versions
    (`core` routes to `core@v2` after a migration), so a rule survives model migrations."""
    return space == routed or space.startswith(routed + "@")
