"""Bearer keys: the key (or end-user token) decides tenant, principals and scopes
(docs/keys-and-tokens.md). One seam (`KeyRing.lookup`) for the HTTP API, its rate limit and MCP.

Three kinds of bearer:
- bootstrap keys from `VIBE_API_KEYS` (a dictionary lookup);
- API-made keys (`vsk_...`), kept hashed in the store of record (shared/keys.py);
- end-user tokens: HS256 JWTs under `VIBE_TOKEN_SECRET`, carrying the id of the key that
  minted them, so revoking that key revokes them.

Revocation without a restart: each process keeps a snapshot of the API-made keys and asks the
store for the keys' generation counter at most every `VIBE_KEY_REFRESH_SECONDS` (one indexed
row), reloading the snapshot when it moved. A lookup is then a SHA-256 and a dictionary hit
(a token: a dictionary hit after its first verification), with one small query a second at
most: it runs on every request."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt

from shared.config import ApiKey, Settings
from shared.filters import FilterError, parse_filter
from shared.keys import KEY_PREFIX, KeyRecord, KeyStore, secret_hash
from shared.model import Principal
from shared.secret_file import kept_secret

log = logging.getLogger("vibe.api")

DEV_KEY_FILE = "dev-key.json"
TOKEN_SECRET_FILE = "token-secret"
TOKEN_ISSUER = "vibe-semantic"
BOOTSTRAP_PREFIX = "boot_"
_CACHE_MAX = 10_000  # verified tokens and unknown bearers remembered per process (cleared when full)


class TokenSecretMissing(RuntimeError):
    """The distributed profile without `VIBE_TOKEN_SECRET`: replicas would not accept each other's tokens."""


def token_secret(s: Settings) -> bytes:
    """`VIBE_TOKEN_SECRET`; embedded, when unset, a random one kept in DATA_DIR/token-secret
    (0600, written privately and then linked into place, so a concurrent process never reads
    half of it and two first starts agree on one)."""
    if s.token_secret:
        return s.token_secret.encode()
    if s.profile == "distributed":
        raise TokenSecretMissing("VIBE_TOKEN_SECRET must be set in the distributed profile (at least 32 characters, "
                                 "the same in every API replica): it signs end-user tokens")
    return kept_secret(s.data_dir / TOKEN_SECRET_FILE, "token secret")


def bootstrap_id(secret: bytes, key: str) -> str:
    """A bootstrap key's id: an HMAC under the token secret, so the id (which its tokens carry
    in clear) gives nothing away about a short, guessable bootstrap key."""
    mac = hmac.new(secret, b"vibe-bootstrap-key\x1f" + key.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return BOOTSTRAP_PREFIX + mac.hexdigest()[:20]


def _of_key(k: ApiKey, key_id: str | None) -> Principal:
    return Principal(k.tenant, tuple(k.principals), frozenset(k.scopes), frozenset(k.certs), key_id)


def _of_record(r: KeyRecord) -> Principal:
    return Principal(r.tenant, r.principals, frozenset(r.scopes), frozenset(r.certs), r.id)


@dataclass
class _Snapshot:
    generation: int
    by_hash: dict[str, Principal] = field(default_factory=dict)
    by_id: dict[str, KeyRecord] = field(default_factory=dict)
    misses: set[str] = field(default_factory=set)  # hashes and ids the store did not have at this generation


class MadeKeys:
    """The API-made keys of the store, as this process last saw them (never older than
    `refresh` seconds, by `clock`)."""

    def __init__(self, store: KeyStore, refresh: float, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.refresh = refresh
        self.clock = clock
        self._lock = threading.Lock()
        self._snap = _Snapshot(-1)
        self._checked = float("-inf")

    def invalidate(self) -> None:
        """After this process changed a key: the next lookup reads the store again."""
        self._checked = float("-inf")

    def _current(self) -> _Snapshot:
        if self.clock() - self._checked < self.refresh:
            return self._snap
        with self._lock:
            if self.clock() - self._checked >= self.refresh:
                try:
                    gen = self.store.key_generation()
                    if gen != self._snap.generation:
                        records = self.store.all_keys()
                        self._snap = _Snapshot(gen, {r.secret_hash: _of_record(r) for r in records},
                                               {r.id: r for r in records})
                except Exception:
                    # The store is away: nothing can be revoked meanwhile (revocations are store
                    # writes), so the last snapshot still holds; bootstrap keys never needed it.
                    log.warning("keys not refreshed from the store", exc_info=True)
                self._checked = self.clock()
        return self._snap

    def by_secret(self, secret: str) -> Principal | None:
        h = secret_hash(secret)
        snap = self._current()
        found = snap.by_hash.get(h)
        if found is not None or h in snap.misses:
            return found
        # Made by another process since the last refresh: ask the store (not kept in the snapshot,
        # whose next reload might otherwise miss a revocation that raced this read).
        record = self.store.key_by_hash(h)
        if record is None:
            _remember(snap.misses, h)
        return _of_record(record) if record is not None else None

    def by_id(self, key_id: str) -> KeyRecord | None:
        snap = self._current()
        found = snap.by_id.get(key_id)
        if found is not None or key_id in snap.misses:
            return found
        record = self.store.key_by_id(key_id)
        if record is None:
            _remember(snap.misses, key_id)
        return record


def _remember(misses: set[str], item: str) -> None:
    if len(misses) >= _CACHE_MAX:
        misses.clear()
    misses.add(item)


class TokenSigner:
    def __init__(self, secret: bytes):
        self._secret = secret

    def mint(self, minter: Principal, principals: list[str], certs: list[str], scopes: list[str],
             filter_raw: dict[str, Any] | None, ttl: int, now: float) -> tuple[str, int]:
        exp = int(now) + ttl
        claims: dict[str, Any] = {"iss": TOKEN_ISSUER, "iat": int(now), "exp": exp, "jti": secrets.token_hex(8),
                                  "ten": minter.tenant, "kid": minter.key_id, "prn": principals, "crt": certs,
                                  "scp": scopes}
        if filter_raw:
            claims["flt"] = filter_raw
        return jwt.encode(claims, self._secret, algorithm="HS256"), exp

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this server signed and that has not expired; None otherwise."""
        try:
            claims: dict[str, Any] = jwt.decode(token, self._secret, algorithms=["HS256"], issuer=TOKEN_ISSUER,
                                                options={"require": ["exp", "iat", "iss"]})
        except jwt.PyJWTError:
            return None
        return claims


def _token_principal(claims: dict[str, Any]) -> Principal | None:
    """The principal a verified token's claims describe; None when they are not ours in shape."""
    try:
        prn, crt, scp = claims["prn"], claims.get("crt", []), claims["scp"]
        if not all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in (prn, crt, scp)):
            return None
        where = parse_filter(claims.get("flt"))
        return Principal(str(claims["ten"]), tuple(prn), frozenset(scp), frozenset(crt), str(claims["kid"]),
                         where, via_token=True)
    except (KeyError, TypeError, FilterError):
        return None


class KeyRing:
    """Every bearer this process accepts. Built from the bootstrap keys; `attach` (done by
    `create_app`) adds the store's keys and end-user tokens."""

    def __init__(self, keys: list[ApiKey]):
        self._keys = list(keys)
        self._by_key = {k.key: _of_key(k, None) for k in keys}
        self._boot_ids: dict[str, str] = {}  # bootstrap id -> tenant
        self.made: MadeKeys | None = None
        self.signer: TokenSigner | None = None
        self._tokens: dict[str, tuple[Principal, int]] = {}  # verified token -> (principal, exp)
        self.clock: Callable[[], float] = time.time  # token expiry (wall clock: `exp` is a Unix time)

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def bootstrap(self) -> list[tuple[str, ApiKey]]:
        """(id, key) of every bootstrap key (ids only once attached)."""
        return [(self._by_key[k.key].key_id or "", k) for k in self._keys]

    def attach(self, store: KeyStore, secret: bytes, refresh: float) -> None:
        self._by_key = {k.key: _of_key(k, bootstrap_id(secret, k.key)) for k in self._keys}
        self._boot_ids = {p.key_id: p.tenant for p in self._by_key.values() if p.key_id}
        self.made = MadeKeys(store, refresh)
        self.signer = TokenSigner(secret)

    def is_bootstrap(self, key_id: str) -> bool:
        return key_id in self._boot_ids

    def lookup(self, token: str) -> Principal | None:
        found = self._by_key.get(token)
        if found is not None or self.made is None:
            return found
        if token.startswith(KEY_PREFIX):
            return self.made.by_secret(token)
        if token.count(".") == 2:
            return self._token(token)
        return None

    def _alive(self, key_id: str, tenant: str) -> bool:
        """Whether the key that minted a token still exists, in the token's tenant."""
        if key_id.startswith(BOOTSTRAP_PREFIX):
            return self._boot_ids.get(key_id) == tenant
        assert self.made is not None
        record = self.made.by_id(key_id)
        return record is not None and record.tenant == tenant

    def _token(self, token: str) -> Principal | None:
        now = self.clock()
        cached = self._tokens.get(token)
        if cached is None:
            assert self.signer is not None
            claims = self.signer.verify(token)
            p = _token_principal(claims) if claims is not None else None
            if p is None or claims is None:
                return None
            cached = (p, int(claims["exp"]))
            if len(self._tokens) >= _CACHE_MAX:
                self._tokens.clear()
            self._tokens[token] = cached
        p, exp = cached
        if now >= exp:
            self._tokens.pop(token, None)
            return None
        return p if p.key_id is not None and self._alive(p.key_id, p.tenant) else None


def dev_key(data_dir: Path) -> ApiKey:
    """The local key `serve` creates when no keys are configured; kept across restarts."""
    path = data_dir / DEV_KEY_FILE
    if path.exists():
        return ApiKey.model_validate(json.loads(path.read_text()))
    key = ApiKey(key="vibe-dev-" + secrets.token_urlsafe(18), tenant="default",
                 principals=["user:dev"], scopes=["read", "write", "admin"])
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(key.model_dump_json())
    path.chmod(0o600)
    return key


def split_identity(bearer: str) -> tuple[str | None, str]:
    """(`identity`, `token`) of `<identity>@<token>`; (None, bearer) when there is no '@'
    (extract_key_info clients' `Authorization: Bearer <identity>@<token>`)."""
    identity, at, token = bearer.partition("@")
    return (identity, token) if at and identity and token else (None, bearer)
