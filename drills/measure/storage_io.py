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

__all__ = ["ProbeSeries", "probe_series", "judge_intact", "judge_probe_save", "store_bandwidth_mb_s", "short_window",
           "judge_bandwidth", "judge_saturation_effect", "TrainingSaves", "training_saves", "job_checkpoint_interval",
           "judge_training_saves", "MB", "MIN_EFFECT"]

log = logging.getLogger(__name__)

MB = 1_000_000  # fio and storage vendors quote decimal MB/s
DEFAULT_REPEATS = 5
RATE_WAIT_S = 600.0  # cluster seconds to see two step lines of a running job
BASELINE_SAVES = 5  # the job's usual save: the median of its last this many saves before the saturation
# fio saturated the store only if it moved at least this share of what the store gave the probe alone
MIN_EFFECT = 0.5
CATCH_UP_WALL_S = 0.2  # the monitor has caught up with the job's log when its newest line is this fresh


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


def judge_intact(series: ProbeSeries, baseline: bool = False) -> Verdict:
    """Every checkpoint the probe wrote must read back with every checksum matching — the baseline's too:
    a store that corrupts data at rest is broken whether or not fio is running."""
    n = len(series.runs)
    when = "before the saturation (baseline)" if baseline else "under saturation"
    if series.intact:
        reason = f"checkpoint probe: all {n} checkpoints written {when} read back intact"
    else:
        reason = (f"checkpoint probe: a checkpoint written {when} read back corrupted "
                  f"({', '.join(series.mismatched)} did not match its checksum)")
    return Verdict("baseline checkpoint intact" if baseline else "checkpoint intact", series.intact,
                   float(sum(r.intact for r in series.runs)), float(n), "intact", reason)


def judge_probe_save(baseline: ProbeSeries, saturated: ProbeSeries, ratio: float, limit_s: float | None,
                     fio_stopped: str | None = None) -> Verdict:
    """Save time under saturation ≤ ratio × baseline and ≤ the absolute limit (when the profile sets one).
    A probe that fio did not outlast (`fio_stopped`: when it stopped) was not under saturation: inconclusive."""
    measured, base = saturated.write_s, baseline.write_s
    if fio_stopped is not None:
        return Verdict("checkpoint save", False, measured, ratio * base, "s", baseline=base, inconclusive=True,
                       reason=f"inconclusive: the checkpoint probe did not run under saturation: fio stopped at "
                              f"{fio_stopped}, before the probe finished, so its save time is not judged")
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


def store_bandwidth_mb_s(fio: FioResult | None) -> float | None:
    """What the store gave fio while fio saturated it (read + write), None without fio's report."""
    return fio.total_bw_bytes_s / MB if fio is not None else None


def judge_saturation_effect(fio: FioResult | None, baseline: ProbeSeries, missing: tuple[str, ...] = ()) -> Verdict:
    """Before anything is judged "under saturation", fio must have loaded the store: at least MIN_EFFECT of
    the bandwidth the store gave the probe alone. Otherwise the verdict is inconclusive, never a pass.
    `missing`: the fio pods without a report and why ("pod: why"), named when none left one."""
    alone = baseline.write_mb_s
    need = MIN_EFFECT * alone
    name = "saturation effect"
    if fio is None:
        why = f" ({'; '.join(missing)})" if missing else ""
        return Verdict(name, False, None, need, "MB/s", inconclusive=True, reason=
                       f"inconclusive: the fault had no effect that can be shown: fio left no report{why}")
    got = fio.total_bw_bytes_s / MB
    if not within(need, got):
        return Verdict(name, False, got, need, "MB/s", baseline=alone, inconclusive=True, reason=
                       f"inconclusive: the fault had no effect: fio moved {got:.1f} MB/s, under {MIN_EFFECT:g}× the "
                       f"{alone:.1f} MB/s the store gave the checkpoint probe alone, so the store was not saturated "
                       "(is fio throttled, e.g. a `rate` option?)")
    return Verdict(name, True, got, need, "MB/s", baseline=alone, reason=
                   f"saturation effect: fio moved {got:.1f} MB/s, at least {MIN_EFFECT:g}× the {alone:.1f} MB/s the "
                   "store gave the checkpoint probe alone")


def judge_bandwidth(measured_mb_s: float | None, target_mb_s: float | None, probe: ProbeSeries | None = None
                    ) -> Verdict:
    """fio's achieved bandwidth ≥ the store's declared target; a profile without a target cannot pass silently."""
    if target_mb_s is None:
        return Verdict("store bandwidth", False, measured_mb_s, None, "MB/s",
                       "store bandwidth: no target declared (storage.bandwidth_target_mb_s); set the store's "
                       "required bandwidth in the profile")
    ok = within(target_mb_s, measured_mb_s)
    where = "at least" if ok else "below"
    beside = f", the probe {probe.write_mb_s:.0f} MB/s beside it" if probe is not None else ""
    got = "no fio report" if measured_mb_s is None else f"{measured_mb_s:.0f} MB/s"
    reason = f"store bandwidth under saturation: fio got {got}{beside}, {where} the declared {target_mb_s:g} MB/s"
    return Verdict("store bandwidth", ok, measured_mb_s, float(target_mb_s), "MB/s", reason)


@dataclass(frozen=True)
class TrainingSaves:
    """The job's checkpoint saves from its logs: before the saturation window, and started and ended inside it."""

    baseline: tuple[tuple[int, float], ...]  # (step, seconds) completed before the window
    saturated: tuple[tuple[int, float], ...]  # (step, seconds) started and ended inside the window
    waited_s: float  # cluster seconds waited in the window for a save to complete
    window_start: str
    window_end: str | None = None  # when fio stopped (None: it ran through the whole wait)
    interval_steps: int | None = None  # the job's own checkpoint interval (from its logs), None if unknown
    interval_source: str = ""
    overran: tuple[tuple[int, float], ...] = ()  # (step, seconds under saturation) of saves fio's stop cut
    expected: bool = True  # whether a save was due to start and end inside the window
    warning: str | None = None  # the window was too short for the job's cadence to put a save inside it
    next_step: int | None = None  # the job's next save after the window opened (its step)
    last_step: int | None = None  # the last step its log showed when the wait ended

    @property
    def baseline_s(self) -> float | None:
        """The job's usual save: the median of its last BASELINE_SAVES saves before the saturation. Not the slowest
        of them: a save made while the store was already contended (another tenant's flood, an earlier drill) would
        make a crawl under this one's fio look normal (red team, wave 8); one slow or fast save moves no median."""
        if not self.baseline:
            return None
        last = sorted(s for _, s in self.baseline[-BASELINE_SAVES:])
        mid = len(last) // 2
        return last[mid] if len(last) % 2 else (last[mid - 1] + last[mid]) / 2

    @property
    def saturated_s(self) -> float | None:
        return max(s for _, s in self.saturated) if self.saturated else None

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": [list(x) for x in self.baseline], "saturated": [list(x) for x in self.saturated],
                "baseline_s": self.baseline_s, "saturated_s": self.saturated_s, "waited_s": round(self.waited_s, 1),
                "window_start": self.window_start, "window_end": self.window_end,
                "interval_steps": self.interval_steps, "interval_source": self.interval_source,
                "overran": [list(x) for x in self.overran], "expected": self.expected, "warning": self.warning,
                "next_step": self.next_step, "last_step": self.last_step}


def job_checkpoint_interval(saved_steps: list[int], last_step: int | None, declared: int | None
                            ) -> tuple[int | None, str]:
    """The job's real checkpoint interval, from its logs: the smallest gap between two saves it logged; with
    fewer, None (not observed) — the profile's `declared` interval is a promise, never a reading (issue 30).
    Returns (interval, where it came from or what was missing)."""
    steps = sorted(set(saved_steps))
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    if gaps:
        return min(gaps), f"the job's logs (saves at steps {', '.join(map(str, steps[-3:]))})"
    if steps and last_step is not None and declared and last_step - steps[-1] > declared:
        return None, (f"the job's logs: its only save was at step {steps[-1]} and it reached step {last_step} without "
                      f"another, longer than the declared {declared}")
    seen = f"one save (step {steps[-1]})" if steps else "no save"
    return None, f"not observed: the job's logs show {seen}, so its interval cannot be read"


def training_saves(monitor, window_start: datetime, declared_interval: int | None, ratio: float,
                   window_end: Callable[[], datetime | None] = lambda: None,
                   on_wait: Callable[[str, float], None] | None = None) -> TrainingSaves:
    """Wait (event-driven, on the monitor's log stream) for a save that starts and ends inside the saturation
    window [window_start, window_end()] (window_end() is None while fio still runs); give up once even the
    job's next save (at its real interval, read from its logs) would be over `ratio` × baseline, or fio stopped."""
    clock = monitor.cluster.clock
    start_ts = window_start.timestamp()

    def end_ts() -> float:
        end = window_end()
        return end.timestamp() if end is not None else clock.timestamp()

    def split() -> tuple[list, list, list]:
        before, inside, outside = [], [], []
        stop = end_ts()
        for at, step, seconds in monitor.checkpoint_saves():
            if seconds is None:
                continue
            began, done = at.timestamp() - seconds, at.timestamp()
            if done <= start_ts:
                before.append((step, seconds))
            elif began >= start_ts and done <= stop:
                inside.append((step, seconds))
            elif start_ts <= began < stop:  # started under saturation, still running when fio stopped
                outside.append((step, round(stop - began, 3)))
        return before, inside, outside

    # take in what the job logged while the probes ran (the monitor reads its stream only while waiting)
    behind = clock.cluster_seconds(CATCH_UP_WALL_S)
    monitor.wait_until(lambda: (monitor.last_logged_at() or window_start).timestamp() >= clock.timestamp() - behind,
                       clock.timestamp() + clock.cluster_seconds(CATCH_UP_WALL_S * 10))
    before, _, _ = split()
    base = max((s for _, s in before), default=None)
    if monitor.step_rate() is None:  # two step lines give the pace, hence when the next save starts
        monitor.wait_until(lambda: monitor.step_rate() is not None, clock.timestamp() + RATE_WAIT_S)
    rate = monitor.step_rate()
    saved = [step for _, step, _ in monitor.checkpoint_saves()]
    last = monitor.last_step()
    interval, source = job_checkpoint_interval(saved, last, declared_interval)
    expected = interval is not None and base is not None
    next_step = None
    if expected:
        # the job's next save starts at its next multiple of its interval; it must end within ratio × baseline
        nxt = max(saved, default=0) + interval
        while last is not None and nxt <= last:
            nxt += interval
        eta = (nxt - (last or nxt)) / rate if rate else 0.0
        deadline = clock.timestamp() + (eta + ratio * base) * (1.0 + GRACE)  # the one grace: a late save is seen late

        def due_by() -> float | None:  # when the save must have ended: the job's log reached its step, plus the budget
            at = monitor.reached_at(nxt)
            return None if at is None else at.timestamp() + ratio * base * (1.0 + GRACE)

        def log_overdue() -> bool:  # the job's own log went past the due moment (with slack between its streams)
            due, seen = due_by(), monitor.last_logged_at()
            return due is not None and seen is not None and seen.timestamp() >= due + behind

        monitor.wait_until(lambda: bool(split()[1]) or window_end() is not None or log_overdue(), deadline,
                           on_wait and (lambda: on_wait("checkpoint save", clock.timestamp() - start_ts)))
        # a save was due only if the job's log shows it reached the save's step and fio outlasted the budget
        # after it: read the log up to now first (on a loaded machine it arrives late), then a job slower
        # than its pace is not the store's crawl
        monitor.wait_until(lambda: bool(split()[1]) or (monitor.last_logged_at() or window_start).timestamp()
                           >= clock.timestamp() - behind, clock.timestamp() + clock.cluster_seconds(CATCH_UP_WALL_S * 10))
        due = due_by()
        expected = bool(split()[1]) or (due is not None and due <= end_ts()
                                        and (log_overdue() or clock.timestamp() >= deadline))
        next_step = nxt
    before, inside, outside = split()
    end = window_end()
    warning = short_window(end_ts() - start_ts, interval, rate) if end is not None else None
    if warning:
        log.warning("%s", warning)
    return TrainingSaves(tuple(before), tuple(inside), clock.timestamp() - start_ts, Clock.iso(window_start),
                         Clock.iso(end) if end is not None else None, interval, source, tuple(outside), expected,
                         warning, next_step, monitor.last_step())


def short_window(window_s: float, interval_steps: int | None, steps_per_s: float | None) -> str | None:
    """A warning when the saturation window was shorter than one checkpoint interval of the job: its saves
    cannot all land inside, so whether the store was judged depends on where the window fell."""
    if not interval_steps or not steps_per_s:
        return None
    every_s = interval_steps / steps_per_s
    if window_s >= every_s:
        return None
    return (f"the saturation window ({_s(window_s)}) was shorter than the job's checkpoint interval "
            f"({interval_steps} steps, {_s(every_s)}): a save falls inside it only by chance; saturate for longer "
            "than one interval (storage.saturation.runtime_s, until: runtime)")


def judge_training_saves(saves: TrainingSaves, ratio: float) -> Verdict:
    """The job's saves that started and ended under saturation take ≤ ratio × its usual save before it (the median
    of its last BASELINE_SAVES).
    No save inside the window is never a pass: a fail when one was due (saves crawl), inconclusive when
    the job's own interval or fio's stop left no save to judge."""
    name = "training checkpoint save"
    base, worst = saves.baseline_s, saves.saturated_s
    if base is None:
        return Verdict(name, False, None, None, "s",
                       "training checkpoint save: no save with a duration was logged before the saturation, so "
                       "there is no baseline (does the job log `checkpoint saved … duration_s=`?)")
    budget = ratio * base
    cut = max(saves.overran, key=lambda x: x[1], default=None)
    if worst is None and cut is not None and not within(cut[1], budget):
        return Verdict(name, False, cut[1], budget, "s", baseline=base, reason=
                       f"training checkpoint save of step {cut[0]} started under saturation and was still running "
                       f"{_s(cut[1])} later when fio stopped, over the {ratio:g}× budget ({_s(budget)}): saves crawl "
                       "while the store is saturated")
    if worst is None:
        if saves.interval_steps is None:
            return Verdict(name, False, None, budget, "s", baseline=base, inconclusive=True, reason=
                           f"inconclusive: no training checkpoint save fell inside the saturation window, and the job's "
                           f"checkpoint interval is unknown ({saves.interval_source}), so no save could be expected: the "
                           "store is not judged — fix the job's checkpoint interval or drill when it saves")
        if not saves.expected and saves.window_end is None:
            return Verdict(name, False, None, budget, "s", baseline=base, inconclusive=True, reason=
                           f"inconclusive: no training checkpoint save fell inside the saturation window: the job's "
                           f"log had not reached its next save (step {saves.next_step}; last step seen "
                           f"{saves.last_step}) when the wait ended, so no save was due — a job slower than its "
                           "pace is not a slow store; the store is not judged")
        if not saves.expected:
            return Verdict(name, False, None, budget, "s", baseline=base, inconclusive=True, reason=
                           f"inconclusive: no training checkpoint save started and ended inside the saturation window "
                           f"(fio stopped at {saves.window_end or 'its limit'}, before the job's next save, every "
                           f"{saves.interval_steps} steps, was due to end); saves outside it are not judged"
                           f"{f' — {saves.warning}' if saves.warning else ''}")
        return Verdict(name, False, saves.waited_s, budget, "s", baseline=base, reason=
                       f"training checkpoint save: no save started under saturation finished within "
                       f"{_s(saves.waited_s)}; the budget is {_s(budget)} ({ratio:g}× the {_s(base)} baseline, the "
                       f"job saves every {saves.interval_steps} steps): saves crawl while the store is saturated")
    ok = within(worst, budget)
    step = max(saves.saturated, key=lambda x: x[1])[0]
    where = "within" if ok else "over"
    usual = min(len(saves.baseline), BASELINE_SAVES)
    reason = (f"training checkpoint save of step {step} under saturation: {_s(worst)}, {worst / base:.1f}× the "
              f"{_s(base)} baseline (the median of its last {usual} save(s) before it), {where} the {ratio:g}× "
              f"budget ({_s(budget)})")
    return Verdict(name, ok, worst, budget, "s", reason, baseline=base)


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:.0f} s"
