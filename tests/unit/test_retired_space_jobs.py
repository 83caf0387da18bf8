"""Jobs of a space the tenant no longer reads or builds never reach the provider, and two
requests that start a migration at once do not both start one.

- A cut-over retires the old space while its jobs still wait (touches of the old space among
  them): the handler now drops them and puts their rows back to `none`, as the reconciler does.
  Before, they were embedded with the old model for a space nobody reads (seen in the
  distributed profile: 20 provider inputs after a forced activation), then moved cold.
- `start_migration` runs under a per-tenant lease; the second of two concurrent requests
  answers `conflict` (before, both answered 202 with different scopes and two tasks ran)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.api.spaces import activate, start_migration
from shared.errors import VibeError
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus
from tests.support.counting import CountingEmbedder
from tests.unit.test_scheduler_switch import embed_now, running

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))


def test_a_job_of_a_retired_space_makes_no_provider_call(tmp_path: Path) -> None:
    emb = CountingEmbedder(32)
    with running(tmp_path, emb) as c:
        c.docs.put([c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                    for i in range(3)])
        key = DocKey("t", "c", "d0")
        start_migration(c, "t", "v2", "hash:v1@16", None, scope="ready")  # nothing ready: nothing to embed
        assert activate(c, "t", "v2", False)["retired"] == "core"
        side = c.store.sidecar(key, "core")
        assert side is not None
        # a touch of the old space that was queued before the cut-over, delivered after it
        c.store.set_status([key], "core", SemanticStatus.QUEUED)
        before = emb.inputs
        out = c.handler.run([EmbedJob(key, "core", side.content_hash)])
        assert emb.inputs == before  # no provider call
        after = c.store.sidecar(key, "core")
        assert after is not None and after.status == SemanticStatus.NONE
        assert key in out.changed
        embed_now(c, "v2", key)  # a job of the active space still embeds


def test_a_second_migration_request_at_the_same_time_is_refused(tmp_path: Path) -> None:
    with running(tmp_path) as c:
        c.docs.put([c.docs.parse(USER, "c", "d0", {"title": "Doc", "body": "wing flutter case"})])
        with c.store.lease("migration:t") as held:  # another replica is starting one now
            assert held
            with pytest.raises(VibeError, match="another request is starting a migration"):
                start_migration(c, "t", "v2", "hash:v1@16", None, scope="ready")
        assert [s.space for s in c.store.tenant_spaces("t")] == []  # refused: nothing changed
        assert start_migration(c, "t", "v2", "hash:v1@16", None, scope="ready")["scope"] == "ready"
