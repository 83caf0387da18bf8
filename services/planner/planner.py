"""The read path: ACL-filtered BM25 at once, ready/cold split,
budgeted on-touch embedding, and re-ranking as the touched documents become ready.

The planner depends on ports only. A `ReadSession` holds one query's state between the first
answer and `done`, so the SSE route can ask it to refresh as workers finish. Its concerns, one
module each:
- request.py, strategy.py: what a read asks for, and which legs answer it (`auto`);
- state.py: the session's state; legs.py: lexical candidates, the query vector, the vector search;
- page.py: fusion, the ranking, the page re-checked against the store, the scores shown;
- spend.py: the touch (on-touch embedding within budgets and queue shares) and usage statistics;
- answer.py: each answer as domain objects (services/api/render.py makes the JSON);
- session.py: the ordered steps of one read; flow.py: its events in the order they go out;
- deps.py, pools.py: what a read depends on, and the process-wide thread pools.
"""

from __future__ import annotations

from services.planner.deps import PlannerConfig, PlannerDeps
from services.planner.page import IMPUTE_DEPTH
from services.planner.pools import FINISHER, LEXICAL_LEGS, _Finisher, _SidePool
from services.planner.request import ReadRequest
from services.planner.session import ReadSession
from services.planner.state import COLD, SemanticLeg
from shared.model import Principal

__all__ = ["COLD", "FINISHER", "IMPUTE_DEPTH", "LEXICAL_LEGS", "Planner", "PlannerConfig", "ReadRequest", "ReadSession",
           "SemanticLeg", "_Finisher", "_SidePool"]



class Planner(PlannerDeps):
    """Opens a read session per query and finishes the streams whose reader left."""

    def open(self, principal: Principal, req: ReadRequest, streaming: bool = False) -> ReadSession:
        """Plan and rank at once. When streaming, the caller sends the first answer before
        queueing embeds ("return fast" comes before "queue"), and a hybrid query whose
        vector is not cached answers lexically first; `complete_semantic()` then fuses."""
        with self.foreground.serving():
            session = ReadSession(self, principal, req)
            session.start(defer_query_embedding=streaming)
        if not streaming:
            session.touch()
        return session

    def finish_left(self, session: ReadSession) -> None:
        """A stream's reader left before its touch: finish it in the background (`_Finisher`),
        after any first answer in flight (it is background work: shared/foreground.py)."""
        def finish() -> None:
            self.foreground.yield_to_requests()
            session.finish()

        if not session.touched and not session.failed:
            FINISHER.submit(finish)
