"""`serve` sets the collector's thresholds from `VIBE_GC_THRESHOLDS` once start-up is frozen."""

import gc

import pytest

from services.cli import _freeze_startup_heap
from shared.config import Settings


def test_serving_thresholds_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gc.get_threshold()
    monkeypatch.setenv("VIBE_GC_THRESHOLDS", "[3000, 15, 500]")
    try:
        _freeze_startup_heap(Settings().gc_thresholds)
        assert gc.get_threshold() == (3000, 15, 500)
        assert Settings.model_fields["gc_thresholds"].default == (5000, 20, 1000)
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
