"""KeyStore contract (shared/adapters/keys_sql.py) against SQLite and PostgreSQL alike, with the
`opener`/`store` fixtures of the DocumentStore contract; and the per-process view of it
(services/api/auth.py `MadeKeys`, `KeyRing`): how often a lookup reaches the store, counted
(a lookup runs on every request)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from services.core.keyring import KeyRing, MadeKeys
from services.wiring import build_key_store
from shared.config import ApiKey
from shared.keys import KeyRecord, KeyStore, TooManyKeys, new_key, secret_hash
from shared.model import Principal
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener, store  # noqa: F401 - fixtures


@pytest.fixture
def keys(store: StoreOfRecord) -> KeyStore:  # noqa: F811 - the imported fixture
    return build_key_store(store)


def _new(tenant: str = "t", name: str = "k") -> tuple[KeyRecord, str]:
    return new_key(tenant, name, ["user:a", "group:b"], ["acme:gold"], ["read", "write"], time.time())


def test_create_find_list_and_revoke(keys: KeyStore, opener: Opener) -> None:  # noqa: F811
    gen = keys.key_generation()
    record, secret = _new()
    keys.create_key(record, 10)
    assert keys.key_generation() > gen
    assert record.secret_hash == secret_hash(secret) and secret not in repr(record)
    assert keys.key_by_hash(secret_hash(secret)) == record
    assert keys.key_by_id(record.id) == record
    other, _ = _new("u")
    keys.create_key(other, 10)
    assert keys.keys_of("t") == [record] and keys.keys_of("u") == [other]
    assert {r.id for r in keys.all_keys()} == {record.id, other.id}
    assert not keys.revoke_key("u", record.id)  # another tenant's id looks absent
    gen = keys.key_generation()
    assert keys.revoke_key("t", record.id)
    assert keys.key_generation() > gen
    assert keys.key_by_hash(record.secret_hash) is None and keys.key_by_id(record.id) is None
    assert not keys.revoke_key("t", record.id)
    # a second opening of the same store (another process) sees the same rows; the DDL is idempotent
    again = opener()
    try:
        assert build_key_store(again).keys_of("u") == [other]  # type: ignore[arg-type]
    finally:
        again.close()


def test_keys_per_tenant_are_bounded_even_by_concurrent_creates(keys: KeyStore) -> None:
    errors: list[BaseException] = []

    def make() -> None:
        try:
            keys.create_key(_new()[0], 3)
        except TooManyKeys as e:
            errors.append(e)

    threads = [threading.Thread(target=make) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys.keys_of("t")) == 3 and len(errors) == 3
    keys.create_key(_new("other")[0], 3)  # another tenant counts its own


class Counting:
    """A KeyStore that counts the calls made to it."""

    def __init__(self, inner: KeyStore):
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)

        def counted(*a: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*a, **kw)
        return counted


def test_lookups_reach_the_store_at_most_once_a_refresh(keys: KeyStore) -> None:
    record, secret = _new()
    keys.create_key(record, 10)
    counting = Counting(keys)
    now = [100.0]
    made = MadeKeys(counting, refresh=0.5, clock=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(1000):
        p = made.by_secret(secret)
        assert p is not None and p.key_id == record.id and p.certs == frozenset({"acme:gold"})
    assert counting.calls == {"key_generation": 1, "all_keys": 1}
    for _ in range(100):  # an unknown key: one store query, then remembered until the keys change
        assert made.by_secret("vsk_unknown") is None
    assert counting.calls == {"key_generation": 1, "all_keys": 1, "key_by_hash": 1}
    keys.revoke_key("t", record.id)
    assert made.by_secret(secret) is not None  # within the refresh window: the snapshot
    now[0] += 0.5
    assert made.by_secret(secret) is None  # the generation moved: re-read
    assert counting.calls["key_generation"] == 2 and counting.calls["all_keys"] == 2


def test_a_key_made_by_another_process_works_at_once(keys: KeyStore) -> None:
    now = [0.0]
    made = MadeKeys(keys, refresh=0.5, clock=lambda: now[0])
    assert made.by_secret("vsk_x") is None  # snapshot taken
    record, secret = _new()
    keys.create_key(record, 10)  # elsewhere, after the snapshot
    found = made.by_secret(secret)
    assert found is not None and found.key_id == record.id


def test_tokens_verify_once_and_die_with_their_key(keys: KeyStore) -> None:
    ring = KeyRing([ApiKey(key="boot", tenant="t", principals=["user:boot"], scopes=["read", "admin"])])
    ring.attach(keys, b"s" * 32, 0.5)
    now = [time.time()]  # PyJWT checks `exp` on the wall clock when it first verifies
    ring.clock = lambda: now[0]
    assert ring.made is not None and ring.signer is not None
    ring.made.clock = lambda: now[0]
    record, secret = _new()
    keys.create_key(record, 10)
    minter = ring.lookup(secret)
    boot = ring.lookup("boot")
    assert minter is not None and boot is not None and boot.key_id and ring.is_bootstrap(boot.key_id)
    token, exp = ring.signer.mint(minter, ["user:a"], [], ["read"], {"team": "red"}, 60, now[0])
    p = ring.lookup(token)
    assert isinstance(p, Principal) and p.via_token and p.key_id == record.id and p.tenant == "t"
    assert p.filter and p.filter[0].field == "team" and p.admits({"team": "red"}) and not p.admits({"team": "x"})
    verified: list[str] = []
    real = ring.signer.verify

    def counted(token: str) -> dict[str, Any] | None:
        verified.append(token)
        return real(token)

    ring.signer.verify = counted  # type: ignore[method-assign]
    for _ in range(100):
        assert ring.lookup(token) == p
    assert verified == []  # verified once, when first seen
    boot_token, _ = ring.signer.mint(boot, ["user:x"], [], ["read"], None, 60, now[0])
    now[0] = exp  # expired: `exp` is the first second it is refused
    assert ring.lookup(token) is None
    now[0] = exp - 30
    keys.revoke_key("t", record.id)
    now[0] += 1  # past the refresh
    assert ring.lookup(token) is None and ring.lookup(secret) is None
    assert ring.lookup(boot_token) is not None  # a bootstrap key's tokens live while the key is configured
    other = KeyRing([])
    other.attach(keys, b"s" * 32, 0.5)
    assert other.lookup(boot_token) is None  # that bootstrap key is not configured there
    wrong = KeyRing([ApiKey(key="boot", tenant="t")])
    wrong.attach(keys, b"t" * 32, 0.5)
    assert wrong.lookup(boot_token) is None  # another secret


def test_a_store_away_keeps_the_last_snapshot(keys: KeyStore) -> None:
    """Nothing can be revoked while the store is away (a revocation is a store write): the keys
    known before still authenticate, and the failure is not retried on every request."""
    record, secret = _new()
    keys.create_key(record, 10)
    counting = Counting(keys)
    now = [0.0]
    made = MadeKeys(counting, refresh=0.5, clock=lambda: now[0])  # type: ignore[arg-type]
    assert made.by_secret(secret) is not None

    def away() -> int:
        counting.calls["away"] = counting.calls.get("away", 0) + 1
        raise ConnectionError("store away")

    counting.inner = type("Away", (), {"key_generation": staticmethod(away)})()  # type: ignore[assignment]
    now[0] += 1
    for _ in range(50):
        found = made.by_secret(secret)
        assert found is not None and found.key_id == record.id
    assert counting.calls["away"] == 1
