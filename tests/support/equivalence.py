"""One check for a fast path that must keep a slower definition's results exactly."""

from __future__ import annotations

import random
from collections.abc import Callable


def assert_same_everywhere(fast: Callable[[str], object], definition: Callable[[str], object],
                           shapes: Callable[[str], list[str]], pool: str, seed: int, longest: int,
                           samples: int = 20_000) -> None:
    """`fast` equals `definition` on every BMP character placed in each of `shapes(ch)`, and on
    `samples` random strings (up to `longest` characters) drawn from `pool`."""
    for c in range(0x10000):
        for t in shapes(chr(c)):
            assert fast(t) == definition(t), (hex(c), repr(t))
    rng = random.Random(seed)
    for _ in range(samples):
        t = "".join(rng.choice(pool) for _ in range(rng.randrange(longest)))
        assert fast(t) == definition(t), repr(t)
