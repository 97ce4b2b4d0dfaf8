"""Pure analysis of load buckets (`drills.load.buckets`): totals, failure rate and latency over a window, the
steady state before a fault, where an outage shows, when the endpoint recovered, failures per kind and answers
per replica.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drills.load.buckets import Bucket

__all__ = [
    "WindowStats",
    "window",
    "error_rate",
    "percentile",
    "p99",
    "baseline",
    "latency_baseline",
    "first_sustained_success",
    "first_sustained_run",
    "first_failure",
    "kind_counts",
    "served_by",
]


@dataclass(frozen=True)
class WindowStats:
    """Totals over a time window; rates and latencies are NaN when no request completed in it."""

    start: float
    end: float
    requests: int
    failures: int
    failure_rate: float
    rps: float
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    latencies: int = 0  # answers whose latency the histogram holds: how many the percentiles are taken over

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def window(buckets: Sequence[Bucket], start: float | None = None, end: float | None = None) -> WindowStats:
    """Totals of the buckets that start in [start, end) (None: unbounded)."""
    sel = _select(buckets, start, end)
    n = sum(b.n for b in sel)
    fail = sum(b.fail for b in sel)
    hist = _sum_hist(sel)
    t0 = start if start is not None else (sel[0].t if sel else math.nan)
    t1 = end if end is not None else (sel[-1].end if sel else math.nan)
    span = t1 - t0 if sel else math.nan
    nan = math.nan
    return WindowStats(
        start=t0, end=t1, requests=n, failures=fail,
        failure_rate=fail / n if n else nan,
        rps=n / span if sel and span > 0 else nan,
        mean_ms=sum(b.sum_ms for b in sel) / n if n else nan,
        p50_ms=_hist_quantile(hist, 0.50), p99_ms=_hist_quantile(hist, 0.99),
        max_ms=max((b.max_ms for b in sel), default=nan), latencies=sum(hist.values()),
    )


def error_rate(buckets: Sequence[Bucket], start: float | None = None, end: float | None = None) -> float:
    """Failed / all requests completed in [start, end); NaN when none completed (so a budget check fails)."""
    return window(buckets, start, end).failure_rate


def percentile(buckets: Sequence[Bucket], q: float, start: float | None = None, end: float | None = None) -> float:
    """The q-quantile (0..1) of latency in ms over [start, end), to the histogram resolution (±4.5 %); NaN when empty."""
    return _hist_quantile(_sum_hist(_select(buckets, start, end)), q)


def p99(buckets: Sequence[Bucket], start: float | None = None, end: float | None = None) -> float:
    return percentile(buckets, 0.99, start, end)


def baseline(buckets: Sequence[Bucket], before: float, window_s: float | None = None) -> WindowStats:
    """The steady state before a fault: the buckets ending by `before` (the last `window_s` s if given)."""
    start = before - window_s if window_s is not None else None
    return window(buckets, start, before)


def latency_baseline(buckets: Sequence[Bucket], before: float, window_s: float, min_answers: int) -> WindowStats:
    """The latency baseline before a fault: the last `window_s` s before `before`, reaching further back (never
    before the load began) until it holds `min_answers` answers — a p99 needs enough of them, and the steady
    state before the fault is the same state however far back it is read."""
    start = before - window_s
    held = sum(sum(b.hist.values()) for b in _select(buckets, start, before))
    for b in reversed([b for b in buckets if b.t < start]):
        if held >= min_answers:
            break
        start, held = b.t, held + sum(b.hist.values())
    return window(buckets, start, before)


def first_sustained_success(buckets: Sequence[Bucket], after: float, min_duration_s: float,
                            min_ok: int = 1) -> float | None:
    """Start of the first run of successes after `after` that has no failure for `min_duration_s`
    and holds at least `min_ok` successes: the moment the endpoint "recovered". None if never.

    Empty intervals (no request completed) neither break nor extend a run, nor do failures whose requests
    were sent before the run's first success was (`ls`: answered before it, whenever they were stamped). The run
    lasts from the completion of its first success; the moment returned is when that success was sent (`fs`: the
    endpoint took a request it then answered), else its completion (`fo`), never before `after`.
    """
    run = first_sustained_run(buckets, after, min_duration_s, min_ok)
    return None if run is None else run[0]


def first_sustained_run(buckets: Sequence[Bucket], after: float, min_duration_s: float,
                        min_ok: int = 1) -> tuple[float, float] | None:
    """(when its first success was sent, when it completed) of the run `first_sustained_success` finds. Failures
    completed after the second moment came after the endpoint answered again; those before it were answered
    before that success was (a failure takes less than an answer), even when they completed after it was sent."""
    start: float | None = None  # the moment reported
    since: float | None = None  # the run's first completion: its duration counts from here
    count = 0
    for b in buckets:
        if b.end <= after:
            continue
        if b.fail and start is not None and b.last_fail_sent is not None and b.last_fail_sent < start:
            count += b.ok  # its failures were sent before the run's first success was: the outage's, stamped late
        elif b.fail:
            start, since, count = None, None, 0
            if b.first_ok_after is not None and b.first_ok_after >= after:
                since, count = b.first_ok_after, b.ok_after
                start = max(after, b.first_ok_sent if b.first_ok_sent is not None else since)
        elif b.ok:
            if start is None:
                first = b.first_ok_after if b.first_ok_after is not None else b.t
                if first < after:  # the bucket straddles `after`: count only what follows it
                    since, start, count = after, after, max(1, round(b.ok * (b.end - after) / b.w))
                else:
                    since, count = first, b.ok
                    start = max(after, b.first_ok_sent if b.first_ok_sent is not None else first)
            else:
                count += b.ok
        if start is not None and count >= min_ok and b.end - since >= min_duration_s:
            return start, max(start, since)
    return None


def first_failure(buckets: Sequence[Bucket], after: float) -> float | None:
    """Start of the first bucket after `after` with a failure (None if none): where an outage shows."""
    return next((max(after, b.t) for b in buckets if b.end > after and b.fail), None)


def kind_counts(buckets: Sequence[Bucket], start: float | None = None, end: float | None = None) -> dict[str, int]:
    """Failures per kind over the buckets that start in [start, end)."""
    return _sum_maps((b.kinds for b in _select(buckets, start, end)))


def served_by(buckets: Sequence[Bucket], start: float | None = None, end: float | None = None) -> dict[str, int]:
    """Successful answers per replica over the buckets that start in [start, end)."""
    return _sum_maps((b.served for b in _select(buckets, start, end)))


# ---------------------------------------------------------------- helpers

def _select(buckets: Sequence[Bucket], start: float | None, end: float | None) -> list[Bucket]:
    eps = 1e-9
    return [b for b in buckets
            if (start is None or b.t >= start - eps) and (end is None or b.t < end - eps)]


def _sum_maps(maps: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def _sum_hist(buckets: Iterable[Bucket]) -> dict[float, int]:
    hist: dict[float, int] = {}
    for b in buckets:
        for k, v in b.hist.items():
            hist[k] = hist.get(k, 0) + v
    return hist


def _hist_quantile(hist: dict[float, int], q: float) -> float:
    total = sum(hist.values())
    if not total:
        return math.nan
    rank = max(1, math.ceil(q * total))
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return k
    return max(hist)
