"""Storage-saturation checks: the checkpoint probe before and under saturation, the store's bandwidth,
and the training job's own checkpoint saves before and during the saturation window.

Measure here, judge in the `judge_*` functions (one `within()` comparison each), so a reviewer reads
"checkpoint save under saturation: 0.41 s, 3.2× the 0.13 s baseline, over the 2.0× budget (0.26 s)".
The probe runs `repeats` times and its median is used: one fsync on a busy machine is noise.
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from drills.core.clock import Clock
from drills.measure.checkpoint_io import ProbeResult, probe_checkpoint
from drills.faults.storage.fio import FioResult
from drills.verdicts.targets import GRACE
from drills.verdicts.timeline import Verdict, within

__all__ = ["ProbeSeries", "probe_series", "judge_intact", "judge_probe_save", "store_bandwidth_mb_s",
           "judge_bandwidth", "TrainingSaves", "training_saves", "judge_training_saves", "MB"]

log = logging.getLogger(__name__)

MB = 1_000_000  # fio and storage vendors quote decimal MB/s
DEFAULT_REPEATS = 5
RATE_WAIT_S = 600.0  # cluster seconds to see two step lines of a running job


@dataclass(frozen=True)
class ProbeSeries:
    """Several probes of one store in a row; the figures are medians."""

    runs: tuple[ProbeResult, ...]

    @property
    def write_s(self) -> float:
        return statistics.median(r.write_s for r in self.runs)

    @property
    def read_s(self) -> float:
        return statistics.median(r.read_s for r in self.runs)

    @property
    def write_mb_s(self) -> float:
        return statistics.median(r.write_bw_bytes_s for r in self.runs) / MB

    @property
    def read_mb_s(self) -> float:
        return statistics.median(r.read_bw_bytes_s for r in self.runs) / MB

    @property
    def intact(self) -> bool:
        return all(r.intact for r in self.runs)

    @property
    def mismatched(self) -> tuple[str, ...]:
        return tuple(sorted({m for r in self.runs for m in r.mismatched}))

    def to_dict(self) -> dict[str, Any]:
        first = self.runs[0]
        return {"total_bytes": first.total_bytes, "shards": first.shards, "repeats": len(self.runs),
                "write_s": round(self.write_s, 4), "read_s": round(self.read_s, 4),
                "write_mb_s": round(self.write_mb_s, 1), "read_mb_s": round(self.read_mb_s, 1),
                "intact": self.intact, "mismatched": list(self.mismatched),
                "write_s_runs": [round(r.write_s, 4) for r in self.runs]}


def probe_series(directory: str | Path, size_mb: int, shards: int, repeats: int = DEFAULT_REPEATS) -> ProbeSeries:
    """Save + load a checkpoint-shaped probe `repeats` times (CheckFailed if the store cannot be written)."""
    return ProbeSeries(tuple(probe_checkpoint(directory, size_mb * MB, shards) for _ in range(max(1, repeats))))


def judge_intact(series: ProbeSeries) -> Verdict:
    """A checkpoint written under saturation must read back with every checksum matching."""
    n = len(series.runs)
    if series.intact:
        reason = f"checkpoint probe: all {n} checkpoints written under saturation read back intact"
    else:
        reason = (f"checkpoint probe: a checkpoint written under saturation read back corrupted "
                  f"({', '.join(series.mismatched)} did not match its checksum)")
    return Verdict("checkpoint intact", series.intact, float(sum(r.intact for r in series.runs)), float(n),
                   "intact", reason)


def judge_probe_save(baseline: ProbeSeries, saturated: ProbeSeries, ratio: float, limit_s: float | None) -> Verdict:
    """Save time under saturation ≤ ratio × baseline and ≤ the absolute limit (when the profile sets one)."""
    measured, base = saturated.write_s, baseline.write_s
    budget = ratio * base
    target = min(budget, limit_s) if limit_s is not None else budget
    times = measured / base if base > 0 else math.inf
    head = f"checkpoint save under saturation: {_s(measured)}, {times:.1f}× the {_s(base)} baseline"
    if not within(measured, budget):
        reason = f"{head}, over the {ratio:g}× budget ({_s(budget)})"
    elif limit_s is not None and not within(measured, limit_s):
        reason = f"{head}, over the absolute limit of {_s(limit_s)}"
    else:
        limit = f" and the {_s(limit_s)} limit" if limit_s is not None else ""
        reason = f"{head}, within the {ratio:g}× budget ({_s(budget)}){limit}"
    return Verdict("checkpoint save", within(measured, target), measured, target, "s", reason, baseline=base)


def store_bandwidth_mb_s(fio: FioResult | None, probe: ProbeSeries) -> float:
    """What the store delivered at once: fio's read + write bandwidth plus the probe's save bandwidth."""
    return (fio.total_bw_bytes_s / MB if fio is not None else 0.0) + probe.write_mb_s


def judge_bandwidth(measured_mb_s: float | None, target_mb_s: float | None, fio: FioResult | None) -> Verdict:
    """At least the declared bandwidth under fio + probe; a profile without a target cannot pass silently."""
    if target_mb_s is None:
        return Verdict("store bandwidth", False, measured_mb_s, None, "MB/s",
                       "store bandwidth: no target declared (storage.bandwidth_target_mb_s); set the store's "
                       "required bandwidth in the profile")
    parts = f"fio {fio.total_bw_bytes_s / MB:.0f} MB/s + probe" if fio is not None else "probe only, no fio report"
    ok = measured_mb_s is not None and within(target_mb_s, measured_mb_s)
    where = "at least" if ok else "below"
    reason = (f"store bandwidth under fio and the probe: {measured_mb_s or 0:.0f} MB/s ({parts}), "
              f"{where} the declared {target_mb_s:g} MB/s")
    return Verdict("store bandwidth", ok, measured_mb_s, float(target_mb_s), "MB/s", reason)


@dataclass(frozen=True)
class TrainingSaves:
    """The job's checkpoint saves from its logs: before the saturation window and started within it."""

    baseline: tuple[tuple[int, float], ...]  # (step, seconds) completed before the window
    saturated: tuple[tuple[int, float], ...]  # (step, seconds) started inside the window
    waited_s: float  # cluster seconds waited in the window for a save to complete
    window_start: str

    @property
    def baseline_s(self) -> float | None:
        return max(s for _, s in self.baseline) if self.baseline else None

    @property
    def saturated_s(self) -> float | None:
        return max(s for _, s in self.saturated) if self.saturated else None

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": [list(x) for x in self.baseline], "saturated": [list(x) for x in self.saturated],
                "baseline_s": self.baseline_s, "saturated_s": self.saturated_s, "waited_s": round(self.waited_s, 1),
                "window_start": self.window_start}


def training_saves(monitor, window_start: datetime, interval_steps: int, ratio: float,
                   on_wait: Callable[[str, float], None] | None = None) -> TrainingSaves:
    """Wait (event-driven, on the monitor's log stream) for a save that starts inside the window to be
    logged; give up once even a save started at the next interval would be over `ratio` × baseline."""
    clock = monitor.cluster.clock
    start_ts = window_start.timestamp()

    def split() -> tuple[list, list]:
        before, inside = [], []
        for at, step, seconds in monitor.checkpoint_saves():
            if seconds is None:
                continue
            began = at.timestamp() - seconds
            (inside if began >= start_ts else before if at.timestamp() <= start_ts else []).append((step, seconds))
        return before, inside

    before, _ = split()
    base = max((s for _, s in before), default=None)
    if monitor.step_rate() is None:  # two step lines give the pace, hence when the next save starts
        monitor.wait_until(lambda: monitor.step_rate() is not None, clock.timestamp() + RATE_WAIT_S)
    rate = monitor.step_rate()
    # the next save starts within one interval; it must finish within ratio × baseline
    eta = interval_steps / rate if rate else 0.0
    deadline = start_ts + (eta + ratio * (base or 0.0)) * (1.0 + GRACE)  # the one grace: a late save is seen late
    if base is not None:
        monitor.wait_until(lambda: bool(split()[1]), deadline,
                           on_wait and (lambda: on_wait("checkpoint save", clock.timestamp() - start_ts)))
    before, inside = split()
    return TrainingSaves(tuple(before), tuple(inside), clock.timestamp() - start_ts,
                         Clock.iso(window_start))


def judge_training_saves(saves: TrainingSaves, ratio: float) -> Verdict:
    """The job's saves that started under saturation take ≤ ratio × its slowest save before it."""
    base, worst = saves.baseline_s, saves.saturated_s
    if base is None:
        return Verdict("training checkpoint save", False, None, None, "s",
                       "training checkpoint save: no save with a duration was logged before the saturation, so "
                       "there is no baseline (does the job log `checkpoint saved … duration_s=`?)")
    budget = ratio * base
    if worst is None:
        return Verdict("training checkpoint save", False, saves.waited_s, budget, "s", baseline=base, reason=
                       f"training checkpoint save: no save started under saturation finished within "
                       f"{_s(saves.waited_s)}; the budget is {_s(budget)} ({ratio:g}× the {_s(base)} baseline): "
                       "saves crawl while the store is saturated")
    ok = within(worst, budget)
    step = max(saves.saturated, key=lambda x: x[1])[0]
    where = "within" if ok else "over"
    reason = (f"training checkpoint save of step {step} under saturation: {_s(worst)}, {worst / base:.1f}× the "
              f"{_s(base)} baseline, {where} the {ratio:g}× budget ({_s(budget)})")
    return Verdict("training checkpoint save", ok, worst, budget, "s", reason, baseline=base)


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:.0f} s"
