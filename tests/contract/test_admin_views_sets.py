"""The admin views' set-based store reports (`vector_audit`, `stuck_count`) answer what the
per-document walk they replace answered, on both stores of record, in a number of statements
that does not grow with the tenant's documents."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from services.api.routes_admin import _lag, _mismatch
from services.wiring import build
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.store_reports import coverage_report
from shared.config import Settings
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import DocumentStore

S = SemanticStatus
DIM = 8
SPACE = "core"


def _sqlite(request: pytest.FixtureRequest) -> DocumentStore:
    return SqliteStore(request.getfixturevalue("tmp_path") / "s.sqlite3")


def _postgres(request: pytest.FixtureRequest) -> DocumentStore:
    from shared.adapters.postgres_store import PostgresStore

    return PostgresStore(request.getfixturevalue("postgres_url"), pool_size=2)


@pytest.fixture(params=["postgres", "sqlite"])
def store(request: pytest.FixtureRequest) -> Iterator[DocumentStore]:
    s = {"sqlite": _sqlite, "postgres": _postgres}[request.param](request)
    yield s
    s.close()


def _mixed(store: DocumentStore, tenant: str, n: int, at: float = 100.0) -> None:
    """`n` documents of each kind: ready with a vector, ready without one, ready with a vector of
    another dimension, queued, none; two ready documents share one content (one vector)."""
    kinds = ("ok", "missing", "wrongdim", "queued", "none")
    docs, side = [], []
    for kind in kinds:
        for i in range(n):
            k = DocKey(tenant, f"c-{kind}", f"{kind}{i}")
            h = "shared" if kind == "ok" and i < 2 else f"{tenant}-{kind}-{i}"
            docs.append(StoredDoc(k, {"title": k.doc_id}, [PUBLIC_PRINCIPAL], None, h, at))
            side.append(SidecarEntry(k, SPACE, S.QUEUED if kind != "none" else S.NONE, h, updated_at=at + i))
    store.put_docs(docs, side)
    by_kind = {kind: [s for s in side if s.key.collection == f"c-{kind}"] for kind in kinds}
    store.commit_vectors([(s, [0.5] * DIM) for s in by_kind["ok"]], "hash:v1", now=at)
    store.commit_vectors([(s, [0.5] * (DIM // 2)) for s in by_kind["wrongdim"]], "hash:v1", now=at)
    # ready with no vector of record: what the view exists to find
    store.set_status([s.key for s in by_kind["missing"]], SPACE, S.READY)


def _per_document(store: DocumentStore, tenant: str) -> tuple[int, set[str], set[str]]:
    """The walk /semantic/mismatch made before: one vector lookup per ready row."""
    ready = store.keys_in_status(SPACE, [S.READY], limit=1_000_000, tenant=tenant)
    missing, wrong = set(), set()
    for s in ready:
        vec = store.vector_for_hash(tenant, s.content_hash, SPACE)
        if vec is None:
            missing.add(s.key.ref)
        elif len(vec[0]) != DIM:
            wrong.add(s.key.ref)
    return len(ready), missing, wrong


def _counting(store: Any) -> list[str]:
    """Every statement the store's reports run, recorded (both adapters run them through
    `_report_rows`)."""
    seen: list[str] = []
    inner: Callable[..., Sequence[Mapping[str, Any]]] = store._report_rows

    def rows(sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        seen.append(sql)
        return inner(sql, params)

    store._report_rows = rows
    return seen


def test_the_vector_audit_equals_the_per_document_walk_and_counts_only_the_tenant(store: DocumentStore) -> None:
    _mixed(store, "t", 7)
    _mixed(store, "other", 3)
    ready, missing, wrong = _per_document(store, "t")
    audit = store.vector_audit("t", SPACE, DIM)
    assert (audit.ready, audit.missing, audit.wrong_dim) == (ready, len(missing), len(wrong)) == (21, 7, 7)
    assert {k.ref for k in audit.missing_examples} == missing
    assert {k.ref for k in audit.wrong_dim_examples} == wrong
    assert all(k.tenant == "t" for k in audit.missing_examples + audit.wrong_dim_examples)
    limited = store.vector_audit("t", SPACE, DIM, examples=3)
    assert [k.doc_id for k in limited.missing_examples] == ["missing0", "missing1", "missing2"]  # the oldest
    assert store.vector_audit("t", SPACE, None).wrong_dim == 0  # no dimension to hold them to
    assert store.vector_audit("nobody", SPACE, DIM).ready == 0


def _coverage_per_row(store: Any, tenant: str, collection: str | None) -> dict[str, object]:
    """/semantic/coverage's one GROUP BY over every row of the tenant, as it was."""
    cold = "CASE WHEN cold_ref IS NULL THEN 0 ELSE 1 END"
    sql, args = f"SELECT status, reason, {cold} AS cold, COUNT(*) AS n FROM sidecar WHERE tenant=? AND space=?", \
        [tenant, SPACE]
    if collection:
        sql, args = sql + " AND collection=?", [*args, collection]
    rows = store._read(sql + f" GROUP BY status, reason, {cold}", args)
    return coverage_report((r["status"], r["reason"], r["n"], bool(r["cold"])) for r in rows)


def test_coverage_equals_the_per_row_count_with_skipped_and_cold_rows(store: DocumentStore) -> None:
    for tenant in ("t", "other"):
        _mixed(store, tenant, 4)
        rows = [("denied", S.DENIED, "writer_deny", None), ("deferred", S.DEFERRED, "budget", None),
                ("cold", S.NONE, None, "cold-ref"), ("cold2", S.NONE, None, "cold-ref-2")]
        store.put_docs([StoredDoc(DocKey(tenant, "c-x", i), {"title": i}, [PUBLIC_PRINCIPAL], None, f"h-{i}", 1.0)
                        for i, *_ in rows],
                       [SidecarEntry(DocKey(tenant, "c-x", i), SPACE, st, f"h-{i}", reason=why, cold_ref=ref,
                                     updated_at=1.0) for i, st, why, ref in rows])
        store.record_failure(DocKey(tenant, "c-queued", "queued0"), SPACE, "provider_error", final=True)
        store.record_failure(DocKey(tenant, "c-queued", "queued1"), SPACE, "timeout", final=False)  # still queued
    cov = store.coverage("t", None, SPACE)
    assert cov == _coverage_per_row(store, "t", None)
    assert cov["states"]["cold"] == 2 and cov["states"]["failed"] == 1  # type: ignore[index]
    assert cov["skipped"] == {"writer_deny": 1, "budget": 1, "provider_error": 1}
    for collection in ("c-x", "c-queued", "c-ok", "absent"):
        assert store.coverage("t", collection, SPACE) == _coverage_per_row(store, "t", collection)


def test_coverage_of_the_tenant_answers_when_a_row_changes_between_its_two_statements(
        store: DocumentStore) -> None:
    """The tenant-wide coverage reads the status counts, then the rows with details: a job that
    fails in between (its row moves to `failed`, a status the first count did not hold) must not
    break the view (it answered 500 while a migration was cut over under load)."""
    _mixed(store, "t", 2)  # no row is `failed` yet
    inner, changed = store._report_rows, []  # type: ignore[attr-defined]

    def rows(sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        out = inner(sql, params)
        if "GROUP BY status" in sql and "reason" not in sql and not changed:  # after the status counts
            store.record_failure(DocKey("t", "c-queued", "queued0"), SPACE, "provider_error", final=True)
            changed.append(True)
        return out

    store._report_rows = rows  # type: ignore[attr-defined]
    cov = store.coverage("t", None, SPACE)
    del store._report_rows  # type: ignore[attr-defined]
    assert changed and cov["skipped"] == {"provider_error": 1}
    assert all(n >= 0 for n in cov["states"].values())  # type: ignore[attr-defined]


def test_the_stuck_count_counts_the_tenants_queued_rows_older_than_the_bound(store: DocumentStore) -> None:
    _mixed(store, "t", 5, at=100.0)  # updated_at 100..104
    _mixed(store, "other", 5, at=100.0)
    assert store.stuck_count("t", SPACE, 102.5) == 3  # queued0..2
    assert store.stuck_count("t", SPACE, 1e12) == 5 and store.stuck_count("t", "elsewhere", 1e12) == 0
    assert store.stuck_count("t", SPACE, 100.0) == 0


def test_the_statements_do_not_grow_with_the_documents(store: DocumentStore) -> None:
    counts = []
    for tenant, n in (("small", 2), ("large", 40)):
        _mixed(store, tenant, n)
        seen = _counting(store)
        audit = store.vector_audit(tenant, SPACE, DIM)
        store.stuck_count(tenant, SPACE, 1e12)
        store.coverage(tenant, None, SPACE)
        assert audit.missing == audit.wrong_dim == n
        counts.append(len(seen))
        del store._report_rows  # type: ignore[attr-defined]
    assert counts[0] == counts[1] == 5  # the audit's two; stuck; coverage's two


class _CountingStore:
    """The container's store, with every method call counted by name."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*a: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*a, **kw)
        return call


def test_mismatch_and_lag_make_as_many_store_calls_for_forty_documents_as_for_two(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=DIM, scheduler_enabled=False,
                       workers=1))
    try:
        real = c.store
        calls = []
        for tenant, n in (("small", 2), ("large", 40)):
            _mixed(real, tenant, n)
            counting = _CountingStore(real)
            c.store = counting  # type: ignore[assignment]
            mm = _mismatch(c, tenant)
            lag = _lag(c, tenant)
            c.store = real
            assert (mm["ready"], mm["missingVectors"], mm["wrongDimension"]) == (3 * n, n, n)
            assert len(mm["examples"]) == min(n, 20)  # type: ignore[arg-type]
            assert lag["queued"] == lag["stuckQueued"] == n
            calls.append(counting.calls)
        assert calls[0] == calls[1] and "vector_for_hash" not in calls[1]
    finally:
        c.stop()
