"""Provider cost accounting shared by every path that calls a provider: the token
estimate that caps and reports agree on, and the UTC day a charge belongs to."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


def estimate_tokens(text: str) -> int:
    """Tokens a provider bills for `text`, before the call: about four characters a token for
    ASCII (OpenAI's rule of thumb), and a token per two UTF-8 bytes of anything else. Byte-level
    BPE vocabularies cover other scripts far less densely: a CJK character (3 bytes) is one to
    two tokens, a Cyrillic or Greek one (2 bytes) about one. Counting characters would make such
    text cost a quarter of what is billed, so a cap would let through four times its figure. The same
    estimate everywhere, so caps and reports agree; a call's reported usage then corrects it
    (`billed_tokens`)."""
    ascii_chars = len(text.encode("ascii", "ignore")) if not text.isascii() else len(text)
    other_bytes = 0 if ascii_chars == len(text) else len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    return max(1, math.ceil(ascii_chars / 4 + other_bytes / 2))


_billed: ContextVar[list[int] | None] = ContextVar("vibe_billed_tokens", default=None)


@contextmanager
def billed_tokens() -> Iterator[list[int]]:
    """Collects what providers report they billed (`usage.total_tokens`) for the calls made
    inside the block on this thread, through however many embedder wrappers: empty when no
    call reported any (a local model, a provider without usage), and the estimate stands."""
    sink: list[int] = []
    token = _billed.set(sink)
    try:
        yield sink
    finally:
        _billed.reset(token)


def report_billed(tokens: int) -> None:
    """A provider call's reported usage, for the `billed_tokens` block around it (if any)."""
    sink = _billed.get()
    if sink is not None and tokens >= 0:
        sink.append(tokens)


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))
