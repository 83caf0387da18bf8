"""`auto` strategy choice (the server chooses from query shape and collection state).

The reason is reported in diagnostics so a client can see which leg answered and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from services.planner.request import ReadRequest

_IDENTIFIER = re.compile(r"^[\w.:/#-]*\d[\w.:/#-]*$")


def choose_strategy(req: ReadRequest, text: str, has_embedder: bool,
                    by_state: Callable[[int], tuple[str, str] | None] | None = None) -> tuple[str, str]:
    """`by_state`: the choice the collection's state makes for a query of so many words, if it
    makes one (services/planner/auto_state.py); asked only when the query's shape leaves it open."""
    if req.strategy != "auto":
        return req.strategy, "requested"
    if req.query_vector is not None:  # nothing to match lexically: the front door refuses keyword/hybrid
        return "semantic", "query_vector"
    if not has_embedder:
        return "keyword", "no_embedder"
    if req.query_doc is not None:
        return "hybrid", "more_like_this"
    stripped = text.strip()
    if stripped.startswith('"') and stripped.endswith('"') and len(stripped) > 1:
        return "keyword", "quoted_phrase"
    if " " not in stripped and _IDENTIFIER.match(stripped):
        return "keyword", "identifier_like"
    if by_state is not None and (chosen := by_state(len(stripped.split()))) is not None:
        return chosen
    return "hybrid", "natural_language"
