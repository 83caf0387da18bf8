"""A read session: the ordered steps of one query's read."""

from __future__ import annotations

from services.planner.answer import Answers
from services.planner.auto_state import state_rule
from services.planner.pools import LEXICAL_LEGS
from services.planner.strategy import choose_strategy


class ReadSession(Answers):
    """One query's read, in the order its answers go out: `start` (the first answer),
    `complete_semantic`, `touch`, then `refresh` as workers finish, until `done`."""

    def start(self, defer_query_embedding: bool = False) -> None:
        text = self._lexical_text()
        # The strategy depends on the query alone, so when this answer waits for a query vector
        # that is not cached, the lexical leg runs on another thread while this one embeds the
        # query. A streamed hybrid answer does not wait for it: its query is embedded after the
        # first event (complete_semantic), not beside it: on a 2-core machine embedding it here
        # makes the first event of hybrid and auto reads slower.
        self.strategy, self.strategy_reason = choose_strategy(
            self.req, text, self.p.embedder is not None,
            state_rule(self.p.coverage, self.principal.tenant, self.req.collection, self.space))
        waits = self.strategy == "semantic" or (self.strategy == "hybrid" and not defer_query_embedding)
        embedded = (waits and bool(text) and not self._is_doc_query()
                    and self.p.embedder_for(self.space, self.principal.tenant) is not None
                    and self._cached_query_vector() is None)
        # A streamed semantic answer shows vector hits only: its lexical leg, which the touch and
        # the usage statistics need, runs after the first event (complete_semantic), so the first
        # answer does not share the interpreter lock with it.
        later = self._lexical_later = self.strategy == "semantic" and defer_query_embedding
        # A streamed hybrid read uses its query vector at once only when it is cached (looked up
        # once, here).
        cached = self._cached_query_vector() if self.strategy == "hybrid" and not waits else None
        # Lexical first: a keyword read, or a hybrid one whose semantic leg comes after the first
        # event (its query vector is not cached); the first event shows the lexical ranking.
        lexical_first = (defer_query_embedding and not embedded and not later
                         and (self.strategy == "keyword" or (self.strategy == "hybrid" and cached is None)))
        if embedded and not later:
            lexical = LEXICAL_LEGS.submit(lambda: self._lexical_leg(text))
            self.semantic.vector = self._query_vector()  # None: the leg is degraded, with its reason
            self.lexical_hits = lexical.result()
        elif embedded:
            self.semantic.vector = self._query_vector()
        elif lexical_first:
            # The page and the one past it (is there a next page?), and the top the usage
            # statistics count (`_record_usage`).
            limit = self.req.limit
            self.lexical_hits = self._lexical_leg(text, max(self.req.offset + limit + 1, 2 * limit, 10))
            self._short_lexical = len(self.lexical_hits) < len(self._lexical_scores)
        elif not later:
            self.lexical_hits = self._lexical_leg(text)
        if waits:
            if not (embedded and self.semantic.vector is None):  # None: degraded, not tried twice
                # A streamed semantic answer needs only its page at first: a 500-hit vector
                # search reads and decodes 500 hits, most of its time (complete_semantic).
                # (Not a global read: its legs' shares make a short merge no prefix of the full one.)
                short = (self.strategy == "semantic" and defer_query_embedding and self.p.cfg.short_first_page
                         and self.global_plan is None)
                self._semantic_leg(self.req.offset + self.req.limit + 1 if short else None)
                self._short_semantic = short and self.semantic.state == "ready"
                if self._short_semantic and not self._short_list_decides_page():
                    self._semantic_leg()  # a tie across the page's end: which of them is on it
        elif self.strategy == "hybrid":
            self.semantic.vector = cached
            if self.semantic.vector is not None:
                self._semantic_leg()
            else:
                self.semantic.state = "embedding_query"
        if self._short_lexical:
            self._rank_first_page()
        else:
            self._rank()
        if not later:
            self._record_usage()

    def complete_semantic(self) -> bool:
        """Run the deferred semantic leg, or complete a short one; True if the visible ranking
        changed."""
        with self._steps:
            if self._lexical_later:
                self._lexical_later = False
                # Keys only as deep as the touch and the usage statistics read them: a semantic
                # ranking does not use the lexical list (`_touch` reads further if it must).
                self.lexical_hits = self._lexical_leg(self._lexical_text(), 0)
                self._more_lexical(self._touch_reach())  # (the reach depends on the leg's length)
                self._record_usage()
            # Fusion ranks every lexical candidate; a keyword page is decided by the first ones
            # (`_rank_first_page` read the page and the one past it), so the rest of a keyword
            # list is read only where something needs it (the touch, a page re-check).
            if self._short_lexical and self.strategy == "hybrid":
                self._full_lexical()
                if not self.semantic_deferred:
                    self._rank()  # the same first page (`_rank_first_page`), now with every candidate
            # A short semantic list decides its page (`_short_list_decides_page`), so the full
            # search cannot change what is shown: it waits for an answer that reports the whole
            # list (`done`: `_full_semantic`), and a reader that left never pays for it. It is
            # the largest part of a left stream's tail (qdrant-edge holds the interpreter lock
            # while it searches), which runs beside the next query.
            if not self.semantic_deferred:
                return False
            return self._search_again()

    def finish(self) -> None:
        """What a stream does after its first answer that must not depend on its reader staying:
        the semantic leg completed (the touch plans on the fused page) and the touch. A query's
        reader leaving early (a page closed, an SDK reading only the first event) still queues
        what the query touched, as a JSON read of the same query would."""
        with self._steps:
            if not self.touched:
                self.complete_semantic()
                self.touch()
