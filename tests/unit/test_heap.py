"""The twin's collector rule: what survives a slow full collection is frozen, and only then."""

from __future__ import annotations

import gc

from drills.core.heap import freeze_after_slow_collections


def _full_collection_with(slow_s: float) -> int:
    """Frozen objects after one full collection under the rule (`slow_s` 0: every one counts as slow)."""
    others = gc.callbacks[:]  # a twin started in this process has its own rule: not this test's
    gc.callbacks.clear()
    was_frozen = gc.get_freeze_count()
    uninstall = freeze_after_slow_collections(slow_s)
    try:
        kept = [{"n": [i]} for i in range(10_000)]  # long-lived state grown after start (the store's objects)
        gc.collect()
        return gc.get_freeze_count() - was_frozen if kept else 0
    finally:
        uninstall()
        gc.callbacks.extend(others)
        if not was_frozen:
            gc.unfreeze()  # this test process had nothing frozen: leave it so


def test_what_survives_a_slow_full_collection_is_frozen():
    assert _full_collection_with(0.0) >= 9_000  # objects frozen before may be freed meanwhile: a few fewer


def test_a_quick_full_collection_freezes_nothing():
    assert _full_collection_with(3600.0) <= 0


def test_the_rule_is_uninstalled():
    before = list(gc.callbacks)
    freeze_after_slow_collections()()
    assert gc.callbacks == before
