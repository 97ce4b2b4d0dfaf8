"""The heap a long process built before its real work, moved out of the cyclic garbage collector's sight.

A full (generation 2) collection walks every tracked object: in the twin, after its imports and seed, one took
~0.2 s — at 600× that is two cluster minutes in which no controller, kubelet or gateway ran, so the twin fell
behind its own clock mid-drill. In a `drills run`, the collections pytest and the interpreter make at the end
walked the same heap again (~0.5 s per run). `gc.freeze()` moves what exists now to the permanent generation:
later collections walk only what was allocated since. Frozen objects are still freed by reference counting; only
a cycle among them that becomes garbage would stay (startup state lives as long as the process anyway).

State that grows later (a twin loaded with thousands of nodes and pods after its start, the pods its controllers
make) brought the long pauses back: a full collection of a 1,024-node twin with 8,000 pods took 0.28–0.36 s, 22
times in a benchmark run. `freeze_after_slow_collections` freezes what survived a full collection that took long:
it has just outlived one, so it is long-lived state, and the garbage cycles among it are gone. The next full
collections walk only what came since, are quick, and freeze nothing; the rule limits itself.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

__all__ = ["freeze_startup_heap", "freeze_after_slow_collections", "SLOW_FULL_COLLECTION_S"]

SLOW_FULL_COLLECTION_S = 0.02  # a full collection this long (wall) freezes its survivors: 12 cluster s at 600×


def freeze_startup_heap() -> None:
    """Freeze every object tracked now (no collection first: that would be the pause this avoids). Moving the
    generations is O(1); counting the frozen objects (`gc.get_freeze_count`) walks all of them — the ~270,000 a
    forked twin or drill inherits took 25 ms in the server and ~85 ms in a fork — so it is left to whoever needs it."""
    gc.freeze()


def freeze_after_slow_collections(slow_s: float = SLOW_FULL_COLLECTION_S) -> Callable[[], None]:
    """After each full collection that took `slow_s` or more, freeze what survived it; returns the uninstaller."""
    started = [0.0]

    def callback(phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        elif time.perf_counter() - started[0] >= slow_s:
            gc.freeze()  # the collection is over: the lists are whole, and freezing only moves them

    gc.callbacks.append(callback)
    return lambda: gc.callbacks.remove(callback) if callback in gc.callbacks else None
