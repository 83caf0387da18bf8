"""GET /semantic/touch: the touch policy's "auto" follow-up switch."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# -- GET /semantic/touch (the touch policy's "auto" follow-up switch) ----------------------------

FOLLOW_UP_COLLECTION: dict[str, Any] = {
    "type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$",
    "description": "a collection name (reads across collections are counted under `any`)"}


class FollowUpCollection(BaseModel):
    collection: str = Field(description="the collection as reads name it (`any`: reads across collections)")
    state: Literal["unknown", "agree", "disagree"] = Field(
        description="`unknown` before `after` first reads; then `agree` while `mean` is below `below`, "
                    "else `disagree`")
    reads: int = Field(description="streamed first reads observed, by every replica")
    mean: float = Field(description="their running disagreement with the lexical top (the last ~100 weigh)")
    updatedAt: str | None = Field(description="when a process last wrote what it observed")


class FollowUpView(BaseModel):
    followUp: bool | Literal["auto"] = Field(description="VIBE_TOUCH_FOLLOW_UP: the states apply when `auto`")
    after: int = Field(description="first reads a collection needs before it is `agree` or `disagree`")
    below: float = Field(description="the running mean below which a collection is `agree`")
    flushEvery: int = Field(description="VIBE_TOUCH_AUTO_FLUSH_EVERY: a process writes what it observed every "
                                        "this many first reads of a collection, and at once on a change of state")
    refreshSeconds: float = Field(description="VIBE_TOUCH_AUTO_REFRESH_SECONDS: how often a process reads a "
                                              "collection's stored state again")
    collections: list[FollowUpCollection] = Field(description="the tenant's collections by name, one page")
    next: str | None = Field(description="pass as `after` for the next page; null on the last")
