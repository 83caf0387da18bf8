"""An index written by another schema version is rebuilt from the store of record on its first
sync (the change log holds every document), with progress; the CLI forces the same rebuild."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.schema_stamp import VERSION_FILE
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower
from shared.metrics import METRICS
from shared.model import DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import FieldCondition, SearchFilter

EN = SearchFilter("t", None, ("*",), (FieldCondition("lang", "eq", ("en",)),))


def _write(store: SqliteStore, n: int) -> None:
    keys = [DocKey("t", "c", str(i)) for i in range(n)]
    store.put_docs([StoredDoc(k, {"title": "rotor", "lang": "en" if int(k.doc_id) % 2 else "de"}, ["*"], None,
                              "h" + k.doc_id, 1.0) for k in keys],
                   [SidecarEntry(k, "core", SemanticStatus.QUEUED, "h" + k.doc_id, updated_at=1.0) for k in keys])
    entries = [(s, [1.0, float(j)]) for j, s in enumerate(store.sidecars(keys, "core").values())]
    store.commit_vectors(entries, "m")


def _follower(store: SqliteStore, home: Path) -> IndexFollower:
    return IndexFollower(store, TantivyLexicalIndex(home / "lexical"), EdgeVectorIndex(home / "vectors"),
                         FilePosition(home / "index.seq"), "core")


def _close(f: IndexFollower) -> None:
    assert f.lexical is not None and f.vectors is not None
    f.lexical.close()
    f.vectors.close()


def test_outdated_indexes_rebuild_on_first_sync(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    _write(store, 30)
    first = _follower(store, tmp_path)
    first.sync(batch=7)
    assert first.lexical is not None and len(first.lexical.search(EN, "rotor", 100)) == 15
    _close(first)
    # As an older release left them: no version stamps (and, in truth, no filter fields).
    (tmp_path / "lexical" / VERSION_FILE).unlink()
    (tmp_path / "vectors" / VERSION_FILE).write_text("1")
    before = METRICS.index_rebuilds.labels(follower="embedded")._value.get()

    again = _follower(store, tmp_path)
    assert sorted(again.outdated()) == ["EdgeVectorIndex", "TantivyLexicalIndex"]
    with caplog.at_level(logging.INFO, logger="vibe.indexing"):
        applied = again.sync(batch=7)
    assert applied == store.change_log_head()  # the whole log, replayed
    assert again.outdated() == []
    assert METRICS.index_rebuilds.labels(follower="embedded")._value.get() == before + 1
    progress = [r for r in caplog.records if r.getMessage() == "index rebuild progress"]
    assert len(progress) >= 8 and progress[-1].__dict__["seq"] == store.change_log_head()
    assert again.lexical is not None and again.vectors is not None
    assert {h.key.doc_id for h in again.lexical.search(EN, "rotor", 100)} == {str(i) for i in range(1, 30, 2)}
    assert len(again.vectors.search("core", EN, [1.0, 0.0], 100)) == 15
    assert again.sync() == 0  # current now: nothing more to do
    _close(again)
    store.close()


def test_forced_rebuild_empties_the_index_first(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    _write(store, 4)
    f = _follower(store, tmp_path)
    f.sync()
    assert f.lexical is not None
    f.lexical.apply([StoredDoc(DocKey("t", "c", "ghost"), {"title": "rotor", "lang": "en"}, ["*"], None, "g", 1.0)], [])
    assert "ghost" in {h.key.doc_id for h in f.lexical.search(EN, "rotor", 10)}
    assert f.rebuild(wait=1, reset_schema=True) == store.change_log_head()
    assert {h.key.doc_id for h in f.lexical.search(EN, "rotor", 10)} == {"1", "3"}  # the store's truth only
    _close(f)
    store.close()


def test_cli_rebuild_index_rebuilds_free_embedded_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from services.cli import app

    store = SqliteStore(tmp_path / "vibe.sqlite3")
    _write(store, 4)
    f = _follower(store, tmp_path)
    f.sync()
    assert f.lexical is not None
    f.lexical.apply([StoredDoc(DocKey("t", "c", "ghost"), {"title": "rotor", "lang": "en"}, ["*"], None, "g", 1.0)], [])
    _close(f)
    for name in [n for n in os.environ if n.startswith("VIBE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("VIBE_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["rebuild-index"])
    assert result.exit_code == 0, result.output
    assert f'"applied": {store.change_log_head()}' in result.output
    again = _follower(store, tmp_path)
    assert again.lexical is not None and again.outdated() == []
    assert {h.key.doc_id for h in again.lexical.search(EN, "rotor", 10)} == {"1", "3"}
    _close(again)
    store.close()


def test_a_served_container_rebuilds_an_outdated_index_when_it_starts(tmp_path: Path) -> None:
    """The composition root's start-up path: indexes left by an older release are rebuilt before
    the process serves, and then answer metadata filters."""
    from services.wiring import build
    from shared.config import Settings

    settings = Settings(data_dir=tmp_path, embedder="hash", embed_dim=16, scheduler_enabled=False)
    first = build(settings)
    first.start()
    first.docs.put([StoredDoc(DocKey("t", "c", str(i)), {"title": "rotor", "lang": ("en", "de")[i % 2]}, ["*"],
                              None, f"h{i}", 1.0) for i in range(6)])
    first.stop()
    (tmp_path / "lexical" / VERSION_FILE).write_text("1")  # as an older release left it

    again = build(settings)
    assert again.follower.members[0].outdated() == ["TantivyLexicalIndex"]
    again.start()
    try:
        assert again.follower.members[0].outdated() == []
        assert {h.key.doc_id for h in again.lexical.search(EN, "rotor", 10)} == {"0", "2", "4"}
    finally:
        again.stop()
