"""The spend of a read: on-touch embedding and usage statistics."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from services.planner.graph import linked_keys
from services.planner.page import Paging
from services.planner.state import COLD, _evicted
from services.planner.touch import neighbour_query, neighbours, plan, reach, touch_state
from services.planner.touch_memory import memory_for, query_key
from services.planner.touch_policy import TouchPolicy
from services.planner.touch_switch import AGREE_DEEP, AGREE_TOP, disagreement
from shared.metrics import METRICS
from shared.model import (
    DocKey,
    EmbedJob,
    SemanticStatus,
    SidecarEntry,
)

log = logging.getLogger("vibe.planner")


class Spending(Paging):
    """What a read spends: the touch (queueing cold candidates within the per-query ceiling,
    the tenant's budget and the queue's shares), its follow-up, and the usage statistics."""

    def touch(self) -> None:
        """Split the top candidates into ready and cold; queue cold, eligible ones within
        the per-query ceiling and the tenant budget (policy: services/planner/touch.py).
        Every strategy touches, so the next query finds these ready. Once per session."""
        with self._steps:
            if self.touched:
                return
            self.touched = True
            self._touch()

    def _touch_reach(self) -> int:
        """How many leading lexical candidates the touch and the usage statistics may read."""
        policy, limit, n = self.p.cfg.touch, self.req.limit, len(self._lexical_scores)
        reach = max(10, 2 * limit, policy.depth(limit, n))
        if policy.policy == "adaptive":
            reach = max(reach, policy.dig_max, (policy.similar_within or n) if policy.similar else 0)
        return reach

    def _touch(self) -> None:
        cfg = self.p.cfg
        self._more_lexical(self._touch_reach())  # a short first page's list, as deep as the touch reads
        if cfg.touch.policy == "adaptive":
            self._touch_adaptive()
            return
        keys = [h.key for h in self.lexical_hits[: cfg.touch.depth(self.req.limit, len(self._lexical_scores))]]
        keys += self._neighbour_keys(keys)
        linked = self._linked_keys(keys[: cfg.touch.neighbour_sources], set(keys))
        sides = self._with_missing_rows(keys, self.p.store.sidecars(keys, self.space))
        cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD]
        self.pending = {k for k in keys if k in sides and sides[k].status == SemanticStatus.QUEUED}
        self._spend(cold)
        self._speculate(linked)

    def _with_missing_rows(self, keys: Sequence[DocKey],
                           sides: dict[DocKey, SidecarEntry]) -> dict[DocKey, SidecarEntry]:
        """`sides` with a `none` row written for each of `keys` that has none in this space: a
        document the caller's own reads found, whose row a race (a cut-over, a re-create and the
        gone-rows sweep at once) or an earlier version left out. A backfill (an eager collection's,
        a reindex, a migration) writes such rows as it passes, but a lazy collection's documents
        are embedded by touches only, and a touch moved existing rows only: never embedded.
        The worker decides its policy again before any provider call, as for every job.
        Counted in `vibe_reconciler_repaired_total{reason="row_missing"}`."""
        missing = [k for k in dict.fromkeys(keys) if k not in sides]
        if not missing:
            return sides
        docs = self.p.store.get_docs(missing)  # one deleted meanwhile gets no row (ensure_sidecars re-checks)
        now = self.p.store.clock()
        made = self.p.store.ensure_sidecars([SidecarEntry(k, self.space, SemanticStatus.NONE, d.content_hash,
                                                          updated_at=now) for k, d in docs.items()])
        if made:
            METRICS.reconciler_repaired.labels(reason="row_missing").inc(made)
            log.warning("sidecar rows were missing; written", extra={"tenant": self.principal.tenant,
                                                                    "space": self.space, "rows": made})
        return {**sides, **self.p.store.sidecars(list(docs), self.space)}

    def _spend(self, cold: list[SidecarEntry]) -> None:
        """Queue cold candidates, in order, within the per-query ceiling and the tenant's bucket.
        A candidate whose vector was evicted (a cold-store reference) is rehydrated without a
        provider call, so it takes nothing from the bucket (within the same per-query ceiling).
        Rehydrating every evicted candidate the touch looks at (down to dig_max), not only the
        ones it picks, is left out: it brings back about twice as many vectors for no gain in
        answer quality (`python -m bench lifecycle`)."""
        cap = self.p.cfg.per_query_max_embeds
        wanted = [e for e in cold if not _evicted(e)][:cap]
        free = [e for e in cold if _evicted(e)][:cap]
        if (wanted or free) and self.p.backpressure is not None and self.p.backpressure.pressed():
            # The workers or the provider are not keeping up: more jobs would only lengthen the
            # wait of every read already waiting. Nothing is queued, not even a rehydration (it
            # is a job too); the read answers with what is embedded and says why it does not warm.
            self.backpressure_limited = len(wanted) + len(free)
            METRICS.budget_denied.labels(budget="backpressure").inc(self.backpressure_limited)
            return
        room = self.p.tenant_share.room(self.principal.tenant) if self.p.tenant_share is not None else None
        if room is not None and len(wanted) + len(free) > room:
            # The tenant's own share of the queue is full: what does not fit waits, rehydrations
            # included (each is a job others wait behind), and no other tenant's touches do.
            cut = len(wanted) + len(free) - room
            wanted = wanted[:room]
            free = free[:room - len(wanted)]
            self.backpressure_limited = cut
            METRICS.budget_denied.labels(budget="tenant_queue").inc(cut)
        if wanted and self.semantic.reason == "budget":
            # The daily cap refused this query's own embedding a moment ago: the tenant's day is
            # spent, and each job would only be turned `deferred` by the worker. Queued anyway,
            # every read of a spent tenant flipped its candidates to `deferred` and said
            # "Warming up… N results are being indexed" for results that never came.
            self.budget_limited = len(wanted)
            METRICS.budget_denied.labels(budget="daily_tokens").inc(self.budget_limited)
            self._enqueue(free)
            return
        granted = self.p.budget.take(self.principal.tenant, len(wanted)) if wanted else 0
        self.budget_limited = len(wanted) - granted
        if self.budget_limited:
            METRICS.budget_denied.labels(budget="tenant").inc(self.budget_limited)
        self._enqueue([*wanted[:granted], *free])

    def _neighbour_keys(self, keys: list[DocKey]) -> list[DocKey]:
        """Speculation: lexical neighbours of `keys` (the first `neighbour_sources` of them),
        searched inside the caller's filter (so only documents the caller may read are ever
        considered)."""
        policy = self.p.cfg.touch
        if not policy.neighbours or not keys:
            return []
        docs = self.p.store.get_docs(keys[: policy.neighbour_sources])
        sources = [docs[k] for k in keys[: policy.neighbour_sources] if k in docs]
        return neighbours(sources, lambda text, n: self.p.lexical.search(self.flt, text, n),
                          policy.neighbours, set(keys))

    def _linked_keys(self, sources: list[DocKey], exclude: set[DocKey]) -> list[DocKey]:
        """Speculation by edges (services/planner/graph.py `linked_keys`): each edge and both of
        its ends re-checked readable by the caller, like a read's `graph`."""
        return linked_keys(self.p.store, self.p.store, self.principal, sources, self.p.graph.speculate, exclude)

    def _speculate(self, keys: list[DocKey]) -> None:
        """Neighbour speculation's jobs, after the touch's own (`_spend`): within what the
        per-query ceiling left, the queue's room and what the tenant's bucket grants now; nothing
        under backpressure or a spent day. No result waits for them: they are not pending (the
        warming count and the stream's wait are the page's), and what is cut is not reported."""
        if not keys:
            return
        sides = self.p.store.sidecars(keys, self.space)
        room = self.p.cfg.per_query_max_embeds - self.queued_by_us
        share = self.p.tenant_share.room(self.principal.tenant) if self.p.tenant_share is not None else None
        if share is not None:
            room = min(room, share)
        cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD][:max(room, 0)]
        pressed = self.p.backpressure is not None and self.p.backpressure.pressed()
        if not cold or pressed or self.semantic.reason == "budget":
            return
        free = [e for e in cold if _evicted(e)]  # a rehydration costs no provider call
        wanted = [e for e in cold if not _evicted(e)]
        granted = self.p.budget.take(self.principal.tenant, len(wanted)) if wanted else 0
        pending = set(self.pending)
        self._enqueue([*wanted[:granted], *free])
        self.pending = pending

    def _touch_adaptive(self) -> None:
        """The adaptive policy (services/planner/touch.py `plan`): the fused page's cold
        documents first, then the lexical top, deeper only while the page is unstable, less
        under a tight budget. Everything considered comes from this query's own reads inside
        the caller's filter (lexical list, fused page, neighbour searches)."""
        cfg, limit = self.p.cfg, self.req.limit
        policy = self._policy()
        depth = max(policy.dig_max, policy.depth(limit, len(self._lexical_scores)))
        lexical = [h.key for h in self.lexical_hits[:depth]]
        page = [f.key for f in self._page()]
        candidates = list(dict.fromkeys([*page, *lexical]))
        sides = self._with_missing_rows(candidates, self.p.store.sidecars(candidates, self.space))
        state = {k: touch_state(s.status, COLD) for k, s in sides.items()}
        # Settled repeats (touch.PageMemory): keyed by tenant, ACL, collection and query, so one
        # caller's history never decides another's spend.
        memory = memory_for(self.p) if policy.remember else None
        # the caller's certificates are part of its reach, as its ACL: "\x1e" sets them apart from principals
        readers = (*self.flt.acl, *(f"\x1ecert:{c}" for c in sorted(self.flt.certs)))
        qkey = query_key(self.principal.tenant, readers, self._scope_key(), self._lexical_text(), limit)
        settled = memory.settled(qkey, page, policy.probe_rounds) if memory is not None else None
        reachable = None
        end = self.req.offset + limit
        touches = memory.touches(qkey) if memory is not None else 0
        self._first_touch = memory is not None and touches == 0
        # `reach` compares lexical candidates with a fused z-score page: a hybrid ranking's (a
        # keyword or semantic page has no fused scores to reach)
        if (self.strategy == "hybrid" and cfg.fusion == "zscore" and policy.reaches(touches) and self.semantic.hits
                and len(self.ranking) >= end):
            reachable = reach(self._lexical_scores, [h.score for h in self.semantic.hits],
                              self.ranking[end - 1].score, cfg.semantic_weight, policy.reach_best)
        similar = self._similar_keys(lexical) if policy.similar and settled is not True else []
        chosen = plan(policy, limit, lexical, page, state, self.p.budget.available(self.principal.tenant),
                      reachable, similar, settled)
        if memory is not None:
            memory.remember(qkey, page, chosen.probe)
        watched = [*page, *lexical[: chosen.depth]]
        keys = list(chosen.keys)
        if chosen.neighbours:
            # "Vector similarity once a few are embedded": the page's documents the semantic
            # leg ranks highest lend their lexical neighbours.
            near = sorted((f for f in self._page() if f.semantic_rank is not None),
                          key=lambda f: f.semantic_rank or 0)
            extra = self._neighbour_keys([f.key for f in near])
            more = self.p.store.sidecars([k for k in extra if k not in sides], self.space)
            sides.update(more)
            keys += [k for k in extra if k in more and more[k].status in COLD]
            watched += extra
        # the page's documents lend their neighbours by edges, queued after everything the plan chose
        linked = self._linked_keys(page[: policy.neighbour_sources], set(keys) | set(page))
        self.pending = {k for k in watched if k in sides and sides[k].status == SemanticStatus.QUEUED}
        # Evicted candidates within the plan's depth come back even where a tight budget cut the
        # plan short (they cost no provider call: `_spend`).
        picked = set(keys)
        keys += [k for k in dict.fromkeys([*page, *lexical[: chosen.depth]])
                 if k not in picked and (s := sides.get(k)) is not None and _evicted(s)]
        self._spend([sides[k] for k in keys if k in sides and sides[k].status in COLD])
        self._speculate(linked)

    def _policy(self) -> TouchPolicy:
        """The touch policy for this read's collection: an "auto" follow-up resolved by the
        collection's switch (touch.FollowUpSwitch.state): "agree" follows up and digs
        `auto_dig_step` at a time; "disagree" (with `auto_disagree`) follows up, but with
        `auto_disagree_probe_rounds` probing rounds per query and `auto_disagree_dig_step`
        steps, since there a dug document reaches the page less often; otherwise no follow-up."""
        policy = self.p.cfg.touch
        if policy.follow_up != "auto":
            return policy
        state = self.p.follow_ups.state(self.principal.tenant, self.req.collection, policy.auto_after,
                                        policy.auto_below)
        self.follow_up_state = state
        if state == "agree":
            return replace(policy, follow_up=True, dig_step=policy.auto_dig_step)
        if state == "disagree" and policy.auto_disagree:
            return replace(policy, follow_up=True, probe_rounds=policy.auto_disagree_probe_rounds,
                           dig_step=policy.auto_disagree_dig_step)
        return replace(policy, follow_up=False)

    def _observe_agreement(self) -> None:
        """Count, for the collection's "auto" switch, how far this first read's refreshed fused
        top left its lexical top (touch.disagreement), once. Only a hybrid ranking with its
        semantic leg says anything about the lexical list as a guide. Counted under the read's
        tenant and collection as named (a read across collections, "any", under "any"): one
        store lookup (which of the lexical ranks 10-60 have a vector) per streamed first read."""
        if self._observed or self.strategy != "hybrid" or self.semantic.state != "ready":
            return
        self._observed = True
        deep = [h.key for h in self.lexical_hits[AGREE_TOP:AGREE_DEEP]]
        ready = len(self.p.store.ready_among(deep, self.space)) if deep else 0
        value = disagreement([h.key for h in self.lexical_hits], [f.key for f in self.ranking], ready)
        t = self.p.cfg.touch
        self.p.follow_ups.observe(self.principal.tenant, self.req.collection, value, t.auto_after, t.auto_below)

    def follow_up(self) -> bool:
        """Once this read's touch has landed (nothing pending), touch again if it was its query's
        first touch and the policy follows up (TouchPolicy.follow_up; "auto": if its collection's
        switch is on, after this read is counted): the plan is a repeat's, so it spends only while
        the refreshed page is unstable. True if it queued anything."""
        policy = self.p.cfg.touch
        with self._steps:
            if (self._followed or not self._first_touch or self.pending or not self.touched
                    or not policy.follow_up or policy.policy != "adaptive"):
                return False
            # Under a tight budget a first touch embeds only its page's best cold document and
            # keeps the bucket for queries that come back (TouchPolicy.first_under_budget): a
            # follow-up would spend it at once. (Nor is such a read counted for "auto": its
            # lexical top is not embedded, so its page cannot say how far the leg would move it.)
            room = policy.reserve * policy.depth(self.req.limit, len(self._lexical_scores))
            if (self.budget_limited or self.backpressure_limited
                    or self.p.budget.available(self.principal.tenant) < room):
                return False
            if policy.follow_up == "auto":
                self._observe_agreement()
                if not self._policy().follow_up:
                    return False
            self._followed = True
            self._touch_adaptive()
            return bool(self.pending)

    def _similar_keys(self, lexical: list[DocKey]) -> list[DocKey]:
        """This query's lexical candidates ordered by likeness to the semantic leg's best hits
        (a lexical more-like-this of their text with the query's): a predictor of which deeper
        candidates the semantic leg would lift onto the page. The sources are this query's own
        semantic hits and the search runs with the caller's filter; only candidates from this
        query's own lexical list (`similar_within` deep) are returned."""
        policy = self.p.cfg.touch
        top = [h.key for h in self.semantic.hits[: policy.similar_sources]]
        if not top:
            return []
        docs = self.p.store.get_docs(top)
        text = " ".join([self._lexical_text(), *(neighbour_query(docs[k]) for k in top if k in docs)])
        within = policy.similar_within or len(self._lexical_scores)
        allowed = {h.key for h in self.lexical_hits[:within]}
        hits = self.p.lexical.search(self.flt, text, max(200, within))
        return [h.key for h in hits if h.key in allowed]

    def _enqueue(self, entries: Sequence[SidecarEntry]) -> None:
        if not entries:
            return
        space = self.space
        moved = set(self.p.store.set_status([e.key for e in entries], space, SemanticStatus.QUEUED,
                                            only_from=COLD))
        jobs = [EmbedJob(e.key, space, e.content_hash) for e in entries if e.key in moved]
        self.p.queue.enqueue(jobs)
        if self.p.tenant_share is not None:
            self.p.tenant_share.took(self.principal.tenant, len(jobs))
        self.queued_by_us += len(jobs)  # a follow-up touch adds to the first
        self.pending |= moved

    def _record_usage(self) -> None:
        """Statistics for the lifecycle scheduler: the collections queried, their
        lexical hits on the page, the documents this query could embed and the ones it shows."""
        usage = self.p.usage
        if usage is None:
            return
        limit = self.req.limit
        page = [f.key for f in self._page()]
        first = self.lexical_hits[:limit]
        hits: dict[str, int] = {}
        for h in first:
            hits[h.key.collection] = hits.get(h.key.collection, 0) + 1
        if self.req.collection == "any":
            collections = sorted({k.collection for k in page} | set(hits))
        else:
            collections = [self.req.collection]
        touched = [h.key for h in self.lexical_hits[: max(10, 2 * limit)]]
        usage.record(self.principal.tenant, collections, hits, touched, page)
