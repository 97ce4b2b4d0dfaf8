"""Cluster time: the wall clock for real clusters, a dilated clock for the twin.

The twin runs `scale`× faster than wall time; every timestamp it writes is twin time, so
drills measure recovery in cluster seconds whatever the target.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

__all__ = ["Clock", "WallClock", "DilatedClock", "STOP_WALL_FLOOR_S", "to_iso", "parse_iso"]

# A wait for pods and their processes to stop (a revert) gets at least this much wall time, whatever the clock's
# scale: stopping them is real work, and 300 cluster seconds are half a second of a 600× twin's clock.
STOP_WALL_FLOOR_S = 30.0


class Clock:
    """Cluster time. `now()` is an aware UTC datetime; `sleep(s)` waits `s` cluster seconds."""

    scale: float = 1.0
    # How far this copy of the cluster's clock may be from the cluster's own, either way (cluster seconds):
    # 0 for the wall clock; for a twin's clock read over HTTP, half the read's round trip, dilated.
    error_s: float = 0.0

    def now(self) -> datetime:
        raise NotImplementedError

    def timestamp(self) -> float:
        return self.now().timestamp()

    def wall_seconds(self, cluster_seconds: float) -> float:
        """How long `cluster_seconds` of cluster time lasts on the wall clock."""
        return cluster_seconds / self.scale

    def cluster_seconds(self, wall_seconds: float) -> float:
        return wall_seconds * self.scale

    def deadline(self, cluster_seconds: float, wall_floor_s: float = 0.0) -> float:
        """The cluster timestamp `cluster_seconds` from now, but never sooner than `wall_floor_s` of wall time:
        for waits on real work (processes stopping, controllers catching up) that a fast clock does not speed up."""
        return self.timestamp() + max(cluster_seconds, self.cluster_seconds(wall_floor_s))

    def at_wall(self, wall_ts: float) -> float:
        """The cluster time at epoch wall time `wall_ts` (a stamp another process took, e.g. the load's):
        linear here; a twin's gated clock followed on this host knows when it held (gatedclock.py)."""
        return self.timestamp() - (time.time() - wall_ts) * self.scale

    def wall_at(self, cluster_ts: float) -> float:
        """The epoch wall time at which the cluster's clock read `cluster_ts` (the inverse of `at_wall`)."""
        return time.time() - (self.timestamp() - cluster_ts) / self.scale

    def around(self, request: Callable[[], object]) -> tuple[float, float]:
        """`request()` made; the cluster timestamps before it and after its answer: a fault is stamped by the
        request that made it (the middle of this window), not by the reads or refused attempts before it."""
        before = self.timestamp()
        request()
        return before, self.timestamp()

    @staticmethod
    def iso(moment: datetime | float) -> str:
        """The one timestamp format of records, journals and reports: UTC, milliseconds, `Z`."""
        if not isinstance(moment, datetime):
            moment = datetime.fromtimestamp(moment, timezone.utc)
        return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class WallClock(Clock):
    """Real clusters: cluster time is wall time."""

    scale = 1.0

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


@dataclass
class DilatedClock(Clock):
    """Twin time: starts at `epoch` (cluster time) when created and runs `scale`× faster than wall time.

    `wall_anchor` is the monotonic wall instant that corresponds to `epoch`, so a client that knows
    (epoch, scale, the twin's current time) reproduces the twin's clock without drift.
    """

    scale: float = 60.0
    epoch: float = field(default_factory=time.time)
    wall_anchor: float = field(default_factory=time.monotonic)
    error_s: float = 0.0

    def timestamp(self) -> float:
        return self.epoch + (time.monotonic() - self.wall_anchor) * self.scale

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp(), timezone.utc)

    @classmethod
    def synced(cls, twin_now: float, scale: float) -> "DilatedClock":
        """A client-side copy of a twin clock read as (`twin_now`, `scale`) just now."""
        return cls(scale=scale, epoch=twin_now, wall_anchor=time.monotonic())


def to_iso(moment: datetime | float) -> str:
    """RFC 3339 as Kubernetes writes object timestamps (second precision, `Z`): the twin's API objects
    only. Records, journals and reports use `Clock.iso`."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (with `Z` or an offset, with or without fractions)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
