"""An open stream stops at the first event after its key or token stops being valid."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import orjson

from services.api.routes_read import _while_authorized
from shared.model import Principal

ALICE = Principal("t", ("user:alice",), frozenset({"read"}))


class Keys:
    def __init__(self) -> None:
        self.valid = True

    def lookup(self, token: str) -> Principal | None:
        return ALICE if self.valid and token == "k" else None


def _request(keys: Keys) -> Any:
    return SimpleNamespace(headers={"authorization": "Bearer k"}, app=SimpleNamespace(state=SimpleNamespace(keys=keys)))


async def _events(keys: Keys, closed: list[bool]) -> AsyncIterator[tuple[str, bytes]]:
    try:
        yield "lexical", b"{}"
        keys.valid = False  # revoked while the stream is open, before its next event
        yield "semantic", b'{"results": ["r1"]}'
        yield "done", b"{}"
    finally:
        closed.append(True)


async def _collect(keys: Keys, closed: list[bool]) -> list[tuple[str, bytes]]:
    session: Any = SimpleNamespace(failed=False)
    out = [e async for e in _while_authorized(_request(keys), session, _events(keys, closed))]
    assert session.failed
    return out


def test_a_revoked_bearer_ends_the_stream_with_unauthorized() -> None:
    closed: list[bool] = []
    events = asyncio.run(_collect(Keys(), closed))
    assert [name for name, _ in events] == ["lexical", "error"]
    assert orjson.loads(events[-1][1])["code"] == "unauthorized"
    assert closed == [True]  # the session's own generator was closed, so its cleanup ran


def test_a_valid_bearer_streams_every_event() -> None:
    keys = Keys()

    async def steady() -> AsyncIterator[tuple[str, bytes]]:
        for name in ("lexical", "semantic", "done"):
            yield name, b"{}"

    async def run() -> list[str]:
        session: Any = SimpleNamespace(failed=False)
        return [n async for n, _ in _while_authorized(_request(keys), session, steady())]

    assert asyncio.run(run()) == ["lexical", "semantic", "done"]
