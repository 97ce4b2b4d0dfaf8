"""Training progress as a pure model: steps advance with twin time at a throughput factor that is
piecewise constant, and the steps worth reporting (log cadence, checkpoints, forced lines) are found
with their exact crossing times. No I/O here: the training controller feeds times and reads results.

The network factor follows the profile's fabric model (DESIGN §4): after an uplink of a leaf carrying
the job drops, traffic stalls partly while the fabric converges (`CONVERGING_FACTOR`), then runs
rerouted at `degraded_throughput_factor`, then rebalanced at `rebalanced_throughput_factor`; a leaf
with no uplink left stalls the job completely (factor 0) until the link returns or NCCL times out.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Iterable

__all__ = ["LeafView", "NetPhase", "net_phase", "Progress", "StepFilter", "CONVERGING_FACTOR", "RESTORED_RATIO",
           "log_every"]

log = logging.getLogger(__name__)

CONVERGING_FACTOR = 0.3  # flows hashed onto the dead uplink retransmit until the fabric converges
RESTORED_RATIO = 0.9  # DESIGN §5: throughput ≥ 90 % of baseline counts as restored


@dataclass(frozen=True)
class LeafView:
    """A leaf as the job sees it: uplinks carrying traffic, and when that count last changed."""

    leaf: str
    up: int
    total: int
    changed_at: float


@dataclass(frozen=True)
class NetPhase:
    """The job's network condition at one instant; `since` is when this phase began."""

    name: str  # healthy | converging | rerouted | rebalanced | isolated
    factor: float
    since: float
    leaf: str | None = None
    up: int = 0
    total: int = 0
    ends: float | None = None  # when a time-driven phase gives way to the next one


def net_phase(leaves: Iterable[LeafView], t: float, convergence_s: float, rebalance_s: float,
              degraded: float, rebalanced: float) -> NetPhase:
    """The phase at twin time `t` given the job's leaves (pure)."""
    views = list(leaves)
    isolated = [v for v in views if v.total and v.up == 0]
    if isolated:
        v = max(isolated, key=lambda x: x.changed_at)
        return NetPhase("isolated", 0.0, v.changed_at, v.leaf, v.up, v.total)
    hurt = [v for v in views if v.up < v.total]
    if not hurt:
        since = max((v.changed_at for v in views), default=0.0)
        return NetPhase("healthy", 1.0, since)
    v = max(hurt, key=lambda x: x.changed_at)
    start = v.changed_at
    if t < start + convergence_s:
        return NetPhase("converging", CONVERGING_FACTOR, start, v.leaf, v.up, v.total, start + convergence_s)
    if t < start + max(rebalance_s, convergence_s):
        return NetPhase("rerouted", degraded, start + convergence_s, v.leaf, v.up, v.total,
                        start + max(rebalance_s, convergence_s))
    return NetPhase("rebalanced", rebalanced, start + max(rebalance_s, convergence_s), v.leaf, v.up, v.total)


def log_every(step_time: float) -> int:
    """Step lines every 10 steps, and at least 1 twin second apart for very short steps."""
    return 10 * max(1, math.ceil(1.0 / max(step_time, 1e-6)))


@dataclass
class Progress:
    """One job's progress: `step` (fractional) at twin time `t`, advancing at `rate(t)` steps/second.

    `rate` is given as breakpoints: `segments` is a sorted list of (start_time, steps_per_second)
    that the controller refreshes whenever the job's conditions change.
    """

    step: float
    t: float
    segments: list[tuple[float, float]] = field(default_factory=list)

    def rate_at(self, t: float) -> float:
        rate = 0.0
        for start, r in self.segments:
            if start <= t:
                rate = r
            else:
                break
        return rate

    def advance(self, now: float, wanted: "StepFilter") -> list[tuple[int, float]]:
        """Move to `now`; returns the wanted integer steps crossed, each with its crossing time."""
        out: list[tuple[int, float]] = []
        if now <= self.t:
            return out
        cuts = [s for s, _ in self.segments if self.t < s < now] + [now]
        a, s = self.t, self.step
        for b in cuts:
            rate = self.rate_at(a)
            if rate > 0:
                end = s + rate * (b - a)
                for k in wanted.between(math.floor(s) + 1, math.floor(end)):
                    out.append((k, a + (k - s) / rate))
                s = end
            a = b
        self.step, self.t = s, now
        return out

    def time_to(self, target: float) -> float | None:
        """Twin time at which `step` reaches `target` if the segments stay as they are; None if never."""
        a, s = self.t, self.step
        if s >= target:
            return self.t
        starts = [st for st, _ in self.segments if st > a]
        for b in starts + [math.inf]:
            rate = self.rate_at(a)
            if rate > 0:
                reach = a + (target - s) / rate
                if reach <= b:
                    return reach
                s += rate * (b - a)
            a = b
        return None


@dataclass
class StepFilter:
    """Which integer steps matter: multiples of `every` or of `checkpoint_every`, or in `forced`."""

    every: int
    checkpoint_every: int
    forced: set[int] = field(default_factory=set)

    def between(self, lo: int, hi: int) -> list[int]:
        if hi < lo:
            return []
        found: set[int] = {k for k in self.forced if lo <= k <= hi}
        for period in (self.every, self.checkpoint_every):
            first = ((lo + period - 1) // period) * period
            found.update(range(first, hi + 1, period))
        return sorted(found)

    def next_after(self, step: float) -> int:
        """The next wanted step strictly after `step`."""
        base = math.floor(step) + 1
        candidates = [((base + p - 1) // p) * p for p in (self.every, self.checkpoint_every)]
        candidates += [k for k in self.forced if k >= base]
        return min(candidates)
