"""The load's watermark: what a drill at its deadline may conclude from the load's results (issue 12/19: at
600× the results of the last flush interval are minutes of cluster time)."""

from __future__ import annotations

from drills.load.buckets import BucketAccumulator, read_buckets
from drills.load.watermark import read_watermark, watermark_line
from drills.verdicts.serving import judge_load_coverage


def test_every_completion_before_the_watermark_is_in_a_closed_bucket():
    acc = BucketAccumulator(0.05)
    for end in (10.001, 10.049, 10.051, 10.099, 10.12):
        acc.add(end, 5.0)
    now = 10.18
    closed = acc.take_closed(now)
    upto = acc.closed_until(now)
    assert abs(upto - 10.1) < 1e-9
    assert sum(b.ok for b in closed) == 4  # the four completions before 10.1; 10.12 is still open
    assert all(b.end <= upto + 1e-9 for b in closed)


def test_the_watermark_of_several_workers_is_the_slowest_ones(tmp_path):
    a, b = tmp_path / "w0.jsonl", tmp_path / "w1.jsonl"
    a.write_text('{"t": 1.0, "w": 0.05, "ok": 1}\n' + watermark_line(1.05) + watermark_line(2.0))
    b.write_text(watermark_line(1.5))
    assert read_watermark([a, b]) == 1.5
    assert [x.ok for x in read_buckets([a, b])] == [1]  # watermark lines are not buckets
    assert read_watermark([a, tmp_path / "w2.jsonl"]) is None  # a worker that has not flushed holds it back


def test_a_wait_the_load_did_not_report_to_the_end_is_inconclusive_not_never_recovered():
    assert judge_load_coverage(0.0).passed
    late = judge_load_coverage(120.0)
    assert not late.passed and late.inconclusive and "fell behind" in late.reason
