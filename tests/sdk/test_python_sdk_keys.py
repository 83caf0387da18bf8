"""The Python SDK's keys and end-user tokens (create_key, list_keys, revoke_key, create_token),
sync and async, against the real served app; every JSON answer is checked against its
/openapi.json on the way in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from vibe_semantic_client import (
    AsyncClient,
    Client,
    Forbidden,
    KeyCreated,
    NotFound,
    Revoked,
    TokenCreated,
    Unauthorized,
)

from harness.openapi_responses import OpenApiResponses
from tests.sdk.conftest import ADMIN, ALICE


@pytest.fixture(scope="module")
def spec(base_url: str) -> OpenApiResponses:
    return OpenApiResponses(base_url)


@pytest.fixture(scope="module")
def admin(base_url: str, spec: OpenApiResponses) -> Iterator[Client]:
    http = httpx.Client(timeout=60, event_hooks={"response": [spec.check]})
    with http, Client(base_url, ADMIN, http_client=http) as c:
        yield c


def test_keys_and_tokens_round_trip(admin: Client, base_url: str) -> None:
    admin.put("kt", "red", {"team": "red", "title": "launch red"})
    admin.put("kt", "blue", {"team": "blue", "title": "launch blue"})
    made = admin.create_key("sdk bot", ["user:bot"], scopes=["read"], certs=["acme:gold"])
    assert isinstance(made, KeyCreated) and made.key.startswith("vsk_") and made.certs == ["acme:gold"]
    assert made.name == "sdk bot" and made.principals == ["user:bot"] and made.scopes == ["read"] and made.created_at
    listed = admin.list_keys().keys
    assert made.id in {k.id for k in listed} and made.key not in str(listed)
    with Client(base_url, made.key) as bot:
        token = bot.create_token(filter={"team": "red"}, ttl_seconds=600)
        assert isinstance(token, TokenCreated) and token.expires_at
        with pytest.raises(Forbidden):
            bot.create_token(principals=["user:admin"])
    with Client(base_url, token.token) as user:
        assert user.read("kt", "launch", strategy="keyword").ids == ["red"]
    assert admin.revoke_key(made.id) == Revoked(made.id, True)
    with pytest.raises(NotFound):
        admin.revoke_key(made.id)
    with Client(base_url, made.key, retries=0) as bot, pytest.raises(Unauthorized):
        bot.list_keys()
    boot = next(k for k in listed if k.bootstrap)
    with pytest.raises(Forbidden):
        admin.revoke_key(boot.id)


def test_async_keys_and_tokens(base_url: str) -> None:
    async def run() -> dict[str, Any]:
        async with AsyncClient(base_url, ADMIN) as a:
            made = await a.create_key("async bot", ["user:alice"], scopes=["read"])
            keys = await a.list_keys()
            revoked = await a.revoke_key(made["id"])
        async with AsyncClient(base_url, ALICE) as alice:
            token = await alice.create_token(scopes=["read"], ttl_seconds=60)
            with pytest.raises(Forbidden):
                await alice.list_keys()
        return {"made": made, "keys": keys, "revoked": revoked, "token": token}

    out = asyncio.run(run())
    assert out["made"].id in {k.id for k in out["keys"].keys}
    assert out["revoked"].revoked is True and out["token"].token.count(".") == 2
    assert out["revoked"]["revoked"] is True  # read as the dict it was before it was typed
