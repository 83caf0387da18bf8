"""Provider cost accounting shared by every path that calls a provider (V§12): the token
estimate that caps and reports agree on, and the UTC day a charge belongs to."""

from __future__ import annotations

import math
import time


def estimate_tokens(text: str) -> int:
    """Tokens a provider bills for `text`: about four characters a token for English
    (OpenAI's rule of thumb); the same estimate everywhere, so caps and reports agree."""
    return max(1, math.ceil(len(text) / 4))


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))
