"""The per-tenant rate limit holds whatever form the bearer takes: a bootstrap key, an API-made
key, an end-user token it minted, or the MCP `<task>@<key>` form all draw on the one bucket of
their tenant, and another tenant's bucket is its own. The bucket barely refills (one token per
1,000 s), so the order of requests decides, not time."""

from __future__ import annotations

from pathlib import Path

from harness.server import served

ADMIN, ADMIN_B = "k-admin-a", "k-admin-b"
BURST = 6


def test_every_bearer_form_draws_on_its_tenants_bucket(tmp_path: Path) -> None:
    env = {"VIBE_PER_TENANT_REQUESTS_PER_SECOND": "0.001", "VIBE_PER_TENANT_REQUEST_BURST": str(BURST)}
    with served(tmp_path / "data", env=env) as s:
        made = s.call("POST", "/v1/keys", ADMIN, {"name": "app", "principals": ["user:app"], "scopes": ["read"]})
        assert made.status_code == 201, made.text
        token = s.call("POST", "/v1/tokens", ADMIN, {"principals": ["user:admin"]})
        assert token.status_code == 201, token.text
        forms = [ADMIN, made.json()["key"], token.json()["token"], f"task1@{ADMIN}"]
        for bearer in forms:  # the burst's last four tokens (the task form is the MCP tools': 401 here)
            r = s.call("GET", "/v1/collections/kb/docs/nope", bearer)
            assert r.status_code == (401 if "@" in bearer else 404), (bearer[:12], r.status_code, r.text)
        for bearer in [*forms, f"task2@{ADMIN}"]:  # the bucket is empty for every form
            r = s.call("GET", "/v1/collections/kb/docs/nope", bearer)
            assert r.status_code == 429, (bearer[:12], r.status_code, r.text)
            assert r.json()["error"]["code"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
        assert s.call("GET", "/v1/collections/kb/docs/nope", ADMIN_B).status_code == 404  # tenant tb's own
