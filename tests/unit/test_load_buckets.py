"""Pure bucket analysis: placing failures, recovery and latency from literal buckets."""

import json
import math
import subprocess
import sys

import pytest

from drills.load.bucket_stats import (
    baseline,
    error_rate,
    first_failure,
    first_sustained_success,
    p99,
    percentile,
    window,
)
from drills.load.buckets import (
    Bucket,
    BucketAccumulator,
    merge_buckets,
    read_buckets,
    rebin,
    round_ms,
)

W = 0.05


def ok(t, n=10, ms=5.0):
    return Bucket(t=t, w=W, ok=n, sum_ms=n * ms, max_ms=ms, hist={round_ms(ms): n}, first_ok_after=t + 0.001,
                  ok_after=n)


def bad(t, n=10, ms=1.0, err="503 no ready replica"):
    return Bucket(t=t, w=W, fail=n, sum_ms=n * ms, max_ms=ms, hist={round_ms(ms): n}, last_fail=t + 0.04,
                  errors={err: n})


def ts(start, stop):
    return [round(start + i * W, 6) for i in range(round((stop - start) / W))]


# A drill in miniature: healthy 100.0-101.0, all replicas dead 101.0-102.0, healthy again 102.0-103.0.
DRILL = [ok(t) for t in ts(100.0, 101.0)] + [bad(t) for t in ts(101.0, 102.0)] + [ok(t) for t in ts(102.0, 103.0)]


def test_error_rate_counts_only_the_window():
    assert error_rate(DRILL, 100.0, 101.0) == 0.0
    assert error_rate(DRILL, 101.0, 102.0) == 1.0
    assert error_rate(DRILL, 100.0, 102.0) == pytest.approx(0.5)
    assert error_rate(DRILL) == pytest.approx(1 / 3)


def test_error_rate_is_nan_without_requests_so_a_budget_check_fails():
    rate = error_rate(DRILL, 200.0, 201.0)
    assert math.isnan(rate) and not rate <= 0.01


def test_p99_and_percentiles_follow_the_histogram():
    buckets = [Bucket(t=0.0, w=W, ok=100, hist={round_ms(10.0): 98, round_ms(100.0): 2})]
    assert p99(buckets) == round_ms(100.0)
    assert percentile(buckets, 0.5) == round_ms(10.0)
    assert percentile(buckets, 0.98) == round_ms(10.0)
    assert math.isnan(p99([]))


def test_baseline_is_the_steady_state_before_the_fault():
    b = baseline(DRILL, before=101.0)
    assert (b.requests, b.failures, b.failure_rate) == (200, 0, 0.0)
    assert b.p99_ms == round_ms(5.0)
    assert b.rps == pytest.approx(200.0)
    assert baseline(DRILL, before=101.0, window_s=0.5).requests == 100


def test_recovery_is_the_start_of_the_sustained_run_after_the_fault():
    got = first_sustained_success(DRILL, after=101.0, min_duration_s=0.5)
    assert got == pytest.approx(102.001)


def test_recovery_is_placed_inside_a_mixed_bucket():
    mixed = Bucket(t=102.0, w=W, ok=3, fail=5, last_fail=102.02, first_ok_after=102.03, ok_after=3)
    buckets = DRILL[:40] + [mixed] + [ok(t) for t in ts(102.05, 103.0)]
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.5) == pytest.approx(102.03)


def test_a_blip_of_success_is_not_recovery():
    blip = [ok(t) for t in ts(101.5, 101.6)]
    buckets = DRILL[:20] + [bad(t) for t in ts(101.0, 101.5)] + blip + [bad(t) for t in ts(101.6, 102.0)] + DRILL[40:]
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.3) == pytest.approx(102.001)
    # ...unless a shorter run is enough.
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.05) == pytest.approx(101.501)


def test_never_recovered_and_min_ok():
    assert first_sustained_success(DRILL[:40], after=101.0, min_duration_s=0.1) is None
    sparse = [bad(101.0), ok(101.5, n=1), ok(102.5, n=1)]
    assert first_sustained_success(sparse, after=101.0, min_duration_s=0.5, min_ok=3) is None
    assert first_sustained_success(sparse, after=101.0, min_duration_s=0.5, min_ok=2) == pytest.approx(101.501)


def test_no_failure_at_all_means_serving_from_the_fault_on():
    healthy = [ok(t) for t in ts(100.0, 103.0)]
    assert first_sustained_success(healthy, after=101.0, min_duration_s=0.5) == pytest.approx(101.001)


def test_recovery_is_when_the_first_answered_request_was_sent():
    """Its answer came a request's latency later: at 600× 5 wall ms of latency are 3 cluster seconds."""
    acc = BucketAccumulator(width_s=W)
    acc.add(102.010, 1.0, "503 no ready replica", start_s=102.009)
    acc.add(102.031, 5.0, start_s=102.026)  # sent before the failure above completed: still answered
    for i in range(1, 20):
        acc.add(102.03 + i * W, 5.0, start_s=102.025 + i * W)
    buckets = DRILL[:40] + acc.take_all()
    assert buckets[40].first_ok_sent == pytest.approx(102.026)
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.5) == pytest.approx(102.026)
    # the line keeps it (`fs`), and a merge of workers keeps the send time of the first answer it keeps
    back = Bucket.from_json(json.loads(json.dumps(buckets[40].to_json())))
    assert back.first_ok_sent == pytest.approx(102.026)
    other = Bucket(t=102.0, w=W, ok=1, first_ok_after=102.028, first_ok_sent=102.020, ok_after=1)
    (merged,) = merge_buckets([back, other])
    assert (merged.first_ok_after, merged.first_ok_sent) == (pytest.approx(102.028), pytest.approx(102.020))


def test_a_success_sent_before_the_fault_is_never_a_recovery_before_it():
    late = Bucket(t=101.0, w=W, ok=10, first_ok_after=101.01, first_ok_sent=100.99, ok_after=10)
    buckets = [late] + [ok(t) for t in ts(101.05, 102.0)]
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.5) == pytest.approx(101.0)


def test_the_outage_shows_at_the_first_failing_bucket_after_the_fault():
    assert first_failure(DRILL, after=100.5) == pytest.approx(101.0)
    assert first_failure(DRILL, after=103.0) is None
    assert first_failure([ok(100.0)], after=99.0) is None


def test_accumulator_buckets_by_completion_time_and_tracks_the_turn():
    acc = BucketAccumulator(width_s=W)
    acc.add(10.001, 3.0)
    acc.add(10.010, 1.0, "503 no ready replica")
    acc.add(10.020, 1.0, "503 no ready replica")
    acc.add(10.030, 4.0)
    acc.add(10.040, 6.0)
    acc.add(10.060, 5.0)
    for i in range(5):
        acc.add(10.045, 1.0, f"other error {i}")
    acc.add(10.044, 2.0)  # late success, before the last failure
    assert acc.take_closed(now_s=10.09) == []  # not closed yet (grace)
    first, = acc.take_closed(now_s=10.11)
    assert (first.t, first.ok, first.fail) == (10.0, 4, 7)
    assert first.last_fail == 10.045 and first.first_ok_after is None
    assert first.errors == {"503 no ready replica": 2, "other error 0": 1, "other error 1": 1}
    assert first.max_ms == 6.0
    rest = acc.take_all()
    assert [(b.t, b.ok, b.first_ok_after) for b in rest] == [(0.05 * 201, 1, 10.06)]


def test_jsonl_round_trip_and_merge_of_workers(tmp_path):
    a = BucketAccumulator(W)
    b = BucketAccumulator(W)
    a.add(5.01, 2.0, "503 no ready replica")
    a.add(5.03, 2.0)
    b.add(5.02, 8.0)
    b.add(5.04, 8.0)
    for name, acc in (("w0", a), ("w1", b)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps(x.to_json()) + "\n" for x in acc.take_all()) + '{"t": 5.1, "w"', encoding="utf-8")
    merged, = read_buckets([tmp_path / "w0.jsonl", tmp_path / "w1.jsonl", tmp_path / "missing.jsonl"])
    assert (merged.ok, merged.fail, merged.max_ms) == (3, 1, 8.0)
    # After the merged last failure (5.01) worker 1's run (from 5.02) comes first.
    assert merged.last_fail == 5.01 and merged.first_ok_after == 5.02 and merged.ok_after == 3
    assert merged.hist == {round_ms(2.0): 2, round_ms(8.0): 2}


def test_merge_drops_successes_that_precede_another_workers_failure():
    x = Bucket(t=1.0, w=W, ok=2, first_ok_after=1.01, ok_after=2)
    y = Bucket(t=1.0, w=W, fail=1, last_fail=1.03, first_ok_after=1.04, ok_after=1)
    m, = merge_buckets([x, y])
    assert (m.last_fail, m.first_ok_after, m.ok_after) == (1.03, 1.04, 1)


def test_rebin_to_one_second_for_charts():
    coarse = rebin(DRILL, 1.0)
    assert [(b.t, b.ok, b.fail) for b in coarse] == [(100.0, 200, 0), (101.0, 0, 200), (102.0, 200, 0)]
    assert window(coarse).requests == window(DRILL).requests


def test_round_ms_keeps_latency_within_five_percent():
    for ms in (0.3, 1.0, 7.7, 42.0, 950.0, 12_345.0):
        assert abs(round_ms(ms) - ms) / ms < 0.05


def test_importing_the_runner_never_imports_locust_or_gevent():
    code = ("import sys, drills.load, drills.load.runner, drills.load.buckets; "
            "bad = [m for m in ('locust', 'gevent') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_locustfile_refuses_to_load_outside_locust():
    code = ("import sys\ntry:\n    import drills.load.locustfile\nexcept ImportError as e:\n    print(e)\n"
            "sys.exit(3 if 'gevent' in sys.modules or 'locust' in sys.modules else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "LoadRunner" in proc.stdout


def test_the_recovered_run_also_says_when_its_first_answer_arrived():
    # sent at 102.02, answered at 102.04; the outage's last failure completed at 102.03, after the send: it was
    # answered before that success (a failure is quicker than an answer) and belongs to the outage, not after it
    mixed = Bucket(t=102.0, w=W, ok=3, fail=5, last_fail=102.03, first_ok_after=102.04, first_ok_sent=102.02,
                   ok_after=3)
    buckets = DRILL[:40] + [mixed] + [ok(t) for t in ts(102.05, 103.0)]
    from drills.load.bucket_stats import first_sustained_run

    assert first_sustained_run(buckets, after=101.0, min_duration_s=0.5) == pytest.approx((102.02, 102.04))
    assert first_sustained_success(buckets, after=101.0, min_duration_s=0.5) == pytest.approx(102.02)


def test_a_failure_sent_before_the_first_success_does_not_end_the_recovered_run():
    # A busy load generator stamps completions late and out of the endpoint's order: the 503 was sent at 102.000
    # and answered before the success sent at 102.002 was, but its completion was stamped last (102.010)
    from drills.load.bucket_stats import first_sustained_run

    acc = BucketAccumulator(W)
    acc.add(101.90, 2.0, "503 no ready replica", "status", start_s=101.899)
    acc.add(102.004, 3.0, None, replica="new-1", start_s=102.002)
    acc.add(102.010, 2.0, "503 no ready replica", "status", start_s=102.000)
    for t in ts(102.02, 103.0):
        acc.add(t + 0.001, 3.0, None, replica="new-1", start_s=t)
    buckets = merge_buckets(acc.take_all())
    assert first_sustained_run(buckets, after=101.5, min_duration_s=0.5) == pytest.approx((102.002, 102.004))
    # a failure sent after that success was sent still ends the run
    acc.add(102.0101, 2.0, "503 no ready replica", "status", start_s=102.003)
    late = merge_buckets(buckets + acc.take_all())
    assert first_sustained_run(late, after=101.5, min_duration_s=0.5)[0] > 102.0101


def test_a_bucket_knows_its_earliest_send_so_a_straggler_is_not_counted_after():
    """The overload's last answers, delivered late by a busy machine after the Deployment is whole again, were
    counted 'once Ready again' and the figure said latency stayed high: a bucket holding an answer to a request sent
    before a moment is not after it (drills/measure/serving_load.py)."""
    acc = BucketAccumulator(0.05)
    acc.add(10.02, 2900.0, start_s=9.50)  # sent during the overload, answered after Ready (10.0)
    acc.add(10.03, 700.0, start_s=10.01)
    acc.add(10.07, 700.0, start_s=10.06)
    straggled, clean = acc.take_all()
    assert straggled.first_sent == 9.50 and clean.first_sent == 10.06
    assert Bucket.from_json(straggled.to_json()).first_sent == 9.50  # kept in the bucket files
    merged = merge_buckets([straggled, clean])
    assert [b.first_sent for b in merged] == [9.50, 10.06]
    after = window([b for b in merged if b.first_sent is None or b.first_sent >= 10.0], 10.0, 11.0)
    assert after.p99_ms == pytest.approx(700.0, rel=0.05)
