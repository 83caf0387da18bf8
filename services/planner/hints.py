"""`semantic.domainHint`: a caller's hint at the domain it searches, which the server may map to
a space. A tenant configures spaces by name (`POST /semantic/spaces`), so a hint maps to the
tenant's space of that name. Only the space the tenant reads (its active one) can serve a read:
a space still being built holds part of the corpus, and searching it alone would hide the rest.
Any other hint is accepted and reported unused, with why, rather than refused: a hint is
advisory and a client written for another server must not fail here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HintReport:
    """What became of a read's domain hint (`diagnostics.domainHint`)."""
    hint: str
    used: bool
    space: str | None  # the space it mapped to (used)
    reason: str | None  # why it was not used


def resolve_hint(hint: str | None, active: str, building: Sequence[str]) -> HintReport | None:
    if hint is None:
        return None
    if hint == active:
        return HintReport(hint, True, active, None)
    if hint in building:
        return HintReport(hint, False, None, "space_building")
    return HintReport(hint, False, None, "no_such_space")
