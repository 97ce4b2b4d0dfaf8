"""A client's copy of the twin's gated clock on the same host (the twin side: gatedclock.py).

The twin publishes the earliest due time of its held work, and the history of its changes, in a shared file in
its state dir; a drill on the same host reads it on every `timestamp()`, so its deadlines wait when the twin
waits, and converts wall stamps other processes took (the load generator's) to the cluster time of that moment
(`at_wall`, `wall_at`). A twin elsewhere is read over HTTP instead (drills/core/kube.py).
"""

from __future__ import annotations

import logging
import mmap
import os
import time
from dataclasses import dataclass
from math import inf
from pathlib import Path

from drills.core.clock import DilatedClock
from drills.core.gatedclock import (
    _COUNT, _ENTRY, _LAYOUT, _RING, _RING_AT, _SIZE, STALL_BOUND_S, boot_id, held_s,
)

__all__ = ["FollowingClock"]

log = logging.getLogger(__name__)


@dataclass
class FollowingClock(DilatedClock):
    """A client's copy of a gated twin clock on the same host: the same dilation, the same holds."""

    gate: str = ""
    stall_bound_s: float = STALL_BOUND_S

    def __post_init__(self) -> None:
        self._last = -inf
        self._writing_since = 0.0  # monotonic: since when the gate has been seen mid-write (0: it is not)
        fd = os.open(self.gate, os.O_RDONLY)
        try:
            self._mm = mmap.mmap(fd, _SIZE, prot=mmap.PROT_READ)
        finally:
            os.close(fd)

    @classmethod
    def of_twin(cls, info: dict) -> "FollowingClock | None":
        """From twin.json's "clock" entry; None when it cannot be followed here (another host or boot, an older
        twin, the gate file gone): the caller reads the clock over HTTP instead."""
        spec = info.get("clock") or {}
        if not spec.get("gate") or spec.get("boot") != boot_id() or not Path(spec["gate"]).exists():
            return None
        try:
            return cls(scale=float(spec["scale"]), epoch=float(spec["epoch"]), wall_anchor=float(spec["anchor"]),
                       gate=spec["gate"], stall_bound_s=float(spec.get("stall_bound_s", STALL_BOUND_S)))
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.debug("twin clock not followed: %s", err)
            return None

    def _ceiling(self) -> float | None:
        """The gate's due time (inf: nothing held, or a stall); None while the twin is writing it."""
        for _ in range(100):
            try:
                seq, due, since = _LAYOUT.unpack_from(self._mm, 0)
                again = _LAYOUT.unpack_from(self._mm, 0)[0]
            except ValueError:  # closed
                return inf
            if seq == again and not seq % 2:
                return due if held_s(self, due, since) <= self.stall_bound_s else inf
        return None

    def timestamp(self) -> float:
        now = DilatedClock.timestamp(self)
        due = self._ceiling()
        if due is None and self._last == -inf:  # a first reading has no last one to wait at: it waits for the
            deadline = time.monotonic() + self.stall_bound_s  # twin's write to end. Taking the dilated clock here
            while due is None and time.monotonic() < deadline:  # put a copy minutes ahead of a twin still starting
                time.sleep(0.001)  # its pods, and it never goes back (a lane's drill: "ready +-14m37s", then
                due = self._ceiling()  # FAIL "no worker was rescheduled" on a healthy twin; CI, a loaded run)
                now = DilatedClock.timestamp(self)
        if due is None:  # the twin is lowering its gate (preempted mid-write, on a busy host): time waits for it,
            writing = self._writing_since = self._writing_since or time.monotonic()  # for `stall_bound_s` at most
            due = self._last if self._last > -inf and time.monotonic() - writing <= self.stall_bound_s else inf
        else:
            self._writing_since = 0.0
        if due < now:
            now = due
        if now < self._last:
            now = self._last
        self._last = now
        return now

    def at_wall(self, wall_ts: float) -> float:
        """The cluster time this clock read at epoch wall time `wall_ts` (a load generator's stamp), from the
        gate's history; the linear conversion when the history does not reach back that far."""
        mono = wall_ts - (time.time() - time.monotonic())
        try:
            count = _COUNT.unpack_from(self._mm, _LAYOUT.size)[0]
        except ValueError:  # closed
            return super().at_wall(wall_ts)
        lo, hi = max(0, count - _RING + 1024), count - 1  # (the oldest entries may be being overwritten)
        if hi < lo or self._entry(lo)[0] > mono:
            return super().at_wall(wall_ts)
        while lo < hi:  # the last change at or before `mono`
            mid = (lo + hi + 1) // 2
            if self._entry(mid)[0] <= mono:
                lo = mid
            else:
                hi = mid - 1
        since, due = self._entry(lo)
        dilated = self.epoch + (mono - self.wall_anchor) * self.scale
        passed = self.wall_anchor + (due - self.epoch) / self.scale
        if due < dilated and mono - max(passed, since) <= self.stall_bound_s:
            return due
        return dilated

    def wall_at(self, cluster_ts: float) -> float:
        """The epoch wall time at which this clock first read `cluster_ts` (the inverse of `at_wall`)."""
        try:
            count = _COUNT.unpack_from(self._mm, _LAYOUT.size)[0]
        except ValueError:
            return super().wall_at(cluster_ts)
        lo, hi = max(0, count - _RING + 1024), count - 1

        def reads(n: int) -> float:  # what the clock read as change n happened
            since, due = self._entry(n)
            return min(self.epoch + (since - self.wall_anchor) * self.scale, due)

        if hi < lo or reads(lo) >= cluster_ts:
            return super().wall_at(cluster_ts)
        first, last = lo + 1, hi + 1  # the first change at which it read `cluster_ts` or later (last + 1: none)
        while first < last:
            mid = (first + last) // 2
            if reads(mid) >= cluster_ts:
                last = mid
            else:
                first = mid + 1
        since, due = self._entry(first - 1)
        mono = self.wall_anchor + (cluster_ts - self.epoch) / self.scale  # where the dilated clock read it
        if due < cluster_ts:  # held below it until the next change
            mono = self._entry(first)[0] if first <= hi else mono
        mono = max(mono, since)
        return mono + (time.time() - time.monotonic())

    def _entry(self, n: int) -> tuple[float, float]:
        return _ENTRY.unpack_from(self._mm, _RING_AT + (n % _RING) * _ENTRY.size)
