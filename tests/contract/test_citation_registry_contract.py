"""One contract for every CitationRegistry adapter: SQLite in the data
dir and Redis (a private redis-server)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from harness.redis_server import RedisServer, redis_server
from harness.server import free_port
from services.wiring import build_citations as _citations
from shared.adapters.citations_redis import RedisCitationRegistry
from shared.adapters.citations_sqlite import SqliteCitationRegistry
from shared.agent_ports import CitationRegistry
from shared.config import Settings

Opener = Callable[[], CitationRegistry]


@pytest.fixture(scope="module")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("cite-redis")) as srv:
        yield srv


@pytest.fixture(params=["sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    if request.param == "sqlite":
        yield lambda: SqliteCitationRegistry(tmp_path / "cite.sqlite3")
        return
    srv: RedisServer = request.getfixturevalue("redis_srv")
    prefix = f"t:{tmp_path.name}"  # a fresh namespace per test on the shared server
    yield lambda: RedisCitationRegistry(srv.client(), prefix)


def _reg(r: CitationRegistry, conv: str, doc: str, owner: str = "alice") -> int:
    return r.register(owner, conv, "kb_chunk", {"doc": doc}, {"title": doc.upper()})


def test_numbers_are_monotonic_from_one_and_find_or_create(opener: Opener) -> None:
    r = opener()
    assert [_reg(r, "c1", d) for d in ("a", "b", "a", "c", "b")] == [1, 2, 1, 3, 2]
    entry = r.resolve("alice", "c1", 2)
    assert entry is not None and entry.locator == {"doc": "b"} and entry.display == {"title": "B"}
    assert entry.source_type == "kb_chunk" and entry.n == 2
    r.close()


def test_unknown_numbers_resolve_to_nothing(opener: Opener) -> None:
    r = opener()
    _reg(r, "c1", "a")
    assert r.resolve("alice", "c1", 2) is None and r.resolve("alice", "c1", 0) is None
    assert r.resolve("alice", "other", 1) is None
    r.close()


def test_owners_and_conversations_are_independent(opener: Opener) -> None:
    r = opener()
    assert (_reg(r, "c1", "a"), _reg(r, "c1", "b")) == (1, 2)
    assert _reg(r, "c2", "b") == 1
    assert _reg(r, "c1", "b", owner="bob") == 1
    assert _reg(r, "c1", "x", owner="al") == 1  # no prefix collision between owners
    assert r.resolve("bob", "c1", 2) is None
    r.close()


def test_numbers_survive_a_restart(opener: Opener) -> None:
    r = opener()
    _reg(r, "c1", "a")
    _reg(r, "c1", "b")
    r.close()
    again = opener()
    assert _reg(again, "c1", "b") == 2 and _reg(again, "c1", "z") == 3
    entry = again.resolve("alice", "c1", 1)
    assert entry is not None and entry.locator == {"doc": "a"}
    again.close()


def test_concurrent_registration_of_one_source_yields_one_number(opener: Opener) -> None:
    r = opener()
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: _reg(r, "c1", f"d{i % 5}"), range(200)))
    assert sorted(set(got)) == [1, 2, 3, 4, 5]
    assert all(got[i] == got[i % 5] for i in range(200))
    r.close()


def _register_in_child(url: str, prefix: str, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    r = RedisCitationRegistry(redis.Redis.from_url(url), prefix)
    q.put([_reg(r, "shared", f"d{i % 7}") for i in range(50)])


def test_two_processes_agree_on_numbers(redis_srv: RedisServer, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    q: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_register_in_child, args=(redis_srv.url, f"p:{tmp_path.name}", q))
             for _ in range(2)]
    for p in procs:
        p.start()
    a, b = q.get(timeout=60), q.get(timeout=60)
    for p in procs:
        p.join(30)
    assert a == b and sorted(set(a)) == list(range(1, 8))


def test_redis_registry_reloads_its_script_after_the_cache_is_flushed(redis_srv: RedisServer,
                                                                      tmp_path: Path) -> None:
    r = RedisCitationRegistry(redis_srv.client(), f"f:{tmp_path.name}")
    assert _reg(r, "c1", "a") == 1
    redis_srv.client().script_flush()  # what a Redis restart does to loaded scripts
    assert (_reg(r, "c1", "b"), _reg(r, "c1", "a")) == (2, 1)
    r.close()


def test_redis_down_is_a_redis_error_not_a_hang_or_a_crash(tmp_path: Path) -> None:
    # Built while Redis is down (the API must start); each call then raises redis.RedisError,
    # which services/mcp/invoke.py turns into the typed `db_error`.
    dead = f"redis://127.0.0.1:{free_port()}/0"
    r = RedisCitationRegistry.from_settings(Settings(data_dir=tmp_path, redis_url=dead))
    with pytest.raises(redis.RedisError):
        _reg(r, "c1", "a")
    with pytest.raises(redis.RedisError):
        r.resolve("alice", "c1", 1)
    r.close()


def test_runtime_picks_redis_with_the_celery_queue_and_sqlite_otherwise(redis_srv: RedisServer,
                                                                        tmp_path: Path) -> None:
    distributed = _citations(Settings(data_dir=tmp_path, queue="celery", redis_url=redis_srv.url))
    embedded = _citations(Settings(data_dir=tmp_path, queue="embedded"))
    assert isinstance(distributed, RedisCitationRegistry) and isinstance(embedded, SqliteCitationRegistry)
    assert _reg(distributed, "sel", "a") == 1
    assert any(k.startswith(b"vibe:cite:") for k in redis_srv.client().keys("*"))  # default namespace
    distributed.close()
    embedded.close()
