"""Collection names the documents API never serves.

`extract_key_info` keeps each (API key, task)'s materials in a collection named
`mcp-task-<HMAC>` (services/mcp/secret.py). The prefix is reserved, case-insensitively, so no
key can write, read or delete such a collection through the HTTP documents API, even when
it guesses or learns a name: `check_collection` (services/api/writes.py) refuses it with
`invalid_params`. The agent tool writes through DocumentService directly and never passes
through that check.
"""

from __future__ import annotations

RESERVED_PREFIX = "mcp-task-"


def is_reserved_collection(name: str) -> bool:
    return name[: len(RESERVED_PREFIX)].lower() == RESERVED_PREFIX
