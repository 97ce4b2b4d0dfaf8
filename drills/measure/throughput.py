"""Training throughput from step log lines: the baseline before a fault and when it came back.

Pure functions over `Sample`s (one per step line: cluster time, step, samples/s, step time, and which
worker printed it). Throughput is samples/s when the log gives it, else steps/s. Recovery is the
moment throughput got back to `ratio` × baseline and then stayed there for `sustain_s`: step lines
come every few steps, so the moment is interpolated between the last slow line and the first fast
one from the same worker (the steps done between them fix when the rate changed), never read as
"when we happened to see a fast line".
"""

from __future__ import annotations

import itertools

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import fmean
from typing import Sequence

__all__ = ["Sample", "ThroughputRecovery", "baseline", "find_recovery", "overlay", "BASELINE_WINDOW_S"]

log = logging.getLogger(__name__)

BASELINE_WINDOW_S = 120.0  # cluster seconds of step lines before the fault that make the baseline
_MIN_BASELINE_SAMPLES = 3


@dataclass(frozen=True)
class Sample:
    """One step line: cluster time, step, throughput figures, and the worker (pod uid) that printed it."""

    at: datetime
    step: int
    samples_per_s: float | None
    step_time_s: float | None
    worker: str

    @property
    def value(self) -> float | None:
        """Throughput: samples/s, else steps/s."""
        if self.samples_per_s is not None:
            return self.samples_per_s
        return 1.0 / self.step_time_s if self.step_time_s else None

    @property
    def rate(self) -> float | None:
        """Steps per second at this line (for interpolating between lines)."""
        return 1.0 / self.step_time_s if self.step_time_s else None


@dataclass(frozen=True)
class ThroughputRecovery:
    """When throughput got back to the threshold (interpolated) and what it held over the window."""

    at: datetime
    first_line: datetime  # the first step line at or above the threshold
    sustained_mean: float  # mean throughput over [at, at + sustain_s]
    interpolated: bool


def baseline(samples: Sequence[Sample], before: datetime, window_s: float = BASELINE_WINDOW_S) -> float | None:
    """Mean throughput of the lines in the `window_s` before `before` (at least the last 3 lines before it)."""
    earlier = sorted((s for s in samples if s.at < before and s.value is not None), key=lambda s: s.at)
    if not earlier:
        return None
    recent = [s for s in earlier if (before - s.at).total_seconds() <= window_s]
    if len(recent) < _MIN_BASELINE_SAMPLES:
        recent = earlier[-_MIN_BASELINE_SAMPLES:]
    return fmean(s.value for s in recent)  # type: ignore[misc]


def find_recovery(samples: Sequence[Sample], after: datetime, base: float, ratio: float,
                  sustain_s: float) -> ThroughputRecovery | None:
    """The first moment after `after` from which throughput stays ≥ ratio × base for `sustain_s`
    (proved by a line at or past the window's end); None while that has not happened."""
    threshold = ratio * base
    ordered = sorted((s for s in samples if s.value is not None), key=lambda s: (s.at, s.worker))
    later = [s for s in ordered if s.at > after]
    for i, first in enumerate(later):
        if first.value < threshold or (i and later[i - 1].value >= threshold):  # type: ignore[operator]
            continue  # not the start of a run of good lines
        start, interpolated = _crossing(ordered, first, after, threshold)
        end = start + timedelta(seconds=sustain_s)
        window = list(itertools.takewhile(lambda s: s.at <= end, itertools.islice(later, i, None)))  # time order
        if any(s.value < threshold for s in window):  # type: ignore[operator]
            continue
        if later[-1].at < end:
            return None  # good so far; the window is not over yet (no line at or past its end)
        return ThroughputRecovery(start, first.at, fmean(s.value for s in window), interpolated)  # type: ignore[misc]
    return None


def overlay(samples: Sequence[Sample], origin: datetime, max_points: int = 200) -> list[tuple[float, float]]:
    """(seconds since `origin`, throughput) for the timeline chart: one point per instant, thinned."""
    seen: dict[float, float] = {}
    for s in sorted(samples, key=lambda s: s.at):
        if s.value is not None:
            seen.setdefault(round((s.at - origin).total_seconds(), 3), s.value)
    points = sorted(seen.items())
    step = max(1, len(points) // max_points)
    return points[::step]


def _crossing(ordered: Sequence[Sample], first: Sample, after: datetime, threshold: float) -> tuple[datetime, bool]:
    """When the rate changed between the same worker's previous (slow) line and `first`: the steps done
    between them are old_rate·(x − t0) + new_rate·(t1 − x). Without a usable previous line: `first.at`."""
    prev = next((s for s in reversed(ordered) if s.worker == first.worker and s.at < first.at), None)
    if prev is None or prev.value is None or prev.value >= threshold or prev.step >= first.step:
        return first.at, False
    r0, r1 = prev.rate, first.rate
    if not r0 or not r1 or r1 <= r0:
        return first.at, False
    t0, t1 = prev.at, first.at
    span = (t1 - t0).total_seconds()
    x = ((first.step - prev.step) - r1 * span) / (r0 - r1)  # seconds after t0
    x = min(max(x, 0.0), span)
    start = t0 + timedelta(seconds=x)
    return max(start, after), True
