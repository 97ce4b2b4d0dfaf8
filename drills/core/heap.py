"""The heap a long process built before its real work, moved out of the cyclic garbage collector's sight.

A full (generation 2) collection walks every tracked object: in the twin, after its imports and seed, one took
~0.2 s — at 600× that is two cluster minutes in which no controller, kubelet or gateway ran, so the twin fell
behind its own clock mid-drill. In a `drills run`, the collections pytest and the interpreter make at the end
walked the same heap again (~0.5 s per run). `gc.freeze()` moves what exists now to the permanent generation:
later collections walk only what was allocated since. Frozen objects are still freed by reference counting; only
a cycle among them that becomes garbage would stay (startup state lives as long as the process anyway).
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Freeze every object tracked now (no collection first: that would be the pause this avoids); returns how
    many objects are frozen in all."""
    gc.freeze()
    return gc.get_freeze_count()
