"""Found by the load test (test_load.py, embedded profile): an edit of a document of an eager
collection whose previous version is still `queued` is acknowledged, recorded `queued` with the
new content hash, and never embedded. `DocumentService.put` (services/api/writes.py) enqueues
only when the previous sidecar was not already `queued`; the job in flight carries the old
content hash, so the worker (`EmbedHandler._load`, services/worker/handlers.py) drops it as
"content changed", and nothing is left to embed the new content. The embedded profile has no
reconciler, so the document stays `queued` for good (the Celery profile's reconciler re-enqueues
it after VIBE_RECONCILE_STUCK_SECONDS, default 300 s)."""

from __future__ import annotations

from pathlib import Path

from harness.server import Served
from harness.stack import base_env
from harness.workload import RecordingProvider
from tests.integration.distributed.conftest import wait_for


def test_an_edit_while_queued_is_embedded(tmp_path: Path) -> None:
    with RecordingProvider(dim=64) as provider:
        app = Served(tmp_path / "data", env=base_env(provider, tmp_path / "data"))
        try:
            assert app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "eager"}).status_code == 200
            provider.hang(1.5)  # the first version's job is in flight while the edit lands
            assert app.put("k-admin-a", "eager", "d1", {"title": "first", "body": "version one"}).status_code == 201
            assert app.status("k-admin-a", "eager", "d1") == "queued"
            assert app.put("k-admin-a", "eager", "d1", {"title": "second", "body": "version two"}).status_code == 200
            provider.clear()
            wait_for(lambda: app.status("k-admin-a", "eager", "d1") == "ready", 20, "the edit to be embedded")
        finally:
            app.stop()
