"""The server secret of the agent tools, and what is derived from it.

`extract_key_info` stores each (API key, task)'s materials in their own collection with their
own ACL token. Plain hashes of the caller's tenant, principals and task id would let any other
user of the tenant compute them and plant documents under them, so both are HMAC-SHA256 under a
secret only the server holds:

- `key_ref(secret, token)`: an opaque id of one API key (never the key itself), so two keys
  with the same tenant and principals still own different materials;
- `task_names(secret, key_ref, task)`: the collection `mcp-task-<32 hex>` (a prefix the
  documents API refuses, services/core/reserved.py) and the ACL token, derived with separate
  labels so a collection name seen in a log or an audit row does not give the token away.

The secret is `VIBE_MCP_TASK_SECRET`, or a random one kept in `DATA_DIR/mcp_task_secret`,
created on first use with mode 0600 (written to a private temporary file, then linked into
place, so a concurrent process never reads half a secret). A secret file that others may
read is tightened to 0600 with a warning.
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from services.core.reserved import RESERVED_PREFIX
from shared.config import Settings
from shared.secret_file import kept_secret

log = logging.getLogger("vibe.mcp")

SECRET_FILE = "mcp_task_secret"


def _mac(secret: bytes, label: str, *parts: str) -> str:
    msg = "\x1f".join((label, *parts)).encode("utf-8", "surrogatepass")
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def key_ref(secret: bytes, token: str) -> str:
    return _mac(secret, "vibe-mcp-key", token)[:32]


def task_names(secret: bytes, key: str, task: str) -> tuple[str, str]:
    """(collection, ACL token) of one key's task."""
    return (RESERVED_PREFIX + _mac(secret, "vibe-mcp-task-collection", key, task)[:32],
            "mcp-task:" + _mac(secret, "vibe-mcp-task-acl", key, task))


def server_secret(s: Settings) -> bytes:
    if s.mcp_task_secret:
        return s.mcp_task_secret.encode()
    return kept_secret(s.data_dir / SECRET_FILE, "MCP task secret")
