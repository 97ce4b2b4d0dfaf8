"""A client's copy of a twin's clock read over HTTP (`GET /twin/v1/clock`), for a drill that cannot follow the
twin's gate file (a pod on the cluster, another host: drills/core/followclock.py is the same-host copy).

The twin's clock is gated (drills/core/gatedclock.py): it waits while the twin has work due, so it runs behind
plain dilated wall time whenever the twin is busy. A copy read once and extrapolated at the clock's scale runs
ahead of it by every hold since: on a loaded host, several cluster seconds within one drill, so a fault stamped
on the copy came "after" the pods it displaced were rescheduled (an in-cluster node-loss drill then read "no
worker was rescheduled"). This copy reads the served clock again whenever `resync_wall_s` of wall time passed
since its last read (each stamp is then within one read's round trip, dilated, plus that interval), and never
goes back (a deadline or a duration computed on it stays ordered).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from math import inf
from typing import Callable

from drills.core.clock import DilatedClock

__all__ = ["ServedClock", "RESYNC_WALL_S"]

log = logging.getLogger(__name__)

# Wall seconds between two reads of the served clock: one local HTTPS round trip is ~1-3 ms; at 600× a copy
# extrapolated for 2 ms may be 1.2 cluster s ahead of a clock that held meanwhile.
RESYNC_WALL_S = 0.002


@dataclass
class ServedClock(DilatedClock):
    """A twin clock served over HTTP, read again every `resync_wall_s` of wall time; monotonic."""

    read: Callable[[], tuple[float, float, float]] | None = None  # () → (served now, monotonic midpoint, round trip)
    resync_wall_s: float = RESYNC_WALL_S

    def __post_init__(self) -> None:
        self._last = -inf
        self._read_at = time.monotonic()
        self._lock = threading.Lock()  # monitors stamp from their own threads

    def timestamp(self) -> float:
        with self._lock:
            if self.read is not None and time.monotonic() - self._read_at >= self.resync_wall_s:
                self._resync()
            now = DilatedClock.timestamp(self)
            if now < self._last:
                now = self._last
            self._last = now
            return now

    def _resync(self) -> None:
        try:
            served, midpoint, rtt = self.read()
        except Exception as err:  # noqa: BLE001 — keep the last copy; the next stamp reads again
            log.debug("served clock not re-read: %s", err)
            self._read_at = time.monotonic()
            return
        self.epoch, self.wall_anchor, self.error_s = served, midpoint, rtt / 2 * self.scale
        self._read_at = time.monotonic()
