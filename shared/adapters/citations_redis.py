"""Citation registry in Redis (SurfSense-compatible citation numbers) for the distributed profile, where several API
processes may serve one conversation.

Per (owner, conversation), three keys sharing one hash tag so a Redis Cluster keeps them on
one slot: `…:next` (the counter), `…:by_source` (source key → n) and `…:by_n` (n → entry
JSON). Find-or-create is one Lua script, so two processes registering the same source get
the same number and numbers are never reused. Same semantics as citations_sqlite.py, checked
by tests/contract/test_citation_registry_contract.py.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from shared.adapters.citations_sqlite import source_key
from shared.agent_ports import CitationEntry
from shared.config import Settings

# KEYS: next, by_source, by_n. ARGV: source key, entry JSON (n is its field in by_n, so the
# JSON need not know it before INCR). redis-py's Script re-loads it on NOSCRIPT, so a Redis
# restart that empties the script cache is harmless.
_REGISTER = """
local n = redis.call('HGET', KEYS[2], ARGV[1])
if n then return tonumber(n) end
n = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], n)
redis.call('HSET', KEYS[3], n, ARGV[2])
return n
"""


class RedisCitationRegistry:
    def __init__(self, client: redis.Redis, prefix: str = "vibe:cite"):
        self._r = client
        self._prefix = prefix
        self._register = client.register_script(_REGISTER)

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisCitationRegistry:
        return cls(redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5))

    def _keys(self, owner: str, conversation: str) -> list[str]:
        # JSON-quote both parts so an owner containing ':' cannot collide with another pair.
        tag = "{" + json.dumps([owner, conversation], separators=(",", ":")) + "}"
        return [f"{self._prefix}:{tag}:{part}" for part in ("next", "by_source", "by_n")]

    def register(self, owner: str, conversation: str, source_type: str, locator: dict[str, Any],
                 display: dict[str, Any]) -> int:
        entry = json.dumps({"source_type": source_type, "locator": locator, "display": display})
        n = self._register(keys=self._keys(owner, conversation), args=[source_key(source_type, locator), entry])
        return int(n)

    def resolve(self, owner: str, conversation: str, n: int) -> CitationEntry | None:
        raw = self._r.hget(self._keys(owner, conversation)[2], str(n))
        if raw is None:
            return None
        body = json.loads(raw)
        return CitationEntry(n, str(body["source_type"]), body["locator"], body["display"])

    def close(self) -> None:
        self._r.close()
