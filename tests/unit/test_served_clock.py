"""The HTTP copy of a twin's gated clock (drills/core/servedclock.py): it follows the served clock when that
clock holds, where a copy read once runs ahead by every hold (an in-cluster node-loss drill stamped its fault
~4 cluster s after the twin rescheduled the workers it displaced: "no worker was rescheduled")."""

from __future__ import annotations

import time

from drills.core.clock import DilatedClock
from drills.core.servedclock import ServedClock

SCALE = 600.0


def _held_at(value: float):
    """A served clock that holds at `value` (the twin busy), read over a 0 ms round trip."""
    return lambda: (value, time.monotonic(), 0.0)


def test_a_copy_of_a_held_clock_does_not_run_ahead():
    once = DilatedClock(scale=SCALE, epoch=1000.0)
    served = ServedClock(scale=SCALE, epoch=1000.0, read=_held_at(1000.0), resync_wall_s=0.0)
    time.sleep(0.02)  # 12 cluster s of dilated time while the twin held
    assert once.timestamp() > 1010.0  # the old copy: ahead of the twin by the whole hold
    assert served.timestamp() < 1001.0  # re-read: at the held clock (plus one extrapolated instant)


def test_it_never_goes_back_and_keeps_its_copy_when_a_read_fails():
    served = ServedClock(scale=SCALE, epoch=1000.0, read=_held_at(1000.0), resync_wall_s=1.0)
    time.sleep(0.01)
    ahead = served.timestamp()  # not re-read yet: extrapolated
    served.resync_wall_s = 0.0
    assert served.timestamp() >= ahead  # the held clock reads earlier: the copy waits instead of going back

    def broken():
        raise OSError("connection reset")

    served.read = broken
    assert served.timestamp() >= ahead
