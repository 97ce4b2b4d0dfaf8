"""The storage drill's judges on small literal inputs: the job's real checkpoint interval, saves only inside
the saturation window, the saturation's effect, inconclusive is never a pass; and the twin store's model."""

from types import SimpleNamespace

import pytest

from drills.measure.checkpoint_io import ProbeResult
from drills.measure.storage_io import (
    ProbeSeries, TrainingSaves, job_checkpoint_interval, judge_intact, judge_probe_save, judge_saturation_effect,
    judge_training_saves,
)
from drills.twin.workloads.storefs import StoreModel, _Client
from drills.verdicts.timeline import Verdict


def probe(write_s: float, intact: bool = True, mb: int = 8) -> ProbeSeries:
    total = mb * 1_000_000
    r = ProbeResult("/s", total, 4, True, write_s, write_s, total / write_s, total / write_s, intact,
                    () if intact else ("shard-00000-of-00004.bin",), True)
    return ProbeSeries((r,))


def saves(**kw) -> TrainingSaves:
    return TrainingSaves(**{"baseline": ((6000, 40.0),), "saturated": (), "waited_s": 900.0,
                            "window_start": "2026-01-01T00:00:00+00:00", "interval_steps": 2000, **kw})


def test_interval_comes_from_the_gaps_between_logged_saves():
    assert job_checkpoint_interval([6000, 8000, 10000], 10500, 500)[0] == 2000  # the logs beat the profile


def test_one_save_and_far_past_the_declared_interval_means_unknown():
    interval, source = job_checkpoint_interval([20000], 24150, 2000)
    assert interval is None and "only save was at step 20000" in source


def test_one_save_is_no_interval_the_declared_one_is_a_promise_not_a_reading():
    """Issue 30 (no assumed values): one save gives no interval; the profile's 2000 is never used as the reading."""
    interval, source = job_checkpoint_interval([6000], 6150, 2000)
    assert interval is None and source.startswith("not observed") and "one save (step 6000)" in source


def test_no_save_inside_the_window_is_never_a_pass():
    crawl = judge_training_saves(saves(), 2.0)
    assert crawl.verdict == "fail" and "saves crawl" in crawl.reason
    late = judge_training_saves(saves(expected=False, window_end="2026-01-01T00:05:00+00:00"), 2.0)
    assert late.verdict == "inconclusive" and "inside the saturation window" in late.reason
    sparse = judge_training_saves(saves(interval_steps=None, interval_source="the job's logs"), 2.0)
    assert sparse.verdict == "inconclusive" and "store is not judged" in sparse.reason


def test_a_save_cut_by_fios_stop_after_the_budget_fails():
    v = judge_training_saves(saves(overran=((8000, 95.0),), expected=False), 2.0)
    assert v.verdict == "fail" and "still running" in v.reason


def test_a_save_inside_the_window_is_judged_against_the_budget():
    assert judge_training_saves(saves(saturated=((8000, 60.0),)), 2.0).passed
    assert not judge_training_saves(saves(saturated=((8000, 90.0),)), 2.0).passed


def test_a_corrupted_baseline_fails():
    v = judge_intact(probe(0.2, intact=False), baseline=True)
    assert v.name == "baseline checkpoint intact" and v.verdict == "fail" and "(baseline)" in v.reason


def test_a_probe_fio_did_not_outlast_is_inconclusive():
    v = judge_probe_save(probe(0.2), probe(0.2), 2.0, None, fio_stopped="2026-01-01T00:00:09Z")
    assert v.verdict == "inconclusive" and "did not run under saturation" in v.reason


def test_fio_that_moved_almost_nothing_had_no_effect():
    fio = lambda mb_s: SimpleNamespace(total_bw_bytes_s=mb_s * 1_000_000)  # noqa: E731
    assert judge_saturation_effect(fio(0.25), probe(0.2)).verdict == "inconclusive"  # probe alone: 40 MB/s
    assert judge_saturation_effect(None, probe(0.2)).verdict == "inconclusive"
    assert judge_saturation_effect(fio(60), probe(0.2)).passed


def test_fio_pods_without_a_report_are_named_with_why():
    missing = ("drills-fio-saturation-x: fio report is not JSON: mkdir: can't create directory '/store/d': "
               "Permission denied",)
    v = judge_saturation_effect(None, probe(0.2), missing)
    assert v.verdict == "inconclusive"
    assert v.reason == ("inconclusive: the fault had no effect that can be shown: fio left no report "
                        f"({missing[0]})")


def test_an_inconclusive_verdict_cannot_pass():
    with pytest.raises(ValueError):
        Verdict("x", True, None, None, "", "r", inconclusive=True)
    assert Verdict("x", False, None, None, "", "r", inconclusive=True).to_record()["verdict"] == "inconclusive"


def test_store_model_shares_fairly_and_caps_each_client():
    healthy = StoreModel(100, 40)
    assert healthy.rate(0.0) == 40e6  # alone: its own link is the limit
    healthy.clients = {1: _Client(last_io=0.0), 2: _Client(last_io=0.0)}  # fio's two jobs
    assert healthy.rate(0.1, extra=1) == pytest.approx(100e6 / 3)
    assert healthy.slowdown(0.1) == pytest.approx(1.2)  # headroom: a save barely slows
    slow = StoreModel(12, 40)
    slow.clients = dict(healthy.clients)
    assert slow.slowdown(0.1) == pytest.approx(3.0)  # no headroom: 3× slower
    assert slow.slowdown(10.0) == 1.0  # fio gone: back to normal


def test_a_window_shorter_than_one_checkpoint_interval_is_warned():
    from drills.measure.storage_io import short_window

    warning = short_window(14.0, 1500, 4.0)  # 1500 steps at 4 steps/s: a save every 375 s
    assert warning.startswith("the saturation window (14 s) was shorter than the job's checkpoint interval "
                              "(1500 steps, 375 s)")
    assert short_window(400.0, 1500, 4.0) is None and short_window(14.0, None, 4.0) is None


def test_an_unexpected_empty_window_says_why_and_carries_the_warning():
    verdict = judge_training_saves(saves(expected=False, window_end="2026-01-01T00:00:14+00:00",
                                         warning="the saturation window (14 s) was shorter …"), 2.0)
    assert verdict.inconclusive and not verdict.passed
    assert verdict.reason.endswith("saves outside it are not judged — the saturation window (14 s) was shorter …")


def test_a_job_that_had_not_reached_its_next_save_does_not_blame_the_store():
    verdict = judge_training_saves(saves(expected=False, next_step=60000, last_step=57250), 2.0)
    assert verdict.inconclusive and not verdict.passed
    assert "had not reached its next save (step 60000; last step seen 57250)" in verdict.reason
    crawl = judge_training_saves(saves(expected=True, next_step=60000, last_step=60400), 2.0)
    assert not crawl.passed and not crawl.inconclusive and "saves crawl" in crawl.reason


def test_the_save_baseline_is_the_jobs_usual_save_not_its_slowest():
    """Red team, wave 8: another tenant's flood (or an earlier drill on the same store) made one of the job's saves
    before the fault slow (134 s among 40–53 s ones). As the slowest save it was the baseline, and a save crawling
    to 107 s under this drill's fio passed as 0.8×. The median of the last 5 saves is the usual save: 2.2×, FAIL."""
    found = saves(baseline=((1500, 41.0), (3000, 134.0), (4500, 48.0), (6000, 53.0), (7500, 45.0), (9000, 47.0)),
                   saturated=((10500, 107.0),))
    assert found.baseline_s == 48.0  # the last five: 134, 48, 53, 45, 47 → 48
    verdict = judge_training_saves(found, 2.0)
    assert not verdict.passed and verdict.baseline == 48.0
