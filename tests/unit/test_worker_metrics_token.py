"""The worker's metrics port honours VIBE_METRICS_TOKEN as the API's /metrics does: with a
token set, a scrape without `Authorization: Bearer <token>` gets 401 and no figures."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from harness.server import free_port
from services.worker import metrics_server


@pytest.mark.parametrize("token", ["s3cret-metrics", None])
def test_the_worker_metrics_port_asks_for_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    token: str | None) -> None:
    monkeypatch.setattr(metrics_server, "_dir", tmp_path)  # an empty multiprocess directory
    port = free_port()
    httpd = metrics_server.serve(port, token, addr="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        bare = httpx.get(url, timeout=10)
        if token is None:  # no token configured: open, as before
            assert bare.status_code == 200
            return
        assert bare.status_code == 401 and bare.json()["error"]["code"] == "unauthorized"
        assert "vibe_" not in bare.text and "python_" not in bare.text
        wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        ok = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert ok.status_code == 200 and "text/plain" in ok.headers["content-type"]
    finally:
        httpd.shutdown()
        httpd.server_close()

