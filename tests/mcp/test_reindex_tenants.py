"""MCP `reindex` keeps the HTTP API's tenant and ACL rules: it overwrites or deletes an existing
document only if the caller may read it (README Security), a root bound to one tenant is
indexed by that tenant's keys only (not even through a root that holds it), and the background
queue is bounded per tenant, with a clear error when full."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.mcp.errors import QUOTA_EXCEEDED, ToolFailure
from services.mcp.jobs import Jobs
from services.mcp.reindex import Reindexer, file_id
from services.mcp.scope import CHUNK_SEP
from services.wiring import Container, build
from shared.config import Settings
from shared.model import DocKey, Principal

ALICE = Principal("ta", ("user:alice",), frozenset({"read", "write"}))
MAL = Principal("ta", ("user:mal",), frozenset({"read", "write"}))
BEA = Principal("tb", ("user:bea",), frozenset({"read", "write"}))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    top = tmp_path / "files"
    for d in ("a", "b"):
        (top / d).mkdir(parents=True)
    (top / "a" / "plans.md").write_text("# Plans\n\nTenant A's acquisition plans about zebras.\n")
    (top / "b" / "notes.md").write_text("# Notes\n\nTenant B's notes about giraffes.\n")
    (top / "common.md").write_text("# Common\n\nA shared handbook about okapis.\n")
    return top


@pytest.fixture
def c(tmp_path: Path, tree: Path) -> Iterator[Container]:
    container = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                               mcp_reindex_roots=[tree],
                               mcp_reindex_tenant_roots={"ta": [tree / "a"], "tb": [tree / "b"]}))
    try:
        yield container
    finally:
        container.store.close()


def _ids(c: Container, tenant: str) -> set[str]:
    return {k.doc_id for k in c.store.collection_keys(tenant, c.settings.mcp_collection)}


def test_reindex_does_not_overwrite_a_document_the_caller_cannot_read(c: Container, tree: Path) -> None:
    f = (tree / "a" / "plans.md").resolve()
    key = DocKey("ta", c.settings.mcp_collection, f"{file_id(f)}{CHUNK_SEP}0")
    mine = {"content": "alice's own text", "_acl": ["user:alice"]}
    c.docs.put([c.docs.parse(ALICE, key.collection, key.doc_id, mine)])
    out = Reindexer(c).run(MAL, str(f), None, True, None)
    assert out["indexed_files"] == 0 and out["skipped_files"] == 1
    kept = c.store.get_doc(key)
    assert kept is not None and kept.fields["content"] == "alice's own text" and kept.acl == ["user:alice"]
    # alice herself may rewrite it
    assert Reindexer(c).run(ALICE, str(f), None, True, None)["indexed_files"] == 1
    assert c.store.get_doc(key).fields["content"] != "alice's own text"  # type: ignore[union-attr]


def test_a_tenant_root_is_indexed_by_that_tenant_only(c: Container, tree: Path) -> None:
    r = Reindexer(c)
    with pytest.raises(ToolFailure) as refused:
        r.run(BEA, str(tree / "a"), None, False, None)  # tenant a's root, named directly
    assert refused.value.code == "invalid_params"
    with pytest.raises(ToolFailure):
        r.run(BEA, str(tree / "a" / "plans.md"), None, False, None)
    # the shared root holds tenant a's root: b indexes the rest of it, never a's files
    out = r.run(BEA, str(tree), None, False, None)
    assert out["indexed_files"] == 2  # common.md and b/notes.md
    paths = {d.fields["path"] for d in c.store.get_docs([DocKey("tb", c.settings.mcp_collection, i)
                                                         for i in _ids(c, "tb")]).values()}
    assert paths == {"common.md", "b/notes.md"}
    assert Reindexer(c).run(ALICE, str(tree / "a"), None, False, None)["indexed_files"] == 1
    with pytest.raises(ToolFailure):
        r.run(ALICE, str(tree / "b"), None, False, None)


def test_the_background_queue_is_bounded_per_tenant() -> None:
    jobs = Jobs(per_tenant=1)
    release = threading.Event()

    def slow() -> dict[str, Any]:
        release.wait(60)
        return {"ok": True}

    try:
        first = jobs.submit("owner-a", "reindex", slow, "ta")
        with pytest.raises(ToolFailure) as full:
            jobs.submit("owner-a2", "reindex", slow, "ta")  # another key of the same tenant too
        assert full.value.code == QUOTA_EXCEEDED and "limit is 1" in full.value.message
        other = jobs.submit("owner-b", "reindex", lambda: {"ok": True}, "tb")  # another tenant is not held
        release.set()
        deadline = time.monotonic() + 60
        while jobs.status("owner-a", first["job_id"])["status"] != "done":  # type: ignore[index]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert jobs.submit("owner-a", "reindex", lambda: {"ok": True}, "ta")["status"] == "queued"
        assert other["status"] == "queued"
    finally:
        release.set()
        jobs.close()
