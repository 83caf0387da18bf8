"""The Python and TypeScript SDKs offer the same calls under the same names, meaning the same thing.

The TypeScript `Client`'s public methods are read from sdk/typescript/src/client.ts; the Python
ones from `Client` and `AsyncClient`. Each Python name is listed with its TypeScript name below,
so a method added to one SDK only fails here until the other has it too (or it is allowed, with
the reason, as an intentional difference).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from vibe_semantic_client import AsyncClient, Client
from vibe_semantic_client import _core as core

from harness.server import REPO

CLIENT_TS = REPO / "sdk" / "typescript" / "src" / "client.ts"

# Python name → TypeScript name: snake_case ↔ camelCase of the same words, nothing else.
SAME_CALLS = {
    # documents
    "put": "put", "get": "get", "delete": "delete", "mget": "mget", "bulk": "bulk",
    # reads: `read` is the one JSON answer, `read_once` the stream (lexical → semantic → done)
    "read": "read", "read_once": "readOnce", "pages": "pages", "explain": "explain",
    # admin
    "coverage": "coverage", "status": "status", "promotions": "promotions", "scheduler": "scheduler",
    "promote": "promote", "demote": "demote", "queue_depth": "queueDepth", "lag": "lag", "reindex": "reindex",
    "usage": "usage", "spaces": "spaces", "evict": "evict", "create_space": "createSpace",
    "activate_space": "activateSpace", "mismatch": "mismatch", "backfills": "backfills",
    "dead_letters": "deadLetters", "touch": "touch", "ledger": "ledger",
    # collections
    "list_collections": "listCollections", "delete_collection": "deleteCollection",
    "delete_by_filter": "deleteByFilter", "collection_settings": "collectionSettings",
    "put_collection_settings": "putCollectionSettings",
    # keys, end-user tokens, health
    "create_key": "createKey", "list_keys": "listKeys", "revoke_key": "revokeKey", "create_token": "createToken",
    "health": "health",
}

# Intentional differences, each with its reason.
PYTHON_ONLY = {
    "stream": "the streaming read's name before `read_once` took it: an alias, kept for older code and the CLI",
    "close": "`Client` owns an httpx connection pool to release (TypeScript's fetch has none)",
    "aclose": "`AsyncClient`'s `close`",
}
TYPESCRIPT_ONLY: dict[str, str] = {}

# `  name(`, `  async name(`, `  async *name(` at the class's indentation; `private` ones excluded.
_TS_METHOD = re.compile(r"^  (?:async )?\*?([a-zA-Z]\w*)(?:<[^>]*>)?\(", re.MULTILINE)


def typescript_methods(source: str) -> set[str]:
    body = source.split("export class Client {", 1)[1].split("\n}\n", 1)[0]
    return set(_TS_METHOD.findall(body)) - {"constructor"}


def python_methods(cls: type) -> set[str]:
    client = cls("http://127.0.0.1:9", "k")
    return {name for name in dir(client) if not name.startswith("_") and callable(getattr(client, name))}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


def test_the_mapping_only_changes_the_case() -> None:
    assert {py: ts for py, ts in SAME_CALLS.items() if _camel(py) != ts} == {}


def test_the_typescript_parser_finds_methods() -> None:
    """The parser itself: public methods found (also generators and generics), private ones not."""
    src = ("export class Client {\n  readonly baseUrl: string;\n  constructor(o: O) {}\n  put(c: string): P {}\n"
           "  async *pages(b: B): G {}\n  private async json<T>(r: R): Promise<T> {}\n"
           "  async revokeKey(id: string) {\n    if (x) return;\n  }\n}\n\nfunction seg(s: string) {}\n")
    assert typescript_methods(src) == {"put", "pages", "revokeKey"}


def test_both_sdks_have_the_same_calls() -> None:
    ts = typescript_methods(CLIENT_TS.read_text())
    assert ts - set(SAME_CALLS.values()) - set(TYPESCRIPT_ONLY) == set(), "TypeScript only: add them to Python"
    assert set(SAME_CALLS.values()) - ts == set(), "Python only: add them to TypeScript (client.ts)"
    for cls, own in ((Client, {"close"}), (AsyncClient, {"aclose"})):
        py = python_methods(cls)
        assert py - set(SAME_CALLS) - set(PYTHON_ONLY) == set(), f"{cls.__name__} only: add them to TypeScript"
        assert set(SAME_CALLS) - py == set(), f"missing from {cls.__name__}"
        assert {"stream"} | own <= py


def test_read_options_build_the_typescript_body() -> None:
    """Python's read arguments are the same names, in the same place, as TypeScript's `ReadBody`."""
    body = core.read_body("posts", "consent", "hybrid", 5, {
        "filter": {"year": {"gte": 2020}}, "cursor": "c1", "include": {"fields": ["title"]}, "highlights": True,
        "k": 50, "query_text": "privacy by design", "global_": True, "rerank": True})
    assert body == {"collection": "posts", "q": "consent", "limit": 5, "filter": {"year": {"gte": 2020}},
                    "cursor": "c1", "global": True, "rerank": True,
                    "include": {"fields": ["title"], "highlights": True},
                    "semantic": {"strategy": "hybrid", "k": 50, "query": {"text": "privacy by design"}}}


# Each call's answer type as a type checker sees it, on both clients (`endpoint` is what gives the
# async client awaitables of the same types): a method that lost its type fails here.
TYPED_USE = '''
from typing import assert_type
from vibe_semantic_client import (AsyncClient, AsyncReadStream, Client, Coverage, Explanation, Keys, ReadAnswer,
                                  ReadStream, Revoked, Spaces, Usage, Written)

def sync(c: Client) -> None:
    assert_type(c.coverage("posts"), Coverage)
    assert_type(c.usage("posts", days=7), Usage)
    assert_type(c.spaces(), Spaces)
    assert_type(c.list_keys(), Keys)
    assert_type(c.revoke_key("k1"), Revoked)
    assert_type(c.put("posts", "p1", {}), Written)
    assert_type(c.explain("e1"), Explanation)
    assert_type(c.read("posts", "q"), ReadAnswer)
    assert_type(c.read_once("posts", "q"), ReadStream)
    assert_type(c.stream("posts", "q"), ReadStream)
    assert_type(c.read_once("posts", "q").final(), ReadAnswer)

async def asynchronous(a: AsyncClient) -> None:
    assert_type(await a.coverage("posts"), Coverage)
    assert_type(await a.usage(days=7), Usage)
    assert_type(await a.list_keys(), Keys)
    assert_type(await a.read("posts", "q"), ReadAnswer)
    assert_type(a.read_once("posts", "q"), AsyncReadStream)
    assert_type(await a.read_once("posts", "q").final(), ReadAnswer)
    a.coverage(3)  # E: a wrong argument type is an error
'''


def test_answers_are_typed_for_a_type_checker(tmp_path: Path) -> None:
    (tmp_path / "use.py").write_text(TYPED_USE)
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--python-version", "3.11",
                        "--config-file", "", str(tmp_path / "use.py")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    wrong = next(n for n, line in enumerate(TYPED_USE.splitlines(), 1) if "# E:" in line)
    # exactly the one deliberate error: everything else type-checks as written
    assert len(errors) == 1 and f"use.py:{wrong}:" in errors[0], r.stdout + r.stderr
