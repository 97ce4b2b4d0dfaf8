"""A p99 is a measurement only over enough answers (issue 30, class 4): the one p99 judge of the serving drills
(drills/verdicts/latency.py) is inconclusive below 100 answers in either window and names both counts; the pod
kill's latency baseline reaches further back before the fault until it holds that many (bucket_stats)."""

from __future__ import annotations

from drills.load.bucket_stats import latency_baseline
from drills.load.buckets import Bucket, round_ms
from drills.measure.rollout import RolloutLoad
from drills.verdicts.latency import MIN_P99_ANSWERS, judge_p99
from drills.verdicts.rollout import judge_rollout_p99

W = 0.05


def _ok(t: float, n: int, ms: float = 375.0) -> Bucket:
    return Bucket(t=t, w=W, ok=n, sum_ms=n * ms, max_ms=ms, hist={round_ms(ms): n})


def test_a_p99_of_12_answers_is_not_observed_and_the_sentence_counts_them():
    verdict = judge_p99(20_100.0, 12, 20_300.0, 240, 2.0, "during the rollout")
    assert verdict.inconclusive and verdict.unobserved and not verdict.passed and verdict.measured is None
    assert "the baseline held 12 answer(s), a p99 needs at least 100" in verdict.reason, verdict.reason
    thin = judge_p99(375.0, 400, 380.0, 60, 2.0, "under the burst")
    assert thin.inconclusive and "the window under the burst held 60 answer(s)" in thin.reason
    assert "p99 375.0 ms of 400 answers before the fault, 380.0 ms of 60 answers under the burst" in thin.reason


def test_enough_answers_are_judged_against_the_factor():
    ok = judge_p99(375.0, MIN_P99_ANSWERS, 700.0, 500, 2.0, "during the rollout")
    assert ok.passed and ok.measured == 1.87 and ok.baseline == 375.0
    slow = judge_p99(375.0, 300, 900.0, 500, 2.0, "during the rollout")
    assert not slow.passed and not slow.inconclusive and slow.measured == 2.4


def test_the_rollout_and_burst_judge_reads_the_counts_of_its_windows():
    load = RolloutLoad(requests=30, failures=0, error_rate=0.0, baseline_p99_ms=20_000.0, p99_ms=20_100.0,
                       window="during the rollout", baseline_answers=14, answers=30)
    assert judge_rollout_p99(load, 2.0).inconclusive  # before: "1 x baseline, within the limit" — PASS


def test_the_latency_baseline_reaches_back_until_it_holds_enough_answers():
    buckets = [_ok(100.0 + i * W, 10) for i in range(40)]  # 2 s of load, 10 answers a bucket
    before = buckets[-1].end
    last = latency_baseline(buckets, before, 0.5, 50)  # the last 10 buckets hold 100 already
    assert last.latencies == 100 and last.start == before - 0.5
    longer = latency_baseline(buckets, before, 0.5, 250)  # reaches back 25 buckets
    assert longer.latencies == 250 and abs(longer.start - buckets[15].t) < 1e-9
    everything = latency_baseline(buckets, before, 0.5, 10_000)  # never before the load began
    assert everything.latencies == 400 and everything.start == buckets[0].t
