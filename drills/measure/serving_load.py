"""The load's figures around a pod kill: baseline rate and p99, error rates in the outage and the error
budget's window, p99 once serving again — read from the load's 50 ms buckets (wall-clock stamps) with
the recovery's wall anchors. It only measures; `drills.verdicts.serving` judges."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable

from drills.core.clock import Clock
from drills.core.errors import CheckFailed
from drills.load.bucket_stats import kind_counts, latency_baseline, window
from drills.load.buckets import Bucket, rebin
from drills.measure.serving import ServingRecovery
from drills.verdicts.latency import MIN_P99_ANSWERS
from drills.verdicts.timeline import format_duration

__all__ = ["LoadMeasure", "measure_load", "load_overlay", "wait_for_load"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadMeasure:
    """The load's figures around the fault (rates 0..1, latencies ms; None where nothing completed)."""

    requests: int
    failures: int
    baseline_rps: float | None
    baseline_p99_ms: float | None
    after_p99_ms: float | None  # once serving again and Ready (the Deployment whole again)
    outage_error_rate: float | None  # from the fault to the endpoint serving again
    budget_error_rate: float | None  # while at least one replica survived / served
    budget_window: str
    serving_p99_ms: float | None = None  # over the budget window: what users saw while a replica served
    budget_errors: dict[str, int] = field(default_factory=dict)  # most frequent errors in that window
    # from the fault to the end of the watch, whatever survived: a voluntary disruption (a drain) must keep
    # users served throughout, so no outage window is excused
    fault_error_rate: float | None = None
    fault_errors: dict[str, int] = field(default_factory=dict)
    failure_kinds: dict[str, int] = field(default_factory=dict)  # failures per kind over the whole load
    client_timeout_s: float | None = None  # cluster seconds a request may take before it counts as hung
    baseline_answers: int = 0  # answers the baseline p99 is taken over
    serving_answers: int = 0  # answers the budget window's p99 is taken over

    def to_dict(self) -> dict:
        return dict(self.__dict__)



def measure_load(buckets: list[Bucket], recovery: ServingRecovery, clock: Clock, baseline_s: float,
                 client_timeout_s: float | None = None) -> LoadMeasure:
    """Load figures from the buckets and the recovery's wall anchors (windows are wall seconds)."""
    w = recovery.wall
    inj, end = w["injected"], w["end"]
    # The baseline stops a bucket before the one the fault's stamp fell in: that bucket holds answers given
    # after the fault, and the stamp is the middle of the kill request, whose effect may come earlier (at a
    # high twin scale, or on a loaded machine, a bucket is many cluster seconds).
    cut = (math.floor(inj / buckets[0].w) - 1) * buckets[0].w if buckets else inj
    base = window(buckets, cut - clock.wall_seconds(baseline_s), cut)
    base_latency = latency_baseline(buckets, cut, clock.wall_seconds(baseline_s), MIN_P99_ANSWERS)
    back = w.get("recovered")
    settled = max(back, w["ready"]) if back is not None and "ready" in w else None
    # Once whole again: answers to requests sent from then on (a busy machine delivers the overload's last answers
    # late, after Ready: a bucket holding one is not "after", or the figure says latency stayed high)
    after = window([b for b in buckets if b.first_sent is None or b.first_sent >= settled], settled, end) \
        if settled is not None else None
    outage = window(buckets, inj, back if back is not None else end)
    if recovery.survivors:
        since, label = inj, f"from the fault on ({recovery.survivors} replica(s) survived)"
    elif back is not None:  # from its first answer on: the outage's failures answered before it are the outage's
        since, label = w.get("answered", back), "since the endpoint served again (no replica survived)"
    else:
        since, label = None, "the endpoint never served again"
    budget = window(buckets, since, end) if since is not None else None
    throughout = window(buckets, inj, end)
    return LoadMeasure(
        requests=sum(b.n for b in buckets), failures=sum(b.fail for b in buckets),
        baseline_rps=_num(base.rps),
        baseline_p99_ms=_num(base_latency.p99_ms), after_p99_ms=_num(after.p99_ms) if after else None,
        outage_error_rate=_num(outage.failure_rate), budget_error_rate=_num(budget.failure_rate) if budget else None,
        budget_window=label, serving_p99_ms=_num(budget.p99_ms) if budget else None,
        budget_errors=_top_errors(buckets, since, end) if since is not None else {},
        failure_kinds=kind_counts(buckets), client_timeout_s=client_timeout_s,
        fault_error_rate=_num(throughout.failure_rate), fault_errors=_top_errors(buckets, inj, end),
        baseline_answers=base_latency.latencies, serving_answers=budget.latencies if budget else 0)


def load_overlay(buckets: list[Bucket], clock: Clock, injected_wall: float, width_s: float = 0.25) -> list[list[float]]:
    """(cluster seconds since the fault, requests per cluster second) points for the timeline chart."""
    return [[round(clock.cluster_seconds(b.t - injected_wall), 2), round(b.n / clock.cluster_seconds(width_s), 3)]
            for b in rebin(buckets, width_s)]


def wait_for_load(buckets: Callable[[], list[Bucket]], clock: Clock, baseline_s: float, timeout_s: float = 120.0,
                  min_answers: int = MIN_P99_ANSWERS) -> None:
    """Until the load's buckets span `baseline_s` cluster seconds (the baseline before a fault) and hold
    `min_answers` answers (a p99 baseline needs them: drills/verdicts/latency.py). A load too slow to answer that
    many by the timeout goes on once its span is there: the p99 check then says how many it had."""
    deadline = time.monotonic() + timeout_s
    span = clock.wall_seconds(baseline_s)
    spanned = False
    while time.monotonic() < deadline:
        got = buckets()
        spanned = bool(got) and got[-1].end - got[0].t >= span
        # the baseline stops a bucket short of the fault's (measure_load, load_window): the last two don't count
        if spanned and sum(sum(b.hist.values()) for b in got[:-2]) >= min_answers:
            return
        time.sleep(0.05)
    if spanned:
        log.info("the load answered fewer than %d requests in %.0f s before the fault", min_answers, timeout_s)
        return
    raise CheckFailed(f"the load did not run for a {format_duration(baseline_s)} baseline within {timeout_s:.0f}s")



def _top_errors(buckets: list[Bucket], start: float, end: float, top: int = 3) -> dict[str, int]:
    counts: dict[str, int] = {}
    for b in buckets:
        if start <= b.t < end:
            for message, n in b.errors.items():
                counts[message] = counts.get(message, 0) + n
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:top])


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)
