"""The job's health after a fault (drills.measure.job_health, drills.verdicts.health): learning, the containers'
own states, and error-like lines no reader knows — each check fails (or is inconclusive) for its reason, the
profile's log_ignore covers a line explicitly and lists it, and the reader keeps what it cannot classify."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from drills.measure.job_health import job_health
from drills.measure.job_state import JobState
from drills.measure.logread import LogReader
from drills.profile.model import TrainingWorkload
from drills.verdicts.health import judge_containers, judge_learning, judge_log_health

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
XID = "Dec 05 09:22:03 gpu-train-03 kernel: NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal"


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _pod(name: str, uid: str, *, exit_code=None, reason=None, where="lastState", restarts=0) -> dict:
    cs = {"name": "trainer", "restartCount": restarts, "state": {"running": {"startedAt": "2026-01-01T12:00:00Z"}}}
    if exit_code is not None:
        cs[where] = {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": "2026-01-01T12:02:00Z"}}
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": "42"},
            "spec": {"nodeName": "gpu-train-02"}, "status": {"phase": "Running", "containerStatuses": [cs]}}


def _state(losses=(), pods=()) -> JobState:
    state = JobState()
    for pod in pods or [_pod("w-1", "u1")]:
        state.take_pod(pod, False, lambda: at(0))
    state.losses = [("u1", at(s), step, loss, grad) for s, step, loss, grad in losses]
    return state


def _health(state, unknown=None, ignore=()):
    return job_health(state, unknown or {}, {"u1"}, at(60), at(100), at(400), ignore)


def test_a_nan_loss_after_the_resume_fails_as_diverged_naming_the_step():
    h = _health(_state([(10, 6000, 1.9, 1.1), (110, 6001, math.nan, math.nan), (120, 6002, math.nan, math.nan)]))
    v = judge_learning(h)
    assert not v.passed and not v.inconclusive and v.name == "learning"
    assert v.reason.startswith("resumed but diverged (loss nan from step 6001, grad norm nan)")


def test_a_nan_grad_norm_with_the_loss_left_out_is_megatrons_divergence():
    v = judge_learning(_health(_state([(10, 6000, 1.9, 1.1), (110, 6001, None, math.nan)])))
    assert not v.passed and "grad norm nan from step 6001" in v.reason and "Megatron" in v.reason


def test_finite_losses_pass_and_a_loss_that_stops_being_logged_is_not_observed():
    ok = judge_learning(_health(_state([(10, 6000, 1.9, 1.1), (110, 6001, 1.89, 1.0)])))
    assert ok.passed and "1 reading(s)" in ok.reason
    gone = judge_learning(_health(_state([(10, 6000, 1.9, 1.1)])))
    assert gone.inconclusive and gone.name == "loss reading" and "1 loss reading(s) before the fault" in gone.reason
    never = judge_learning(_health(_state()))
    assert never.inconclusive and "no training loss the readers know" in never.reason


@pytest.mark.parametrize("pod, failed", [
    (_pod("w-1", "u1", exit_code=137, reason="OOMKilled", restarts=1), True),  # restarted in place
    (_pod("w-1", "u1", exit_code=1, reason="Error", where="state"), True),
    (_pod("w-1", "u1", exit_code=0, reason="Completed", where="state"), False),  # a completion is no failure
    (_pod("w-1", "u1", exit_code=0, reason="Completed", restarts=1), True),  # … but restarted in place, it is
    (_pod("w-1", "u1"), False),
])
def test_a_container_that_failed_after_the_resume_fails_whatever_the_log_says(pod, failed):
    v = judge_containers(_health(_state([(110, 6001, 1.8, 1.0)], pods=[pod])))
    assert v.passed is not failed
    if failed:
        assert "by its container's state" in v.reason and "pods/w-1 status.containerStatuses[trainer]" in v.reason


def test_an_exit_before_the_window_is_not_this_windows():
    state = _state(pods=[_pod("w-1", "u1", exit_code=137, reason="OOMKilled", restarts=1)])
    assert judge_containers(job_health(state, {}, {"u1"}, at(60), at(200), at(400))).passed  # 12:02 < since


def test_an_unknown_error_line_is_inconclusive_unless_log_ignore_covers_it_and_then_it_is_listed():
    unknown = {"u1": [(at(150), XID, XID), (at(10), "before the fault: ERROR x", "")]}
    v = judge_log_health(_health(_state(), unknown))
    assert v.inconclusive and "NVRM: Xid (PCI:0000:b9:00): 74" in v.reason and "and 1 more" not in v.reason
    h = _health(_state(), unknown, ignore=[r"NVRM: Xid \(PCI:[0-9a-f:]+\): 74,"])
    covered = judge_log_health(h)
    assert covered.passed and "covered by the profile's log_ignore" in covered.reason and "Xid" in covered.reason
    assert h.details()["ignored_lines"] and h.details()["log_ignore"] == [r"NVRM: Xid \(PCI:[0-9a-f:]+\): 74,"]


def test_the_reader_keeps_what_it_cannot_classify_and_nothing_it_can():
    reader = LogReader("auto")
    for line in ["2026-01-01T12:00:01.000000000Z " + XID,
                 "2026-01-01T12:00:02.000000000Z gpu-train-02:41:98 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : "
                 "mlx5_0:1 Got async event : port active",  # informational: known
                 "2026-01-01T12:00:03.000000000Z Traceback (most recent call last):",  # the traceback reader's
                 '2026-01-01T12:00:03.000000000Z   File "/workspace/train.py", line 301, in train_step',
                 "2026-01-01T12:00:03.000000000Z RuntimeError: CUDA error: an illegal memory access was encountered",
                 "2026-01-01T12:00:04.000000000Z some-launcher ERROR: heartbeat lost for worker 3",
                 # a root cause NCCL repeats (a second uplink drop) is reported once and known both times
                 "2026-01-01T12:00:05.000000000Z gpu-train-02:41:98 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : "
                 "mlx5_0:1 Got async event : port error",
                 "2026-01-01T12:00:06.000000000Z gpu-train-02:41:98 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : "
                 "mlx5_0:1 Got async event : port error"]:
        reader.feed(line)
    reader.close()
    # the driver's Xid is the GPU reader's (a known error, judged as one: `log errors`), not an unknown line
    assert [u[1] for u in reader.unknown] == ["some-launcher ERROR: heartbeat lost for worker 3"]
    assert any(e.kind == "gpu_error" and "Xid (PCI:0000:b9:00): 74" in e.text for e in reader.errors)


@pytest.mark.parametrize("patterns, words", [([""], "empty"), (["(unclosed"], "does not compile"),
                                              ([".*"], "matches an empty line")])
def test_log_ignore_is_validated(patterns, words):
    with pytest.raises(ValidationError, match=words):
        TrainingWorkload(log_ignore=patterns)
    assert TrainingWorkload(log_ignore=[r"NVRM: Xid .*: 63,"]).log_ignore


def _learning(before: list[float], after: list[float], ratio: float = 1.5):
    """Losses at steps 6000… before the fault (at 10 s…) and 6001… after the resume (at 110 s…), worker u1."""
    losses = [(10 + i, 5990 + i, v, 1.0) for i, v in enumerate(before)]
    losses += [(110 + i, 6001 + i, v, 1.0) for i, v in enumerate(after)]
    return judge_learning(_health(_state(losses)), ratio)


def test_a_resume_whose_loss_is_a_fresh_models_fails_the_weights_were_not_restored():
    v = _learning([1.91, 1.92, 1.90, 1.93, 1.92], [10.31, 10.29, 10.30, 10.27, 10.26, 10.25])
    assert not v.passed and not v.inconclusive and v.name == "learning"
    assert "its loss jumped from 1.92 before the fault to 10.29" in v.reason and "weights were not restored" in v.reason
    # a noisy loss that returns to its level passes; the threshold is the profile's
    assert _learning([1.91, 1.92, 1.90, 1.93, 1.92], [2.05, 1.97, 1.95, 1.94, 1.93, 1.92]).passed
    assert not _learning([1.91, 1.92, 1.90, 1.93, 1.92], [2.05, 1.97, 1.95, 1.94, 1.93], ratio=1.01).passed


def test_a_loss_that_looks_right_after_the_resume_then_climbs_diverges():
    """Issue 30, class 5 (wave 8, climbs-after-resume): the first readings after the resume match the loss before
    the fault; the end of the window is tens of times higher, finite all the way. Before, only the window's start
    was compared: PASS. A loss that wanders back down within the threshold still passes."""
    climbing = [1.86, 1.85, 1.86, 1.84, 1.85, 2.4, 6.1, 19.0, 41.0, 70.2]
    v = _learning([1.85, 1.86, 1.84, 1.85, 1.86], climbing)
    assert not v.passed and not v.inconclusive and v.name == "learning"
    assert "its loss climbed to 19 by the end of the window (median of its last 5 readings" in v.reason
    assert "from 1.85 before the fault and 1.85 when it trained again" in v.reason and "it diverges" in v.reason
    ok = _learning([1.85, 1.86, 1.84, 1.85, 1.86], [1.86, 1.85, 1.86, 1.84, 1.85, 1.9, 2.1, 1.9, 1.8, 1.8])
    assert ok.passed and "of the last 5 of the window 1.9" in ok.reason


def test_a_loss_repeated_to_every_digit_is_a_model_no_step_updates():
    v = _learning([1.71, 1.70, 1.69, 1.70, 1.71], [1.92] * 8)
    assert not v.passed and "its loss stayed at 1.92 for 8 readings in a row (steps 6001–6008" in v.reason
    assert "before the fault it varied: 1.69–1.71" in v.reason
    assert _learning([1.71, 1.70, 1.69, 1.70, 1.71], [1.92] * 7 + [1.91]).passed  # seven repeats: a real loss may


def test_too_few_readings_to_compare_are_judged_on_finiteness_alone():
    assert _learning([1.9], [10.3, 10.2]).passed
    assert "not compared with the loss before the fault (1 finite reading(s) before" in _learning([1.9], [10.3]).reason
