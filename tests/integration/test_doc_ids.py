"""Document ids are opaque strings: every id the API accepts (a `/` included) can be read,
overwritten and deleted through the single-document routes (clients percent-encode it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.server import Served, served


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("ids")) / "data") as s:
        yield s


@pytest.mark.parametrize("doc_id", ["a/b", "folder/sub/file.md", "x%2Fy", "sp ace", "ünï"])
def test_every_accepted_id_is_reachable(app: Served, doc_id: str) -> None:
    r = app.bulk("k-admin-a", "ids", [{"_id": doc_id, "title": "slash id turbine"}])
    assert r.status_code == 200 and r.json()["rejected"] == 0, r.text
    path = f"/v1/collections/ids/docs/{quote(doc_id, safe='')}"
    got = app.call("GET", path, "k-admin-a")
    assert got.status_code == 200, got.text
    assert got.json()["_id"] == doc_id
    put = app.call("PUT", path, "k-admin-a", {"title": "overwritten"})
    assert put.status_code in (200, 201), put.text
    assert app.call("GET", path, "k-admin-a").json()["title"] == "overwritten"
    assert app.call("DELETE", path, "k-admin-a").status_code == 200
    assert app.call("GET", path, "k-admin-a").status_code == 404
