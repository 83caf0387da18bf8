"""Space names are per tenant: two tenants' spaces of one name hold their own models, and no
tenant's space keeps the operator from configuring its name (VIBE_SPACE), also in a data dir
written while names were global."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.api.spaces import start_migration
from services.wiring import build, build_store
from shared.config import Settings
from shared.errors import VibeError
from shared.model import DocKey, SemanticStatus, SidecarEntry, SpaceInfo
from tests.support.legacy_rows import bind_space_globally, leave_row_of_gone_document


def settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(data_dir=tmp_path, embedder="hash", embed_dim=32, scheduler_enabled=False, **kw)  # type: ignore[arg-type]


def test_two_tenants_bind_one_space_name_to_two_models(tmp_path: Path) -> None:
    c = build(settings(tmp_path))
    try:
        a = start_migration(c, "ta", "core@v2", "hash:v1@8", None)
        b = start_migration(c, "tb", "core@v2", "hash:v1@16", None)
        assert (a["dim"], b["dim"]) == (8, 16)
        assert c.embedders("core@v2", "ta").dim == 8 and c.embedders("core@v2", "tb").dim == 16
        assert c.store.tenant_space_binding("tb", "core@v2") == ("hash:v1@16", 16)
        assert c.store.space_binding("core@v2") is None  # the operator's names are untouched
        with pytest.raises(VibeError) as e:  # within a tenant, a space still holds one model
            start_migration(c, "tb", "core@v2", "hash:v1@24", None)
        assert e.value.code.code == "dimension_mismatch"
        with pytest.raises(VibeError) as e:  # the configured space is the operator's model for all
            start_migration(c, "tc", "core", "hash:v1@8", None)
        assert e.value.code.code in ("dimension_mismatch", "conflict")
    finally:
        c.stop()


def test_an_old_data_dir_whose_tenant_took_the_name_still_starts_with_it_configured(tmp_path: Path) -> None:
    store = build_store(settings(tmp_path))
    bind_space_globally(store, SpaceInfo("ta", "core@v3", "hash:v1@8", 8, "building", 1.0))
    store.close()
    c = build(settings(tmp_path, space="core@v3"))  # refused before: "space 'core@v3' holds vectors of hash:v1@8"
    try:
        assert c.store.space_binding("core@v3") == ("hash:v1@32", 32)
        assert c.store.tenant_space_binding("ta", "core@v3") == ("hash:v1@8", 8)
    finally:
        c.stop()


def test_an_old_binding_the_configured_space_served_with_stays(tmp_path: Path) -> None:
    """Tenant tb read `core@v3` with no row of its own: the operator configured it with hash:v1@8,
    so a start with another model of that name is still refused (dim safety), tenant rows or not."""
    store = build_store(settings(tmp_path))
    bind_space_globally(store, SpaceInfo("ta", "core@v3", "hash:v1@8", 8, "retired", 1.0))
    leave_row_of_gone_document(store, SidecarEntry(DocKey("tb", "c", "d"), "core@v3", SemanticStatus.READY,
                                                   "h", updated_at=1.0))
    store.close()
    with pytest.raises(RuntimeError, match="holds vectors of hash:v1@8"):
        build(settings(tmp_path, space="core@v3"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_release_keeps_what_the_operator_bound_on_both_stores(tmp_path: Path, kind: str,
                                                              request: pytest.FixtureRequest) -> None:
    extra = {"store": "postgres", "postgres_url": request.getfixturevalue("postgres_url"),
             "postgres_pool_size": 2} if kind == "postgres" else {}
    store = build_store(settings(tmp_path, **extra))
    try:
        bind_space_globally(store, SpaceInfo("ta", f"x-{kind}", "hash:v1@8", 8, "building", 1.0))
        store.bind_space(f"op-{kind}", "hash:v1@8", 8)  # the operator's: no tenant row names it
        assert not store.release_space_binding(f"op-{kind}", "hash:v1@8", 8)
        assert not store.release_space_binding(f"x-{kind}", "hash:v1@9", 9)  # not what is bound
        assert store.release_space_binding(f"x-{kind}", "hash:v1@8", 8)
        assert store.space_binding(f"x-{kind}") is None and store.space_binding(f"op-{kind}") == ("hash:v1@8", 8)
    finally:
        store.close()
