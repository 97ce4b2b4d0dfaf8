"""A job whose optimizer skips its steps learns nothing (issue 30 class 5): the readers turn each framework's skipped-step
lines into facts with their time (Megatron's interval count on its iteration line, DeepSpeed's OVERFLOW line per step),
job_health counts them between a worker's step lines in the window, and the learning judge fails a window where (nearly)
every step was skipped — while a fp16 warm-up's few skipped steps pass."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from drills.measure.job_health import job_health
from drills.measure.job_state import JobState
from drills.measure.logread import LogReader
from drills.profile.model import SloConfig
from drills.twin.workloads.trainlogs import for_format
from drills.verdicts.health import judge_learning

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
# source: tests/data/real/logs/megatron-bert-loss-scale-skipped-iterations-10-no-loss-printed.log (NVIDIA/nccl#743)
MEGATRON = (" iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration (ms): 356.2 | "
            "learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | number of skipped "
            "iterations:  10 | number of nan iterations:   0 |")
# source: tests/data/real/logs/hf-deepspeed-overflow-loss-scale-stuck-at-1-every-step.log (huggingface/transformers#14531)
DEEPSPEED = ("[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
             "Attempted loss scale: 1, reducing to 1")


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def stamp(s: float, line: str) -> str:
    return f"{at(s).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}"


def test_megatrons_count_rides_on_its_iteration_line_and_deepspeeds_overflow_is_a_fact_of_its_own():
    r = LogReader()
    (step,) = [e for e in r.feed(stamp(1, MEGATRON)) if e.kind == "step"]
    assert (step.step, step.skipped, step.loss, step.grad_norm) == (10, 10, None, None)
    (ev,) = LogReader().feed(stamp(2, DEEPSPEED))
    assert (ev.kind, ev.skipped, ev.at) == ("skipped", 1, at(2))
    assert not LogReader().unknown  # a fact, never an unknown error-like line


def _state(lines: list[tuple[float, int]], skips: list[tuple[float, int]]) -> JobState:
    state = JobState()
    state.take_pod({"metadata": {"name": "w-1", "uid": "u1", "resourceVersion": "1"}, "spec": {"nodeName": "n"},
                    "status": {"phase": "Running", "containerStatuses": []}}, False, lambda: at(0))
    state.steps = [("u1", at(s), k, 256.0) for s, k in lines]
    state.skipped = [("u1", at(s), n) for s, n in skips]
    state.losses = [("u1", at(s), k, 1.9 - k / 1e5, 1.0) for s, k in lines]
    return state


def _judge(state: JobState, **kw):
    return judge_learning(job_health(state, {}, {"u1"}, at(50), at(100), at(500), ()), **kw)


EVERY = [(100 + i * 10, 6000 + i * 40) for i in range(31)]  # 1200 steps in the window, a line every 40


def test_a_window_where_every_step_was_skipped_fails_naming_the_count_not_the_first_lines():
    # Megatron: each line counts the 40 of the interval it ends; the first line's interval began before the window
    v = _judge(_state(EVERY, [(s, 40) for s, _ in EVERY]))
    assert not v.passed and not v.inconclusive and v.name == "learning" and v.measured == 1200
    assert "optimizer skipped 1200 of the 1200 steps from step 6000 to 7200 (100%" in v.reason
    assert "learns nothing" in v.reason


def test_megatrons_lines_without_a_loss_fail_on_the_skips_rather_than_going_unobserved():
    state = _state(EVERY, [(s, 40) for s, _ in EVERY])
    state.losses = []  # Megatron prints no loss when no iteration of the interval advanced
    v = _judge(state)
    assert not v.passed and not v.inconclusive and "skipped 1200 of the 1200" in v.reason


def test_deepspeeds_one_line_per_step_counts_the_same_way():
    skips = [(s, 1) for s, _ in EVERY for _ in range(40)]  # printed with the step line they precede
    v = _judge(_state(EVERY, skips))
    assert not v.passed and "skipped 1200 of the 1200" in v.reason


@pytest.mark.parametrize("skips, why", [
    ([(110 + i * 10, 2) for i in range(16)], "a fresh scaler's warm-up: 32 skipped, at most hysteresis 2 × 16 halvings"),
    ([(s, 3) for s, _ in EVERY[1:]], "90 of 1200 (one overflow per growth window and then some): under half"),
    ([(s, 0) for s, _ in EVERY], "Megatron's healthy count: 0"),
])
def test_a_few_skipped_steps_are_fp16_warm_up_and_pass_saying_so(skips, why):
    v = _judge(_state(EVERY, skips))
    assert v.passed, (why, v.reason)
    assert "steps skipped by the optimizer" in v.reason


def test_the_thresholds_are_the_profiles_and_each_can_fail_alone():
    skips = [(s, 3) for s, _ in EVERY[1:]]  # 90 of 1200
    assert not _judge(_state(EVERY, skips), skip_fraction=0.05).passed  # a strict site: 7.5 % ≥ 5 %
    assert _judge(_state(EVERY, skips), skip_fraction=0.05, skips_allowed=100).passed  # within the allowance
    slo = SloConfig()
    assert (slo.skipped_step_fraction, slo.skipped_steps_allowed) == (0.5, 32)
    with pytest.raises(ValueError):
        SloConfig(skipped_step_fraction=0)


def test_the_twins_floor_lines_read_back_as_every_step_skipped():
    """The twin's loss-scale-floor lines (trainlogs) read by the same reader as a real log."""
    for fmt, per_line in (("megatron", 1), ("deepspeed", 40)):
        r = LogReader()
        events = [e for s, k in EVERY for line in for_format(fmt).step(k, s, 1.9, 256.0, 0.25, 100000, skipped=40)
                  for e in r.feed(stamp(s, line))]
        assert sum(e.skipped or 0 for e in events) == 40 * len(EVERY), fmt
        assert len([e for e in events if e.skipped]) == per_line * len(EVERY), fmt
        assert not r.unknown and not any(e.loss is not None and fmt == "megatron" for e in events)
        lines = for_format(fmt).step(7000, 100.0, 1.9, 256.0, 0.25, 100000, skipped=40)
        assert len(set(lines)) == len(lines), fmt  # the monitor takes a line seen twice once: each its own time


# blind batch 4 (tests/data/real/logs, each line verbatim from the file named): the skipped-step wordings read unread
@pytest.mark.parametrize("line, skipped", [
    # deepspeed-2021-fused-optimizer-overflow-detected-skipping-step-loss-scale-1.log (DeepSpeed 0.3, at the floor)
    ("[2021-01-26 22:05:35,108] [INFO] [logging.py:60:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted "
     "loss scale: 1, reducing to 1", 1),
    # tacotron2-fp16-optimizer-overflow-no-rank-then-train-loss-grad-norm.log (apex's older FP16_Optimizer)
    ("OVERFLOW! Skipping step. Attempted loss scale: 4294967296", 1),
    # fairseq-note-gradient-overflow-setting-loss-scale-4.log
    ("NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 4.0", 1),
    # counterparts: each rank's 'Grad overflow on iteration 8' repeats rank 0's one skip; a scale reduced is not a skip
    ("Grad overflow on iteration 8", None),
    ("[2021-01-26 22:05:35,108] [INFO] [fused_optimizer.py:316:_update_scale] Reducing dynamic loss scale from 1 to 1", None),
])
def test_every_frameworks_skipped_step_wording_is_one_skipped_step(line, skipped):
    from drills.measure.logloss import read_skipped
    assert read_skipped(line) == skipped
