"""Explain records: what a lookup gives back, to whom and until when, the store they survive in
(SQLite here; PostgreSQL in tests/integration/distributed/test_explain_replicas.py), its
per-tenant cap and sweep, and what the in-process cache costs the collector."""

from __future__ import annotations

import gc
import json
import threading
from pathlib import Path

import pytest

from services.planner.explain import Explains, Ranking, answer, contributions, field_of, not_embedded
from services.planner.fusion import Fused, rrf, zscore
from shared.adapters.explain_sql import SqlExplainStore
from shared.adapters.sqlite_store import SqliteStore
from shared.explain_record import caller_of
from shared.metrics import METRICS
from shared.model import DocKey, Principal, SemanticStatus, SidecarEntry, StoredDoc, hit

ALICE = Principal("t", ("user:alice",), frozenset({"read"}))
ALICE_CERTS = Principal("t", ("user:alice",), frozenset({"read"}), certs=frozenset({"hr:payroll"}))
BOB = Principal("t", ("user:bob",), frozenset({"read"}))
OTHER = Principal("u", ("user:alice",), frozenset({"read"}))
HYBRID = Ranking("hybrid", "zscore", 0.55, "wing flutter", "default")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _store(path: Path, clock: Clock) -> SqlExplainStore:
    return SqlExplainStore(SqliteStore(path, clock=clock))  # type: ignore[arg-type]


def _fused(doc: str, score: float = 0.7) -> Fused:
    return Fused(DocKey("t", "c", doc), score, 2, 0.9, 5, 0.41, ["keyword", "semantic"],
                 lexical_norm=1.2, semantic_norm=0.3, lexical_part=0.54, semantic_part=0.165)


def test_a_record_comes_back_to_its_caller_only() -> None:
    explains = Explains()
    [eid] = explains.record(ALICE, HYBRID, [(_fused("d1"), 0.83)])
    rec = explains.lookup(ALICE, eid)
    assert rec is not None and (rec.collection, rec.doc_id, rec.tenant) == ("c", "d1", "t")
    body = json.loads(rec.body)
    assert body["score"] == 0.7 and body["shown"] == 0.83 and body["q"] == "wing flutter"
    # another tenant, another principal of the same tenant, the same principal with other certificates
    assert explains.lookup(OTHER, eid) is None
    assert explains.lookup(BOB, eid) is None
    assert explains.lookup(ALICE_CERTS, eid) is None
    assert caller_of(ALICE) != caller_of(ALICE_CERTS)
    # ids that could not have been issued are not even looked up
    assert explains.lookup(ALICE, "../x") is None and explains.lookup(ALICE, "a" * 65) is None


def test_records_survive_a_restart_and_expire_with_their_ttl(tmp_path: Path) -> None:
    clock = Clock()
    first = Explains(_store(tmp_path / "s.sqlite3", clock), ttl_seconds=60, clock=clock)
    ids = first.record(ALICE, HYBRID, [(_fused("d1"), 1.0), (_fused("d2", 0.5), 0.6)])
    # a new process on the same file: nothing in its cache, the store answers
    again = Explains(_store(tmp_path / "s.sqlite3", clock), ttl_seconds=60, clock=clock)
    got = [again.lookup(ALICE, eid) for eid in ids]
    assert [r.doc_id for r in got if r is not None] == ["d1", "d2"]
    assert again.lookup(BOB, ids[0]) is None
    clock.now += 59.9
    assert again.lookup(ALICE, ids[0]) is not None and first.lookup(ALICE, ids[0]) is not None
    clock.now += 0.2  # past the TTL: gone from the store's answer and from the writer's own cache
    assert again.lookup(ALICE, ids[0]) is None and first.lookup(ALICE, ids[0]) is None


def test_the_sweep_removes_expired_rows_and_counts_the_rest(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path / "s.sqlite3", clock)
    explains = Explains(store, ttl_seconds=100, clock=clock)
    old = explains.record(ALICE, HYBRID, [(_fused(f"o{i}"), 0.5) for i in range(3)])
    clock.now += 50
    new = explains.record(ALICE, HYBRID, [(_fused(f"n{i}"), 0.5) for i in range(2)])
    clock.now += 51  # the first three expired, the last two not
    assert explains.sweep() == 3
    assert store.count_explains() == 2 and METRICS.explain_records._value.get() == 2
    assert all(store.get_explain(e, clock.now) is None for e in old)
    assert all(store.get_explain(e, clock.now) is not None for e in new)
    assert explains.sweep() == 0


def test_a_tenant_past_its_cap_loses_its_oldest_rows_and_no_one_elses(tmp_path: Path) -> None:
    clock = Clock()
    store = SqlExplainStore(SqliteStore(tmp_path / "s.sqlite3", clock=clock), cap_every=4)  # type: ignore[arg-type]
    explains = Explains(store, per_tenant=5, clock=clock)
    theirs = explains.record(OTHER, HYBRID, [(Fused(DocKey("u", "c", "x"), 0.1), 0.1)])
    mine = [eid for i in range(12) for eid in explains.record(ALICE, HYBRID, [(_fused(f"d{i}"), 0.5)])]
    kept = [eid for eid in mine if store.get_explain(eid, clock.now) is not None]
    # enforced every 4 rows a process writes: at most 5 + 3 remain, always the newest
    assert 5 <= len(kept) <= 8 and kept == mine[-len(kept):]
    assert store.get_explain(theirs[0], clock.now) is not None


def test_one_ranking_is_one_write(tmp_path: Path) -> None:
    clock = Clock()
    calls: list[int] = []

    class Counting(SqlExplainStore):
        def put_explains(self, records, per_tenant):  # type: ignore[no-untyped-def]
            calls.append(len(records))
            super().put_explains(records, per_tenant)

    explains = Explains(Counting(SqliteStore(tmp_path / "s.sqlite3", clock=clock)), clock=clock)  # type: ignore[arg-type]
    ids = explains.record(ALICE, HYBRID, [(_fused(f"d{i}"), 0.5) for i in range(20)])
    assert calls == [20] and len(set(ids)) == 20


@pytest.mark.parametrize("method", ["zscore", "rrf"])
def test_contributions_sum_to_the_fused_score(method: str) -> None:
    k = [DocKey("t", "c", f"d{i}") for i in range(8)]
    lexical = [hit(k[i], 10.0 - i) for i in range(6)]
    semantic = [hit(k[i], 0.9 - 0.1 * j) for j, i in enumerate([3, 6, 0, 7, 1])]
    unembedded = {k[2]}
    fused = (zscore(lexical, semantic, 0.55, unembedded=unembedded) if method == "zscore"
             else rrf(lexical, semantic, 60, unembedded))
    ranking = Ranking("hybrid", method, 0.55, "q", "default")
    for f in fused:
        parts = contributions(_body_of(ranking, f))
        total = sum(float(str(p["contribution"])) for p in parts)
        assert abs(total - f.score) < 1e-9, (f, parts)
        legs = {p["leg"]: p for p in parts}
        if f.lexical_rank is not None:
            assert legs["keyword"]["rank"] == f.lexical_rank and legs["keyword"]["raw"] == f.lexical_score
        if method == "rrf" and f.semantic_rank is not None:
            assert legs["semantic"]["normalised"] == 1.0 / (60 + f.semantic_rank)
        if f.key in unembedded:
            assert legs["semantic"].get("standIn") is True and legs["semantic"]["rank"] is None
        else:
            assert "standIn" not in legs.get("semantic", {})


def _body_of(ranking: Ranking, f: Fused) -> dict[str, object]:
    explains = Explains()
    rec = explains.lookup(ALICE, explains.record(ALICE, ranking, [(f, 0.5)])[0])
    assert rec is not None
    return dict(json.loads(rec.body))


def test_the_answer_names_fields_certificates_and_why_not_embedded() -> None:
    explains = Explains()
    f = Fused(DocKey("t", "c", "d1"), 1.3, 1, 4.2, None, None, ["keyword"], lexical_norm=1.0, semantic_norm=-0.5,
              lexical_part=0.45, semantic_part=-0.275)
    rec = explains.lookup(ALICE_CERTS, explains.record(ALICE_CERTS, HYBRID, [(f, 1.0)])[0])
    assert rec is not None
    doc = StoredDoc(DocKey("t", "c", "d1"), {"title": "Wing flutter", "body": "A <flutter> test & more"},
                    ["user:alice"], None, "h", 0.0, certs=["hr:payroll"])
    side = SidecarEntry(DocKey("t", "c", "d1"), "default", SemanticStatus.DEFERRED, "h", reason="cert")
    out = answer(rec, doc, side, ["Wing <b>flutter</b>", "A &lt;<b>flutter</b>&gt; test"])
    assert out["fusion"] == "zscore" and out["weights"] == {"keyword": 1 - 0.55, "semantic": 0.55}
    assert out["reasons"] == [
        {"type": "match", "leg": "keyword", "rank": 1, "score": 4.2, "field": "title",
         "highlights": ["Wing <b>flutter</b>"]},
        {"type": "match", "leg": "keyword", "rank": 1, "score": 4.2, "field": "body",
         "highlights": ["A &lt;<b>flutter</b>&gt; test"]},
        {"type": "cert", "issuer": "hr", "name": "payroll", "rule": "required"},
        {"type": "not_embedded", "status": "deferred", "reason": "cert", "space": "default"}]
    ready = SidecarEntry(DocKey("t", "c", "d1"), "default", SemanticStatus.READY, "h")
    assert not_embedded(ready, "default") == []
    assert not_embedded(None, "default")[0]["status"] == "none"


def test_a_fragment_across_fields_is_put_by_its_marked_term() -> None:
    fields = {"title": "Notes", "tags": ["aero", "Flutter"], "_acl": ["x"]}
    assert field_of("… <b>flutter</b> margin …", fields) == "tags"
    assert field_of("<b>nothing</b>", fields) == "_all"


def test_cached_records_leave_the_collectors_work() -> None:
    """50,000 records stay for the life of a busy server: as containers the collector tracks,
    every full collection walked them all (27 ms pauses)."""
    explains = Explains(capacity=10)
    [eid] = explains.record(ALICE, HYBRID, [(_fused("d1"), 0.5)])
    gc.collect()
    assert not gc.is_tracked(explains._items[eid])
    more = [e for i in range(15) for e in explains.record(ALICE, HYBRID, [(_fused(f"x{i}"), 0.5)])]
    assert len(explains._items) == 10 and explains.lookup(ALICE, eid) is None  # no store behind: gone
    assert explains.lookup(ALICE, more[-1]) is not None


def test_a_write_when_a_sweep_is_due_starts_it_off_the_readers_path(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path / "s.sqlite3", clock)
    explains = Explains(store, ttl_seconds=10, clock=clock)
    old = explains.record(ALICE, HYBRID, [(_fused("old"), 0.5)])
    clock.now += 11  # the record expired and a sweep is due (every min(60 s, TTL))
    explains.record(ALICE, HYBRID, [(_fused("new"), 0.5)])
    for t in threading.enumerate():
        if t.name == "explain-sweep":
            t.join(10)
    assert store.count_explains() == 1 and store.get_explain(old[0], 0.0) is None
    explains.record(ALICE, HYBRID, [(_fused("newer"), 0.5)])  # not due again yet: no thread
    assert not [t for t in threading.enumerate() if t.name == "explain-sweep"] and store.count_explains() == 2
