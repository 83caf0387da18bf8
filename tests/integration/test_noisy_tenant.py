"""One tenant cannot hurt another: while tenant A runs every admin action at its
limits on the same server (bulks at the document-count and size bounds into a collection it
keeps promoting, reindexing, evicting and demoting, a space migration, reads with the largest
`limit` and `k`), tenant B's writes and reads complete and stay correct: each write is read
back, each keyword read finds exactly the document just written, no answer is refused for A's
load (no 429, no backpressure on B's touches). No wall-clock assertion: generous timeouts only;
bench/noisy_tenant.py measures what A's load costs B.

The rate limit charges every request one token here (`FLAT_COST`): with the weighted cost A's
bulks and backfills are mostly refused past its rate (tests/unit/test_tenant_isolation.py),
and A must stay as loud as its size bounds allow for this to test the other isolations (the
queue share, per-tenant write locks, chunked bulks, the in-flight cap, the fair job queue)."""

from __future__ import annotations

from pathlib import Path

from harness.noisy_tenant import ENV, FLAT_COST, KEYS, Noise, Probe, quiet_client
from harness.server import served

ROUNDS = 25


def test_a_noisy_tenant_at_its_limits_leaves_the_other_tenant_working(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={**ENV, **FLAT_COST}, keys=KEYS) as s:
        noise = Noise(s.base)
        with quiet_client(s.base) as http:
            probe = Probe(http)
            probe.round(0, "warm")  # B before any noise: the same checks hold
            noise.start()
            try:
                for i in range(ROUNDS):
                    probe.round(i, "b")
            finally:
                noise.stop()
        # A really was at its limits: its bulks landed, its big reads ran, its admin actions ran
        assert noise.answers["bulk:200"] > 0 and noise.answers["read:200"] > 0, noise.answers
        assert noise.answers["reindex:200"] + noise.answers["reindex:202"] > 0, noise.answers
        assert noise.answers["evict:200"] > 0, noise.answers
        assert len(probe.write_ms) == ROUNDS + 1 and len(probe.read_ms) == ROUNDS + 1
