"""Print the app's OpenAPI document (what `GET /openapi.json` serves) as JSON, starting nothing:
the app is built over a throw-away data directory with the hash embedder, as the unit tests do.

    ../../.venv/bin/python scripts/export_openapi.py > openapi.json   (npm run snapshot)

tests/sdk/test_typescript_sdk.py checks the committed snapshot equals this output, so the
generated types (`npm run gen`) never drift from the API."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


def openapi() -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from services.core.keyring import KeyRing
    from services.wiring import build, create_app
    from shared.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        c = build(Settings(data_dir=Path(tmp), embedder="hash", embed_dim=32))
        try:
            return create_app(c, KeyRing([])).openapi()
        finally:
            c.store.close()


if __name__ == "__main__":
    print(json.dumps(openapi(), indent=2, ensure_ascii=False))
