"""Two API processes on one PostgreSQL (each with its own data dir and indexes): a promotion
made through one applies to the very next write through the other, and both show it; an
eviction made through one is rehydrated by a touch through the other."""

from __future__ import annotations

from pathlib import Path

from harness.server import served

BODY = " about flutter margins, gust loads and certification of composite wings"


def test_a_promotion_is_seen_at_once_by_another_replica(postgres_url: str, tmp_path: Path) -> None:
    pg = {"VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
          "VIBE_COLD_DIR": str(tmp_path / "cold-volume")}  # the volume every replica mounts
    with served(tmp_path / "a" / "data", env=pg) as a, served(tmp_path / "b" / "data", env=pg) as b:
        assert a.call("POST", "/semantic/promote", "k-admin-a", {"collection": "hot"}).status_code == 200
        assert b.put("k-admin-a", "hot", "x", {"title": "Eager", "body": "x" + BODY}).status_code == 201
        assert b.status("k-admin-a", "hot", "x") in ("queued", "ready")  # eager at once, no restart
        assert b.wait_status("k-admin-a", "hot", "x", "ready", timeout=30) == "ready"
        modes = b.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"]
        assert [(m["collection"], m["state"], m["reason"]) for m in modes] == [("hot", "eager", "manual")]
        assert b.call("DELETE", "/semantic/promote?collection=hot", "k-admin-a").status_code == 200
        assert a.put("k-admin-a", "hot", "y", {"title": "Lazy", "body": "y" + BODY}).status_code == 201
        assert a.status("k-admin-a", "hot", "y") == "none"  # the demotion made through B applies in A

        r = a.call("POST", "/semantic/evict", "k-admin-a", {"collection": "hot", "idleSeconds": 0})
        assert r.json()["evicted"] == 1 and b.status("k-admin-a", "hot", "x") == "cold"
        b.read("k-admin-a", collection="hot", q="eager flutter", semantic={"strategy": "keyword"})
        assert b.wait_status("k-admin-a", "hot", "x", "ready", timeout=30) == "ready"
        assert "vibe_rehydrations_total 1.0" in b.call("GET", "/metrics", None).text  # from A's eviction
        hits = a.read("k-admin-a", collection="hot", q="flutter", semantic={"strategy": "semantic"}).json()["results"]
        assert "x" in {h["id"] for h in hits}
