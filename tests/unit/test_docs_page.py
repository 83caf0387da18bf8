"""/docs (Swagger UI) is served from this server's own copy of swagger-ui-dist: the page names
no other origin (no CDN script runs where an operator types a key, and it works offline), its
assets come from /docs/, and a key typed there is not kept in the browser's storage."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from services.core.keyring import KeyRing
from services.wiring import build, create_app
from shared.config import Settings


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False))
    try:
        yield TestClient(create_app(c, KeyRing([])))
    finally:
        c.store.close()


def test_docs_load_nothing_from_another_origin(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert re.findall(r"""(?:src|href)=["']?(https?:)?//""", html) == [], html
    assert "cdn" not in html.lower() and "http://" not in html and "https://" not in html
    for src in re.findall(r"""(?:src|href)=["']([^"']+)["']""", html):
        asset = client.get(src)
        assert asset.status_code == 200 and len(asset.content) > 0, src
    assert "SwaggerUIBundle" in client.get("/docs/swagger-ui-bundle.js").text
    assert "/openapi.json" in html
    assert client.get("/docs/../app.py").status_code == 404
    assert client.get("/docs/app.js").status_code == 404  # only the Swagger files
    assert client.get("/redoc").status_code == 404  # FastAPI's ReDoc page loads from CDNs: not served


def test_docs_keep_no_key_in_browser_storage(client: TestClient) -> None:
    html = client.get("/docs").text
    assert '"persistAuthorization": false' in html
