"""POST /v1/collections/{c}/docs:mget."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# -- POST /v1/collections/{c}/docs:mget ----------------------------------------------------------


class MgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", title="MgetRequest")
    ids: list[Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]] = Field(
        min_length=1, max_length=100, description="document ids, at most 100 (VIBE_MAX_MGET_IDS)")


class MgetDoc(BaseModel):
    """A found document: `_id`, its stored fields, `_vibe` if set and `_found: true`; a missing
    one, or one the key may not read (the two are indistinguishable): `{_id, found: false,
    _found: false}`. `_found` is the flag to test (a document may have a field named `found`)."""

    model_config = ConfigDict(extra="allow", title="MgetDoc")
    id: str = Field(alias="_id")
    found_: bool = Field(alias="_found")


class MgetAnswer(BaseModel):
    docs: list[MgetDoc] = Field(description="one per id asked, in that order")
