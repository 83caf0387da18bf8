from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.wiring import build
from shared.config import Settings, retired_settings


def test_a_space_refuses_an_embedder_of_another_model_or_dimension(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path, embedder="hash", embed_dim=64))
    c.store.close()
    with pytest.raises(RuntimeError, match="holds vectors of hash:v1@64"):
        build(Settings(data_dir=tmp_path, embedder="hash", embed_dim=32))
    other = build(Settings(data_dir=tmp_path, embedder="hash", embed_dim=32, space="core-v2"))
    assert other.embedder.dim == 32
    other.store.close()


def test_celery_queue_and_redis_budget_are_chosen_without_a_reachable_broker(tmp_path: Path) -> None:
    from shared.adapters.celery_queue import CeleryQueue
    from shared.adapters.redis_budget import RedisBudget

    c = build(Settings(data_dir=tmp_path, embedder="hash", queue="celery", redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(c.queue, CeleryQueue) and isinstance(c.planner.budget, RedisBudget)
    assert c.queue.enqueue([]) == 0 and c.planner.budget.take("t", 3) == 0  # Redis down: no raise
    c.store.close()


def test_profile_sets_adapter_defaults() -> None:
    s = Settings(profile="distributed")
    assert (s.queue, s.lexical, s.vectors, s.store) == ("celery", "opensearch", "qdrant", "postgres")
    s = Settings(profile="distributed", queue="embedded")
    assert s.queue == "embedded" and s.lexical == "opensearch"
    assert Settings().store == "sqlite" and Settings(profile="distributed", store="sqlite").store == "sqlite"


def test_the_store_follows_settings(tmp_path: Path, postgres_url: str) -> None:
    from services.wiring import build_store
    from shared.adapters.postgres_store import PostgresStore
    from shared.adapters.sqlite_store import SqliteStore

    pg = build_store(Settings(data_dir=tmp_path, store="postgres", postgres_url=postgres_url, postgres_pool_size=2))
    assert isinstance(pg, PostgresStore) and not (tmp_path / "vibe.sqlite3").exists()
    pg.close()
    lite = build_store(Settings(data_dir=tmp_path))
    assert isinstance(lite, SqliteStore)
    lite.close()


def test_a_start_adopts_the_cold_files_an_unsafe_space_name_wrote_before_e435828(tmp_path: Path) -> None:
    """A tenant's `core@v2` wrote its cold files under `core_v2` before names got directories of
    their own; the next start moves them where the cold store reads them (rehydration, not a
    provider call) and deletes them (retention, pruning)."""
    from services.wiring import build_cold
    from shared.adapters.cold_files import FileColdStore, space_dir
    from shared.model import SpaceInfo

    s = Settings(data_dir=tmp_path, embedder="hash", embed_dim=32, scheduler_enabled=False)
    c = build(s)
    c.store.put_tenant_space(SpaceInfo("t", "core@v2", "hash:v1@32", 32, "active", 0.0, 0.0))
    root = tmp_path / "cold"
    FileColdStore(root).put("t", "core@v2", "h1", [0.6, 0.8])  # the file layout, as then
    (root / space_dir("core@v2")).rename(root / "core_v2")  # where the previous version put it
    cold = build_cold(s)  # packed, reading files evicted before it
    assert cold.get("t", "core@v2", "h1") is None
    c.stop()
    c = build(s)
    c.start()
    try:
        assert cold.get("t", "core@v2", "h1") == pytest.approx([0.6, 0.8], abs=1e-3)
        assert not (root / "core_v2").exists()
    finally:
        c.stop()


def test_a_retired_research_setting_is_named_at_start_not_silently_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VIBE_TOUCH_DEPTH_FACTOR", "3")
    (tmp_path / ".env").write_text("export vibe_touch_policy=dig\nVIBE_RRF_K=60\n# VIBE_TOUCH_DIG_MAX=9\n")
    assert retired_settings() == ["VIBE_TOUCH_DEPTH_FACTOR", "vibe_touch_policy"]
    with caplog.at_level(logging.WARNING, logger="vibe.settings"):
        c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=64))
        c.store.close()
    named = [r.getMessage() for r in caplog.records if r.name == "vibe.settings"]
    assert [m.split()[0] for m in named] == ["VIBE_TOUCH_DEPTH_FACTOR", "vibe_touch_policy"]
    assert retired_settings({"VIBE_RRF_K": "60", "VIBE_TOUCH_FOLLOW_UP": "auto"}, tmp_path / "none") == []
