"""A checkpoint store read after the fault is judged on what it held **at** the fault (drills/measure/ckpt_asof.py):
the listing's modification times (GNU find -printf) split what was complete then from what the resumed job wrote
later; without times, a reading taken after a replacement worker was scheduled proves nothing about the fault.
The twin's store writes carry cluster time and its find prints them (store_layout, container_files)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from drills.measure.checkpoint import TrainingRecovery
from drills.measure.ckpt_asof import CLOCK_SKEW_S, at_fault
from drills.measure.ckpt_store import FIND_PRINTF, Entry, parse_find_printf, read_store
from drills.twin.workloads import container_files, store_layout
from drills.verdicts.timeline import Timeline
from drills.verdicts.training import judge_resumed

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
F = T0.timestamp()  # the fault
TRACKER = "latest_checkpointed_iteration.txt"


def _hf(*ckpts: tuple[int, float], root_at: float = F - 100) -> object:
    """An HF Trainer directory: (step, when its trainer_state.json was written)."""
    entries = [Entry(".", True, root_at)]
    for step, at in ckpts:
        entries += [Entry(f"checkpoint-{step}", True, at), Entry(f"checkpoint-{step}/trainer_state.json", False, at)]
    return read_store(entries, {}, source="store listing by pod ai/ckpt-reader-1")


def _iter(step: int, at: float) -> list[Entry]:
    """A Megatron checkpoint directory as the listing shows it (its rank directory inside), written at `at`."""
    return [Entry(f"iter_{step:07d}", True, at), Entry(f"iter_{step:07d}/mp_rank_00", True, at)]


def _rec(store, resumed=6000, log_latest=6000, step_at_fault=7610, rescheduled=None) -> TrainingRecovery:
    return TrainingRecovery(timeline=Timeline(injected=T0, rescheduled=rescheduled), step_at_fault=step_at_fault,
                            latest_checkpoint=log_latest, resumed_step=resumed, first_step=None, new_nodes=(),
                            ended=None, job_phase="Running", retry_count=0, store=store, store_read="pod")


def test_a_save_completed_again_after_the_fault_is_not_the_truth_and_a_healthy_resume_passes():
    # the save of 7500 was cut off by the fault; the resumed job saved 7500 again before the slow reader listed it
    store = _hf((6000, F - 400), (7500, F + 900), root_at=F + 900)
    v = judge_resumed(_rec(store))
    assert v.passed, v.reason
    assert "written after the fault, not counted: checkpoint-7500" in v.reason, v.reason
    # without the times the same listing made a healthy resume a FAIL (stale against 7500)
    untimed = read_store([Entry(e, d) for e, d in (("checkpoint-6000", True), ("checkpoint-6000/trainer_state.json",
                         False), ("checkpoint-7500", True), ("checkpoint-7500/trainer_state.json", False))], {})
    assert not judge_resumed(_rec(untimed)).passed


def test_a_lost_save_saved_again_after_the_fault_fails_for_the_lost_save():
    store = _hf((4500, F - 800), (6000, F + 600), root_at=F + 600)  # 6000's completion lost, re-saved after
    v = judge_resumed(_rec(store, resumed=4500, log_latest=6000, step_at_fault=6210))
    assert not v.passed and not v.inconclusive
    assert "reports checkpoint 6000 saved but the store held it complete only after the fault" in v.reason, v.reason


def test_an_evidence_within_the_clock_skew_of_the_fault_counts_as_before_it():
    store = _hf((6000, F + CLOCK_SKEW_S - 0.5))
    assert at_fault(store, F, 7610).latest.step == 6000
    assert at_fault(_hf((6000, F + CLOCK_SKEW_S + 0.5)), F, 7610).latest is None


def test_a_save_the_old_workers_finished_after_the_fault_before_any_replacement_was_scheduled_counts():
    # a drain: the old workers ran on through their grace period and completed 7500 after the injection (seen at 4
    # workers under load: a healthy twin failed "held it complete only after the fault")
    store = _hf((6000, F - 400), (7500, F + 40), root_at=F + 40)
    v = judge_resumed(_rec(store, resumed=7500, log_latest=7500, rescheduled=T0 + timedelta(seconds=118)))
    assert v.passed, v.reason
    # written after the first replacement was scheduled: the resumed job's, not counted
    late = _hf((6000, F - 400), (7500, F + 130), root_at=F + 130)
    v = judge_resumed(_rec(late, resumed=6000, log_latest=7500, rescheduled=T0 + timedelta(seconds=118)))
    assert not v.passed and "held it complete only after the fault" in v.reason, v.reason


def test_a_checkpoint_rotated_away_after_the_fault_is_not_a_lost_save():
    # save_total_limit: the resumed job's save of 9000 (past the fault) removed checkpoint-6000 from the directory
    store = _hf((4500, F - 800), (9000, F + 700), root_at=F + 700)
    v = judge_resumed(_rec(store))
    assert v.inconclusive and not v.passed, v.reason
    assert "may have been rotated away" in v.reason
    # the same absence with nothing added or removed since the fault is a lost save
    settled = _hf((4500, F - 800), root_at=F - 800)
    assert not judge_resumed(_rec(settled)).passed and not judge_resumed(_rec(settled)).inconclusive


def test_a_pointer_moved_on_after_the_fault_counts_what_is_older_than_the_fault_and_errs_only_to_fail():
    # the resumed job's next save (9000, past the fault at 7610) moved Megatron's tracker on after the fault
    entries = [Entry(".", True, F + 400), *_iter(4500, F - 900), *_iter(6000, F - 500), *_iter(9000, F + 300),
               Entry(TRACKER, False, F + 400)]
    store = read_store(entries, {TRACKER: "9000"})
    v = judge_resumed(_rec(store, resumed=6000, log_latest=6000))
    assert v.passed and "rewritten after the fault; everything of it older than the fault" in v.reason, v.reason
    # the save of 7500 was cut off by the fault and written again after it: not counted
    again = read_store(entries + _iter(7500, F + 200), {TRACKER: "9000"})
    assert judge_resumed(_rec(again, resumed=6000, log_latest=6000)).passed
    # a tracker write the store lost at the fault is hidden by the move: counted, the resume then fails — never passes
    lost = read_store(entries + _iter(7500, F - 100), {TRACKER: "9000"})
    v = judge_resumed(_rec(lost, resumed=6000, log_latest=7500))
    assert not v.passed and not v.inconclusive and "stale" in v.reason, v.reason


def test_a_listing_without_times_read_after_a_worker_was_rescheduled_is_inconclusive_not_a_pass():
    untimed = read_store([Entry("checkpoint-6000", True), Entry("checkpoint-6000/trainer_state.json", False)], {})
    late = replace_read(untimed, F + 600)
    v = judge_resumed(_rec(late, rescheduled=T0 + timedelta(seconds=30)))
    assert v.inconclusive and "no modification times" in v.reason, v.reason
    assert v.unobserved  # reported not_observed: the fault had its effect, the store's state then was not seen
    early = replace_read(untimed, F + 10)
    assert judge_resumed(_rec(early, rescheduled=T0 + timedelta(seconds=30))).passed


def replace_read(store, done: float):
    from dataclasses import replace

    return replace(store, read_at=done - 1, read_done=done)


def test_parse_find_printf_keeps_the_root_and_the_times():
    # GNU find -printf '%y %T@ %p\n' prints the fraction with ten digits (findutils: %T@ "seconds since epoch")
    text = ("d 1767268800.1234567890 /ckpt/job\nd 1767268700.0000000000 /ckpt/job/checkpoint-6000\n"
            "f 1767268701.5000000000 /ckpt/job/checkpoint-6000/trainer_state.json\n")
    got = parse_find_printf("/ckpt/job", text)
    assert got[0] == Entry(".", True, 1767268800.123456789)
    assert Entry("checkpoint-6000/trainer_state.json", False, 1767268701.5) in got


def test_the_twin_store_writes_cluster_time_and_its_find_prints_it_gnu_only(tmp_path: Path):
    root = tmp_path / "job"
    store_layout.complete(root, "hf-trainer", 6000, {}, at=F - 300)
    before = store_layout.mtimes(root)
    store_layout.complete(root, "hf-trainer", 7500, {}, at=F - 10)
    store_layout.forget_completion(root, "hf-trainer", 7500, 6000, before, F - 10)  # the lost write never landed
    where = {"/ckpt": tmp_path}
    out = container_files.find(where, ["/ckpt/job", "-maxdepth", "2", "-printf", FIND_PRINTF.replace("\\n", "\n")],
                               gnu=True)
    got = {e.path: e.mtime for e in parse_find_printf("/ckpt/job", out.stdout.decode())}
    assert abs(got["checkpoint-6000/trainer_state.json"] - (F - 300)) < 1e-3
    assert abs(got["."] - (F - 300)) < 1e-3, got  # the rename of 7500 was lost with it: the directory as before
    busybox = container_files.find(where, ["/ckpt/job", "-printf", "%p"], gnu=False)
    assert busybox.code == 1 and b"unrecognized: -printf" in busybox.stderr
