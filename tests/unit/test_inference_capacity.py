"""Pure parts of the inference drill's capacity checks: the twin gateway's latency model and the load
windows the error budget and p99 checks judge."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from drills.measure.serving import ServingRecovery
from drills.measure.serving_load import measure_load
from drills.core.clock import WallClock
from drills.load.buckets import BucketAccumulator
from drills.verdicts.timeline import Timeline
from drills.twin.workloads.inference_gateway import modelled_latency


def test_latency_grows_with_the_batch_then_with_the_square_of_the_overload():
    assert modelled_latency(1.0, 2, 32) == pytest.approx(1 + 2 / 32)  # healthy: 4 users on 2 replicas
    assert modelled_latency(1.0, 4, 32) == pytest.approx(1 + 4 / 32)  # one survivor: still headroom
    assert modelled_latency(1.0, 2, 2) == 2.0  # no-headroom, all replicas serving: a full batch
    assert modelled_latency(1.0, 4, 2) == 8.0  # no-headroom, one survivor: 4x its baseline


def _buckets(rows):
    acc = BucketAccumulator(1.0)
    for end, latency, error in rows:
        acc.add(end, latency, error)
    return acc.take_all()


def _recovery(survivors: int) -> ServingRecovery:
    return ServingRecovery(timeline=Timeline(injected=datetime.fromtimestamp(100.5, timezone.utc)), killed=("p",),
                           survivors=survivors, desired=2, ready_replicas=2, replaced=1, startups=(),
                           wall={"injected": 100.5, "recovered": 104.0, "ready": 106.0, "end": 110.0})


def test_the_baseline_stops_before_the_bucket_the_fault_fell_in_and_p99_covers_the_survivor():
    rows = [(t + 0.1, 100.0, None) for t in range(90, 100)]  # steady state
    rows += [(99.9, 900.0, None)]  # the kill's effect before its stamp (the middle of its request)
    rows += [(100.2, 100.0, None), (100.7, 900.0, None)]  # the fault's bucket: one answer after it, slow
    rows += [(t + 0.1, 900.0, None) for t in range(101, 106)]  # the lone survivor, overloaded
    rows += [(t + 0.1, 100.0, None) for t in range(106, 110)] + [(103.5, 1.0, "502 upstream connect error")]
    load = measure_load(_buckets(rows), _recovery(survivors=1), WallClock(), baseline_s=10.0)
    assert load.baseline_p99_ms == pytest.approx(100.0, rel=0.05)  # not the 900 ms answered after the fault
    assert load.serving_p99_ms == pytest.approx(900.0, rel=0.05) and load.after_p99_ms == pytest.approx(100, rel=0.05)
    assert load.budget_error_rate == pytest.approx(1 / 10, abs=1e-4)  # buckets from 101 s: 9 answers, 1 error
    assert load.budget_errors == {"502 upstream connect error": 1}
