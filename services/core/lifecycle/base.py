"""What every part of the lifecycle scheduler works with: its configuration, the store of
record, the cold store, the backfills, the clock and the hooks the composition root passes.
Each concern (collections, pins, eviction, sweeps, retired spaces, cut-over rows) is a mixin on
this base, and `Lifecycle` (scheduler.py) is all of them."""

from __future__ import annotations

import time
from collections.abc import Callable

from services.core.backfill import Backfills
from services.core.lifecycle.cursors import ColdCode
from services.core.lifecycle.model import LifecycleConfig
from shared.ports import ColdStore, ProviderLedger, StoreOfRecord

LEASE = "scheduler"  # the store lease one tick holds; backfill steps and retired moves hold their own


class LifecycleBase:
    def __init__(self, cfg: LifecycleConfig, store: StoreOfRecord, cold: ColdStore, backfills: Backfills,
                 clock: Callable[[], float] = time.time, after_change: Callable[[], object] | None = None,
                 spaces: Callable[[], set[str]] | None = None, active: Callable[[str], str] | None = None,
                 ledger: ProviderLedger | None = None):
        self.cfg = cfg
        self.store = store
        self.cold = cold
        self.backfills = backfills
        self.clock = clock
        self.after_change = after_change  # the embedded profile syncs its own indexes at once
        self.spaces = spaces  # every live space (shared/spaces.py); default: the configured one
        self.active = active or (lambda tenant: cfg.space)  # a tenant's active space
        self.ledger = ledger  # the provider-call ledger, pruned past its retention
        self._orphans: set[ColdCode] = set()  # unreferenced at this process's last sweep (sweep_cold_orphans)
        self.monotonic: Callable[[], float] = time.monotonic  # what paces the gauges (tests replace it)
        self._gauges_due = 0.0  # monotonic time from which the next tick publishes the gauges

    def _changed(self) -> None:
        if self.after_change is not None:
            self.after_change()
