"""`python -m harness.tuned '<TouchPolicy fields as JSON>' <command> ...`: the `vibe-semantic` CLI
with the reads' touch policy tuned in code.

The touch policy's numbers (depths, dig steps, the follow-up switch's thresholds) are not
settings: the product always reads with `TouchPolicy`'s defaults. Tests and benchmarks that
compare other numbers on a served app start it through this module (`Served(touch=...)` in
harness/server.py), which hands the composition root the tuned policy; everything else (the
environment, the settings, the command line) is the product's own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def main(argv: list[str]) -> None:
    import services.wiring as wiring
    from services.cli import app

    tuning: dict[str, Any] = json.loads(argv[0])
    build: Callable[..., Any] = wiring.build

    def tuned(settings: Any, embedder: Any = None, clock: Any = None, touch: Any = None) -> Any:
        return build(settings, embedder, clock, touch if touch is not None else wiring.touch_policy(settings, **tuning))

    wiring.build = tuned  # type: ignore[assignment]  # the CLI imports `build` from the root when it runs
    app(args=argv[1:], prog_name="vibe-semantic")


if __name__ == "__main__":
    main(sys.argv[1:])
