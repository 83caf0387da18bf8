"""The distributed profile with PostgreSQL as the system of record: the API and the Celery
worker share nothing but PostgreSQL and Redis (each has its own data dir, as on two hosts).
A read touches a cold document, the worker embeds it, and the API, whose embedded indexes
follow the change log in PostgreSQL, streams it as a `semantic` event."""

from __future__ import annotations

from pathlib import Path

from harness.celery_worker import celery_worker
from harness.redis_server import RedisServer
from harness.server import Served, ids, served
from tests.integration.distributed.conftest import celery_env, stream_semantic_hit, wait_for

# All but `cabin` share "load", so a query for gust loads touches three cold documents; the
# ranking then changes as their vectors arrive (a `semantic` event is sent only on a change).
DOCS = [{"_id": "wing", "title": "Wing flutter report", "body": "flutter margin of the outer wing under load"},
        {"_id": "gust", "title": "Gust alleviation", "body": "gust load alleviation on approach"},
        {"_id": "gear", "title": "Landing gear", "body": "shimmy damper of the nose gear, load cases"},
        {"_id": "cabin", "title": "Cabin lighting", "body": "reading lights and their dimmer"}]


def _coverage(app: Served) -> dict[str, object]:
    return dict(app.call("GET", "/semantic/coverage?collection=reports", "k-admin-a").json())


def test_api_and_worker_share_only_postgres_and_redis(redis_srv: RedisServer, postgres_url: str,
                                                      tmp_path: Path) -> None:
    pg = {"VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4"}
    api_dir, worker_dir = tmp_path / "api" / "data", tmp_path / "worker" / "data"
    with served(api_dir, env=celery_env(redis_srv.url, api_dir, **pg)) as app, \
            celery_worker(celery_env(redis_srv.url, worker_dir, **pg), tmp_path / "logs") as worker:
        assert app.bulk("k-admin-a", "reports", DOCS).status_code == 200
        assert app.status("k-admin-a", "reports", "gust") == "none"  # lazy: nothing embedded on write

        stream_semantic_hit(app, "gust load alleviation", "gust")  # touched, embedded by the worker, streamed
        assert '"embed batch done"' in worker.log()

        wait_for(lambda: _coverage(app)["ready"] == 3, 10, "coverage to count the touched documents ready")
        cov = _coverage(app)
        assert cov["total"] == 4 and cov["states"]["none"] == 1  # type: ignore[index]
        # Nothing of the store is on disk: SQLite was never opened by either process.
        assert not (api_dir / "vibe.sqlite3").exists() and not (worker_dir / "vibe.sqlite3").exists()

    # A new API process on an empty data dir rebuilds its indexes from PostgreSQL's change log.
    fresh = tmp_path / "api2" / "data"
    with served(fresh, env=celery_env(redis_srv.url, fresh, **pg)) as again:
        sem = again.read("k-admin-a", collection="reports", q="gust load alleviation",
                         semantic={"strategy": "semantic"})
        assert ids(sem.json()["results"])[0] == "gust" and "cabin" not in ids(sem.json()["results"])
        lex = again.read("k-admin-a", collection="reports", q="shimmy damper", semantic={"strategy": "keyword"})
        assert ids(lex.json()["results"]) == ["gear"]
