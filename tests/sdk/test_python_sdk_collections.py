"""The Python SDK's collection calls (list_collections, delete_collection, delete_by_filter,
collection_settings, put_collection_settings), sync and async, against the real served app;
every JSON answer is checked against its /openapi.json on the way in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from vibe_semantic_client import (
    AsyncClient,
    Client,
    CollectionDeleted,
    CollectionSettings,
    DeletedByFilter,
    Forbidden,
    InvalidParams,
)
from vibe_semantic_client.answers import CollectionItem

from harness.openapi_responses import OpenApiResponses
from tests.sdk.conftest import ADMIN, ALICE, BOB


@pytest.fixture(scope="module")
def admin(base_url: str) -> Iterator[Client]:
    http = httpx.Client(timeout=60, event_hooks={"response": [OpenApiResponses(base_url).check]})
    with http, Client(base_url, ADMIN, http_client=http) as c:
        yield c


def test_collections_round_trip(admin: Client, base_url: str) -> None:
    admin.bulk("sdk-c", [{"_id": f"n{i}", "title": f"note {i}", "kind": "draft" if i % 2 else "final"}
                         for i in range(6)])
    listed = {c.name: c for c in admin.list_collections().collections}
    assert isinstance(listed["sdk-c"], CollectionItem) and listed["sdk-c"].documents == 6
    with Client(base_url, BOB) as bob:
        assert "documents" not in {c.name: c for c in bob.list_collections().collections}["sdk-c"]
        with pytest.raises(Forbidden):
            bob.delete_by_filter("sdk-c", {"kind": "draft"})
    with Client(base_url, ALICE) as alice:
        first = alice.delete_by_filter("sdk-c", {"kind": "draft"}, limit=2)
        assert isinstance(first, DeletedByFilter) and first.deleted == 2 and first.more is True
        rest = alice.delete_by_filter("sdk-c", {"kind": "draft"}, after=first.after)
        assert rest.deleted == 1 and rest.more is False
    got = admin.put_collection_settings("sdk-c", embed_fields=["title"], eager=True)  # the Python names are sent
    assert isinstance(got, CollectionSettings) and got.embed_fields == ["title"] and got.eager is True
    assert admin.collection_settings("sdk-c").embed_fields == ["title"]
    assert admin.put_collection_settings("sdk-c", embedFields=None).embed_fields is None  # the default again
    with pytest.raises(InvalidParams):
        admin.put_collection_settings("sdk-c", language="klingon")
    gone = admin.delete_collection("sdk-c")
    assert isinstance(gone, CollectionDeleted) and (gone.state, gone.deleted, gone.remaining) == ("deleted", 3, 0)
    assert "sdk-c" not in {c.name for c in admin.list_collections().collections}


def test_async_collections(base_url: str) -> None:
    async def run() -> tuple[Any, ...]:
        async with AsyncClient(base_url, ADMIN) as a:
            await a.put("sdk-a", "x", {"title": "one"})
            listed = await a.list_collections(limit=1000)
            settings = await a.put_collection_settings("sdk-a", filterableFields=["year"])
            deleted = await a.delete_by_filter("sdk-a", {})
            gone = await a.delete_collection("sdk-a")
            return listed, settings, deleted, gone

    listed, settings, deleted, gone = asyncio.run(run())
    assert "sdk-a" in {c["name"] for c in listed["collections"]}
    assert settings["filterableFields"] == ["year"]
    assert deleted["deleted"] == 1 and gone["state"] == "deleted"
