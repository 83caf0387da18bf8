"""API keys made through the API or the CLI (`POST /v1/keys`, `vibe-semantic keys`): what the
store of record keeps of them, and the port it keeps them through.

A key's secret is never stored: only `secret_hash`, the SHA-256 of the secret. The secrets are
256 random bits, so a fast unsalted hash cannot be reversed by guessing; a slow password hash
(bcrypt, argon2) protects low-entropy passwords and would cost milliseconds on every request.

Every change (a key made or revoked) bumps one generation counter in the same transaction:
an API process re-reads the keys when the counter moved, which it checks at most every
`VIBE_KEY_REFRESH_SECONDS` (services/api/auth.py), so a revocation reaches every process
within that time without a restart."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

KEY_PREFIX = "vsk_"  # what an API-made key's secret starts with (a bootstrap key may look like anything)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class KeyRecord:
    id: str
    tenant: str
    name: str
    principals: tuple[str, ...]
    certs: tuple[str, ...]
    scopes: tuple[str, ...]
    created_at: float
    secret_hash: str


def new_key(tenant: str, name: str, principals: Sequence[str], certs: Sequence[str], scopes: Sequence[str],
            now: float) -> tuple[KeyRecord, str]:
    """A new key's record and its secret (256 random bits: why a plain SHA-256 is enough)."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    record = KeyRecord("key_" + secrets.token_hex(8), tenant, name, tuple(principals), tuple(certs), tuple(scopes),
                       now, secret_hash(secret))
    return record, secret


class TooManyKeys(Exception):
    """The tenant already holds the most keys `VIBE_MAX_KEYS_PER_TENANT` allows."""


@runtime_checkable
class KeyStore(Protocol):
    def create_key(self, record: KeyRecord, max_per_tenant: int) -> None:
        """Insert the key; TooManyKeys when the tenant holds `max_per_tenant` already."""

    def keys_of(self, tenant: str) -> list[KeyRecord]:
        """The tenant's keys, oldest first."""

    def all_keys(self) -> list[KeyRecord]: ...

    def key_by_hash(self, secret_hash: str) -> KeyRecord | None: ...

    def key_by_id(self, key_id: str) -> KeyRecord | None: ...

    def revoke_key(self, tenant: str, key_id: str) -> bool:
        """Delete the tenant's key; False when the tenant has no key of that id."""

    def key_generation(self) -> int:
        """A counter every create and revoke moves (cheap: one row)."""
