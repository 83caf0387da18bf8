"""Writes that land while a rehydration is in flight ("a revoked ACL or a delete during
eviction/rehydration never resurfaces a document"). A document's vector is evicted to the cold
store; a read's touch queues it; the worker loads the job and reads the cold vector, and is held
there, before it commits, while the test deletes the document, narrows its ACL, or edits it.
Then the worker goes on and the test checks every place the document could come back from: the
store's vectors and sidecar, the ANN index of the process, an index rebuilt from the change log
alone, the reads of every strategy, and the cold store.

Real parts only, over the real wiring (SQLite and PostgreSQL): the in-process queue's worker
thread runs the real handler; the only hook wraps the cold store's `get` so that it blocks, after
it has read the vector, until the test releases it. What keeps each case safe: `commit_vectors`
commits only onto the sidecar row of the content it embedded (a delete removed the row, an edit
moved its hash), and the index follower takes a document's ACL from the store when it applies a
vector, never from the job."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from services.api.render import answer_body
from services.planner.planner import ReadRequest
from services.wiring import Container
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.memory_queue import InProcessQueue
from shared.indexing import FilePosition, IndexFollower
from shared.model import DocKey, Principal, SemanticStatus
from shared.ports import ColdStore
from tests.support.counting import CountingEmbedder
from tests.unit.test_scheduler_switch import embed_now, running

S = SemanticStatus
SPACE = "core"
OWNER = Principal("t", ("user:owner",), frozenset({"read", "write", "admin"}))
BOB = Principal("t", ("user:bob",), frozenset({"read"}))
BODY = "Swept wing flutter margins measured in the transonic wind tunnel, gust load case"
EDITED = "Icing of rotor blades in hover: a field campaign on ice shedding and vibration"
QUERY = "swept wing flutter transonic"
STRATEGIES = ("keyword", "semantic", "hybrid")


@pytest.fixture(params=["sqlite", "postgres"])
def layout(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "postgres":
        return {"store": "postgres", "postgres_url": request.getfixturevalue("postgres_url"),
                "postgres_pool_size": 4}
    return {"store": "sqlite"}


@pytest.fixture
def app(tmp_path: Path, layout: dict[str, Any]) -> Iterator[tuple[Container, CountingEmbedder]]:
    emb = CountingEmbedder(32)
    with running(tmp_path, emb, per_tenant_per_min=100_000, **layout) as c:
        yield c, emb


@dataclass
class Gate:
    """Holds the worker thread inside the cold store's `get`, after the vector was read and
    before the handler commits it: `reached` once it is there, `release` lets it go on."""

    cold: ColdStore
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    read: list[list[float]] = field(default_factory=list)  # what the held reads returned

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_get = self.cold.get

        def held_get(tenant: str, space: str, content_hash: str) -> list[float] | None:
            vec = real_get(tenant, space, content_hash)
            if threading.current_thread() is not threading.main_thread() and not self.reached.is_set():
                if vec is not None:
                    self.read.append(list(vec))
                self.reached.set()
                assert self.release.wait(60), "the test never released the worker"
            return vec

        monkeypatch.setattr(self.cold, "get", held_get)


def put(c: Container, body: str = BODY, acl: Sequence[str] = ("user:owner", "user:bob")) -> DocKey:
    c.docs.put([c.docs.parse(OWNER, "c", "a", {"title": "Flutter report", "body": body, "_acl": list(acl)})])
    return DocKey("t", "c", "a")


def side(c: Container, key: DocKey) -> Any:
    return c.store.sidecar(key, SPACE)


def evicted(c: Container, key: DocKey) -> tuple[str, list[float]]:
    """`key` embedded, then evicted: its content hash and the vector now only in the cold store."""
    embed_now(c, SPACE, key)
    h = side(c, key).content_hash
    stored = c.store.vector_for_hash("t", h, SPACE)
    assert stored is not None and len(stored) == 1  # a short document: one passage
    vec = stored[0]
    assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 1
    s = side(c, key)
    assert s.status == S.NONE and s.cold_ref and c.store.vector_for_hash("t", h, SPACE) is None
    assert c.handler.cold is not None and c.handler.cold.get("t", SPACE, h) is not None
    return h, vec


@contextmanager
def rehydration_held(c: Container, emb: CountingEmbedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    """A read's touch queues the evicted document (the on-touch path); the worker loads the job and
    reads the cold vector, then waits. The body of the `with` is the window; leaving it releases
    the worker and waits until it has finished and the process's indexes have caught up."""
    assert c.handler.cold is not None and isinstance(c.queue, InProcessQueue)
    gate = Gate(c.handler.cold)
    gate.install(monkeypatch)
    inputs = emb.inputs
    c.planner.open(OWNER, ReadRequest("c", QUERY, "keyword", limit=5))  # the touch queues it
    assert gate.reached.wait(30), "the touch did not start a rehydration"
    assert gate.read, "the held worker read no cold vector"
    try:
        yield gate
    finally:
        gate.release.set()
        assert c.queue.wait_idle(30)
        monkeypatch.undo()
    c.follower.catch_up()
    assert emb.inputs == inputs  # the held job was a rehydration: no provider call


def ids(c: Container, who: Principal, strategy: str) -> set[str]:
    session = c.planner.open(who, ReadRequest("c", QUERY, strategy, limit=10))  # type: ignore[arg-type]
    return {str(r["id"]) for r in answer_body(session.answer(final=True))["results"]}  # type: ignore[attr-defined]


def ann_hits(c: Container, index: Any, who: Principal, vec: list[float]) -> set[DocKey]:
    """What an ANN `index` itself gives `who` for `vec` (no store re-check after it)."""
    return {h.key for h in index.search(SPACE, c.planner.search_filter(who, "c"), vec, 10)}


def rebuilt_from_log(c: Container, home: Path) -> EdgeVectorIndex:
    """A new vector index that knows only the change log: applied from position 0."""
    index = EdgeVectorIndex(home / "vectors")
    follower = IndexFollower(c.store, None, index, FilePosition(home / "index.seq"), SPACE)
    follower.sync()
    return index


def ann_everywhere(c: Container, who: Principal, vec: list[float], home: Path) -> tuple[set[DocKey], set[DocKey]]:
    """What the process's ANN index, and one rebuilt from the change log alone (in `home`, one
    per principal), give `who` for `vec`."""
    rebuilt = rebuilt_from_log(c, home / who.principals[0].replace(":", "-"))
    try:
        return ann_hits(c, c.vectors, who, vec), ann_hits(c, rebuilt, who, vec)
    finally:
        rebuilt.close()


def test_a_delete_while_a_rehydration_is_in_flight_never_resurfaces_the_document(
        app: tuple[Container, CountingEmbedder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker has loaded the job and read the cold vector when the document is deleted: its
    commit finds no sidecar row and writes nothing. No vector for the content, no row, no
    `vector` entry in the change log (an index rebuilt from the log has no point for it), no hit
    for its owner in any strategy, and the cold copy goes at the next tick's prune. Fails when
    `commit_vectors` writes the vector without its sidecar row matching (tried: the SQLite
    adapter's `if not cur.rowcount: continue` dropped)."""
    c, emb = app
    key = put(c)
    h, vec = evicted(c, key)
    head = c.store.change_log_head()
    with rehydration_held(c, emb, monkeypatch) as gate:
        assert gate.read == [pytest.approx(vec, abs=1e-2)]  # float16 in the cold store
        assert c.docs.delete(key)

    assert c.store.get_doc(key) is None and side(c, key) is None
    assert c.store.vector_for_hash("t", h, SPACE) is None and c.store.vectors_for([key], SPACE) == {}
    assert [(ch.op, ch.space) for ch in c.store.changes_since(head) if ch.key == key] == [("delete", None)]
    assert ann_everywhere(c, OWNER, vec, tmp_path / "rebuilt") == (set(), set())
    for strategy in STRATEGIES:
        assert ids(c, OWNER, strategy) == set(), strategy
    c.lifecycle.tick()
    assert c.store.cold_entry("t", h, SPACE) is None
    assert c.handler.cold is not None and c.handler.cold.get("t", SPACE, h) is None


@pytest.mark.parametrize("how", ["rewrite", "delete-and-recreate"])
def test_an_acl_revoke_while_a_rehydration_is_in_flight_never_shows_the_document_to_the_revoked_reader(
        app: tuple[Container, CountingEmbedder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The document is written again, same content, without bob among its readers, while the
    worker holds its cold vector (rewritten in place, or deleted and created again as a client
    that revokes by re-creating does: its new row is `none` with no cold reference). The content
    is unchanged, so the rehydrated vector is committed (without a provider call), but it lands
    for the new version only: the ANN point carries the new ACL, in this process's index and in
    one rebuilt from the log, and bob finds the document in no strategy while its owner does. The
    ANN checks search the index itself: a read re-checks its page against the store
    (`_readable_top`) and would hide a stale point. Fails when the index takes the ACL from
    anywhere but the stored document at apply time (tried: the follower upserting each point with
    the document as it first saw it, before the revoke) and when a same-content re-put is dropped
    as unchanged although its ACL differs (tried: `_unchanged` ignoring `acl`)."""
    c, emb = app
    key = put(c, acl=("user:owner", "user:bob"))
    assert ids(c, BOB, "keyword") == {"a"}  # bob reads it before
    assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)  # what that read's touch queued
    h, vec = evicted(c, key)
    with rehydration_held(c, emb, monkeypatch):
        if how == "delete-and-recreate":
            assert c.docs.delete(key)
        put(c, acl=("user:owner",))  # bob revoked
        assert c.store.get_doc(key).acl == ["user:owner"]  # type: ignore[union-attr]

    s = side(c, key)
    assert (s.status, s.content_hash, s.cold_ref) == (S.READY, h, None)  # the new version's row
    assert c.store.vectors_for([key], SPACE) == {key: [pytest.approx(vec, abs=1e-2)]}
    assert ann_everywhere(c, BOB, vec, tmp_path / "rebuilt") == (set(), set())
    assert ann_everywhere(c, OWNER, vec, tmp_path / "rebuilt") == ({key}, {key})
    for strategy in STRATEGIES:
        assert ids(c, BOB, strategy) == set(), strategy
        assert ids(c, OWNER, strategy) == {"a"}, strategy


def test_an_edit_while_a_rehydration_is_in_flight_never_gets_the_old_contents_vector(
        app: tuple[Container, CountingEmbedder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New content is written while the worker holds the old content's cold vector: the commit
    is refused (the row's hash moved on), so the new version is not `ready` with the old vector,
    nor has a point in any index; its next touch embeds the new content with a provider call,
    and the old content's cold copy goes at the next prune. Fails when `commit_vectors` does not
    compare the content hash (tried: the SQLite adapter's guard `AND content_hash=?` dropped)."""
    c, emb = app
    key = put(c)
    old, vec = evicted(c, key)
    with rehydration_held(c, emb, monkeypatch):
        put(c, body=EDITED)
    new = side(c, key).content_hash
    assert new != old

    s = side(c, key)
    assert s.content_hash == new and s.status != S.READY and s.cold_ref is None
    assert c.store.vectors_for([key], SPACE) == {}
    assert c.store.vector_for_hash("t", old, SPACE) is None and c.store.vector_for_hash("t", new, SPACE) is None
    assert ann_everywhere(c, OWNER, vec, tmp_path / "rebuilt") == (set(), set())

    inputs = emb.inputs
    embed_now(c, SPACE, key)  # its next touch: the new content goes to the provider
    assert emb.inputs == inputs + 1
    fresh, = c.store.vectors_for([key], SPACE)[key]
    assert fresh != pytest.approx(vec, abs=1e-2)  # the new content's vector, not the old one's
    c.lifecycle.tick()
    assert c.store.cold_entry("t", old, SPACE) is None
    assert c.handler.cold is not None and c.handler.cold.get("t", SPACE, old) is None
