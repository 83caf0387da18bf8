"""The file cold store (shared/adapters/cold_files.py): codec fidelity, torn and foreign files,
idempotent puts, deletes, and paths that reveal no tenant."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from shared.adapters import cold_files
from shared.adapters.cold_files import FileColdStore, decode, encode

DIM = 384
TENANT = "acme-secret-tenant"


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def clustered(n: int, centres: np.ndarray, spread: float, seed: int) -> np.ndarray:
    """Unit vectors around `centres`: neighbours differ by small margins, so a lossy code that
    moved them would reorder the top of the ranking."""
    rng = np.random.default_rng(seed)
    v = centres[rng.integers(0, len(centres), n)] + spread * rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def top10(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ corpus.T), axis=1)[:, :10]


def recall(exact: np.ndarray, approx: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, approx, strict=True)]))


def roundtrip(v: np.ndarray, codec: str) -> np.ndarray:
    out = decode(encode(v.tolist(), codec))
    assert out is not None and len(out) == len(v)
    return np.asarray(out, dtype=np.float32)


def test_float16_keeps_cosine_to_the_original() -> None:
    vs = unit_vectors(200, seed=7)
    worst = min(float(np.dot(v, d) / (np.linalg.norm(v) * np.linalg.norm(d)))
                for v in vs for d in [roundtrip(v, "float16")])
    assert worst >= 0.999
    assert len(encode(vs[0].tolist(), "float16")) == 12 + 2 * DIM


def test_int8_keeps_the_ranking() -> None:
    centres = np.random.default_rng(10).standard_normal((100, DIM)).astype(np.float32)
    corpus = clustered(2000, centres, 0.5, seed=11)
    queries = clustered(100, centres, 0.5, seed=12)  # new members of the same clusters
    decoded = np.stack([roundtrip(v, "int8") for v in corpus])
    assert len(encode(corpus[0].tolist(), "int8")) == 12 + DIM
    exact = top10(queries, corpus)
    assert recall(exact, top10(queries, decoded)) >= 0.98
    # the data is not trivial: a 4-bit code of the same kind loses neighbours
    peak = np.max(np.abs(corpus), axis=1, keepdims=True) / 7
    assert recall(exact, top10(queries, np.round(corpus / peak) * peak)) < 0.9


def test_zero_vector_and_unknown_codec() -> None:
    assert decode(encode([0.0] * 4, "int8")) == [0.0] * 4
    with pytest.raises(ValueError):
        encode([1.0], "bf16")
    with pytest.raises(ValueError):
        FileColdStore(Path("/nonexistent"), "bf16")


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_put_get_delete_and_idempotent_put(tmp_path: Path, codec: str) -> None:
    cs = FileColdStore(tmp_path, codec)
    v = unit_vectors(1, seed=3)[0].tolist()
    ref, n = cs.put(TENANT, "core", "h1", v)
    assert (tmp_path / ref).is_file() and (tmp_path / ref).stat().st_size == n
    assert cs.put(TENANT, "core", "h1", v) == (ref, n)  # idempotent: same place, same size
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [Path(ref).name]  # no temporary left
    got = cs.get(TENANT, "core", "h1")
    assert got is not None and np.dot(got, v) >= 0.99
    assert cs.get(TENANT, "core", "h2") is None
    assert cs.get("other-tenant", "core", "h1") is None  # kept per tenant
    assert cs.get(TENANT, "v2", "h1") is None  # and per space
    cs.delete(TENANT, "core", "h1")
    assert cs.get(TENANT, "core", "h1") is None and not (tmp_path / ref).exists()
    cs.delete(TENANT, "core", "h1")  # deleting what is gone is a no-op


def test_a_changed_codec_still_reads_old_files(tmp_path: Path) -> None:
    v = unit_vectors(1, seed=4)[0].tolist()
    FileColdStore(tmp_path, "float16").put(TENANT, "core", "h1", v)
    got = FileColdStore(tmp_path, "int8").get(TENANT, "core", "h1")
    assert got is not None and np.dot(got, v) >= 0.999
    FileColdStore(tmp_path, "int8").delete(TENANT, "core", "h1")
    assert FileColdStore(tmp_path, "float16").get(TENANT, "core", "h1") is None


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_torn_truncated_and_foreign_files_decode_to_none(tmp_path: Path, codec: str) -> None:
    cs = FileColdStore(tmp_path, codec)
    v = unit_vectors(1, seed=5)[0].tolist()
    ref, _ = cs.put(TENANT, "core", "h1", v)
    path = tmp_path / ref
    whole = path.read_bytes()
    for bad in (whole[:5], whole[:12], whole[:-1], whole + b"\0", b"", b"XX" + whole[2:],
                whole[:2] + bytes([9]) + whole[3:], b"\x89PNG\r\n\x1a\n" + b"\0" * 800):
        path.write_bytes(bad)
        assert cs.get(TENANT, "core", "h1") is None, bad[:16]
    path.write_bytes(whole)
    assert cs.get(TENANT, "core", "h1") is not None


def test_the_path_reveals_no_tenant(tmp_path: Path) -> None:
    cs = FileColdStore(tmp_path)
    ref, _ = cs.put(TENANT, "core", "h1", [1.0, 0.0])
    ref2, _ = cs.put("acme-other", "core", "h1", [0.0, 1.0])
    assert TENANT not in ref and "acme" not in ref and ref != ref2
    assert not any("acme" in str(p) for p in tmp_path.rglob("*"))
    # a hostile space or hash cannot leave the root
    ref3, _ = cs.put(TENANT, "../../etc", "../../passwd", [1.0])
    assert (tmp_path / ref3).resolve().is_relative_to(tmp_path.resolve())


def test_two_writers_of_one_vector_do_not_trip_over_each_other(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads of one process (a scheduler tick and `POST /semantic/evict`) evicting the
    same content: the second writer's rename lands between the first one's write and rename."""
    cs = FileColdStore(tmp_path)
    real_replace = os.replace
    nested = {"done": False}

    def interleaved(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if not nested["done"]:
            nested["done"] = True
            cs.put(TENANT, "core", "h1", [1.0, 0.0])  # the other writer runs to completion now
        real_replace(src, dst)

    monkeypatch.setattr(cold_files.os, "replace", interleaved)
    ref, _ = cs.put(TENANT, "core", "h1", [1.0, 0.0])
    assert nested["done"] and cs.get(TENANT, "core", "h1") == [1.0, 0.0]
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [Path(ref).name]


def test_spaces_never_share_files(tmp_path: Path) -> None:
    """A retired space's cold vectors are kept for a rollback: a space whose name differs only
    in a character the file system cannot take (`core@v2`, `core_v2`) must not overwrite them."""
    store = FileColdStore(tmp_path, "float16")
    a, b = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    store.put(TENANT, "core@v2", "h1", a)
    store.put(TENANT, "core_v2", "h1", b)
    assert store.get(TENANT, "core@v2", "h1") == a and store.get(TENANT, "core_v2", "h1") == b
    assert cold_files.space_dir("core") == "core"  # file-safe names keep their directory (files written before)
    assert len({cold_files.space_dir(s) for s in ("core@v2", "core_v2", "core.v2", "core-v2")}) == 4
    store.delete(TENANT, "core@v2", "h1")
    assert store.get(TENANT, "core@v2", "h1") is None and store.get(TENANT, "core_v2", "h1") == b


def _legacy(store: FileColdStore, tenant: str, space: str, content_hash: str, vector: list[float]) -> None:
    """A cold file written before e435828: under the space's file-safe form alone (`core_v2`)."""
    store.put(tenant, space, content_hash, vector)
    new, old = store.root / cold_files.space_dir(space), store.root / cold_files.legacy_space_dir(space)
    old.mkdir(exist_ok=True)
    for tenant_dir in new.iterdir():
        tenant_dir.rename(old / tenant_dir.name)
    new.rmdir()


def test_legacy_directories_of_unsafe_names_are_adopted(tmp_path: Path) -> None:
    """Files a space like `core@v2` wrote under `core_v2` before its name got a directory of its
    own are neither read nor deleted there: they move to the current directory, tenant by tenant,
    unless the current one already has that tenant's files (written since: they win)."""
    store = FileColdStore(tmp_path, "float16")
    _legacy(store, TENANT, "core@v2", "h1", [1.0, 0.0])
    _legacy(store, "other", "core@v2", "h2", [0.0, 1.0])
    store.put("other", "core@v2", "h2", [0.6, 0.8])  # written since the change
    assert store.get(TENANT, "core@v2", "h1") is None  # orphaned: the current layout misses it
    assert store.adopt_legacy({"core", "core@v2"}, lambda name: False) == {"core@v2": 1}
    assert store.get(TENANT, "core@v2", "h1") == [1.0, 0.0]
    assert store.get("other", "core@v2", "h2") == pytest.approx([0.6, 0.8], abs=1e-3)
    assert (tmp_path / "core_v2").is_dir()  # the other tenant's older file stays where it was
    assert store.adopt_legacy({"core", "core@v2"}, lambda name: False) == {}  # nothing left to move


def test_a_legacy_directory_two_spaces_may_have_shared_is_left_alone(tmp_path: Path) -> None:
    store = FileColdStore(tmp_path, "float16")
    _legacy(store, TENANT, "core@v2", "h1", [1.0, 0.0])
    # a file-safe space of the same form is known: its files live in `core_v2` now
    assert store.adopt_legacy({"core@v2", "core_v2"}, lambda name: False) == {}
    assert store.adopt_legacy({"core@v2"}, lambda name: name == "core_v2") == {}  # bound, no tenant's now
    assert store.adopt_legacy({"core@v2", "core v2"}, lambda name: False) == {}  # two unsafe names
    assert store.get(TENANT, "core@v2", "h1") is None and (tmp_path / "core_v2").is_dir()
    assert store.adopt_legacy({"core_v2"}, lambda name: True) == {}  # a file-safe name kept its directory
