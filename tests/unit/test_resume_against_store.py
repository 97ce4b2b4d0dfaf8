"""The resume judged against the store's latest complete checkpoint, the log's claim cross-checked
(drills/verdicts/training.py judge_resumed): each way the two keys can disagree, and a store that cannot be read."""

from __future__ import annotations

from datetime import datetime, timezone

from drills.measure.checkpoint import TrainingRecovery
from drills.measure.ckpt_store import Entry, StoreReading, read_store
from drills.verdicts.timeline import Timeline
from drills.verdicts.training import judge_resumed

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TRACKER = "latest_checkpointed_iteration.txt"


def _megatron(tracker: int, *iters: int) -> StoreReading:
    entries = [e for i in iters for e in (Entry(f"iter_{i:07d}", True), Entry(f"iter_{i:07d}/mp_rank_00", True))]
    entries += [Entry(TRACKER, False)]
    return read_store(entries, {TRACKER: str(tracker)}, source="store listing of /ckpt/job by pod ai/ckpt-reader-1")


def _rec(resumed, log_latest, store=None, read="pod", step_at_fault=7610, **kw) -> TrainingRecovery:
    return TrainingRecovery(timeline=Timeline(injected=T0), step_at_fault=step_at_fault, latest_checkpoint=log_latest,
                            resumed_step=resumed, first_step=None, new_nodes=(), ended=None, job_phase="Running",
                            retry_count=0, store=store, store_read=read, **kw)


def test_store_and_log_agree_and_the_job_resumed_from_it_passes_citing_the_store():
    v = judge_resumed(_rec(6000, 6000, _megatron(6000, 4500, 6000)))
    assert v.passed and "the store's latest complete checkpoint is 6000 (iter_0006000" in v.reason
    assert "ckpt-reader-1" in v.reason and "as the log says" in v.reason


def test_a_log_that_misses_a_newer_complete_save_cannot_make_a_stale_resume_pass():
    v = judge_resumed(_rec(6000, 6000, _megatron(7500, 4500, 6000, 7500)))  # the log saw only 6000
    assert not v.passed and not v.inconclusive and v.target == 7500.0
    assert "stale checkpoint" in v.reason and "newer than the latest save its log shows (6000)" in v.reason


def test_a_save_the_log_reports_but_the_store_does_not_hold_complete_fails_judged_against_the_store():
    v = judge_resumed(_rec(6000, 7500, _megatron(6000, 6000, 7500)))  # tracker never moved on to 7500
    assert not v.passed and not v.inconclusive
    assert "reports checkpoint 7500 saved but the store holds it incomplete (iter_0007500" in v.reason
    assert "the job resumed from 6000" in v.reason


def test_an_unreadable_store_makes_a_log_pass_inconclusive_naming_why():
    store = StoreReading(None, (), "pod spec of w-0", "the checkpoint directory /ckpt/x is on a node-local emptyDir volume")
    v = judge_resumed(_rec(6000, 6000, store))
    assert v.inconclusive and not v.passed and "node-local emptyDir" in v.reason


def test_an_unreadable_store_never_turns_a_failure_into_anything_else():
    store = StoreReading(None, (), "", "the store reader pod could not run: x")
    v = judge_resumed(_rec(None, 6000, store, restarted_from=1))
    assert not v.passed and not v.inconclusive and v.reason.startswith("restarted from step 0")
    assert "could not be read" in v.reason


def test_a_profile_that_says_the_store_is_not_readable_is_judged_on_the_log_and_says_so():
    v = judge_resumed(_rec(6000, 6000, None, read="none"))
    assert v.passed and "judged on the log alone" in v.reason


def test_a_checkpoint_past_the_step_at_the_fault_was_saved_after_the_resume_and_is_not_the_truth():
    v = judge_resumed(_rec(6000, 6000, _megatron(7500, 4500, 6000, 7500), step_at_fault=6210))
    assert v.passed and "latest complete checkpoint is 6000" in v.reason


def test_a_pointer_the_listing_shows_but_cat_cannot_read_is_unread_not_absent(monkeypatch):
    """The interrupted-run trial caught it: a `cat` of the tracker that failed (the exec cut short) left the tracker
    out of the reading, so every checkpoint read as incomplete and a healthy job FAILed "a save … was lost". A
    pointer the listing shows must be read (cat tried twice) or the reading is unreadable — inconclusive upstream."""
    from drills.measure import store_read

    listing = "\n".join(["d 1796000000.0 /ckpt/job", "d 1796000001.0 /ckpt/job/iter_0006000",
                         f"f 1796000002.0 /ckpt/job/{TRACKER}"]) + "\n"
    calls = []

    def exec_in_reader(cluster, namespace, pod, command):  # the Kubernetes exec boundary: cat fails, find works
        calls.append(command[0])
        return (0, listing, "") if command[0] == "find" else (1, "", "error: stream closed")

    class _Clock:
        @staticmethod
        def timestamp():
            return 1796000100.0

        @staticmethod
        def iso(ts):
            return "2026-12-01T00:00:00Z"

    class _Cluster:
        clock = _Clock()

    monkeypatch.setattr(store_read, "_exec", exec_in_reader)
    reading = store_read.read_through_pod(_Cluster(), "ai", "ckpt-reader-1", "/ckpt/job", "megatron", "pvc/ckpt")
    assert calls.count("cat") == 2  # tried again before giving up
    assert reading.problem and TRACKER in reading.problem and "could not be read" in reading.problem
    assert "stream closed" in reading.problem
    v = judge_resumed(_rec(6000, 6000, reading))
    assert v.inconclusive and not v.passed  # never "a save was lost" on a pointer nobody read


def test_a_pointer_this_machine_lists_but_cannot_read_is_unread_not_absent(tmp_path):
    from drills.measure import store_read

    (tmp_path / "iter_0006000").mkdir()
    (tmp_path / TRACKER).symlink_to(tmp_path / "gone")  # listed, but opening it fails, as a file removed would
    reading = store_read.read_local(str(tmp_path), "megatron", "2026-12-01T00:00:00Z")
    assert reading.problem and TRACKER in reading.problem and "could not be read" in reading.problem
    assert judge_resumed(_rec(6000, 6000, reading)).inconclusive


def test_a_save_completed_between_the_listing_and_the_pointer_is_listed_again(tmp_path, monkeypatch):
    """A live job completes a save after the local listing and before its pointer is read (a twin at 600× saves
    every few wall seconds): the pointer names a step the first listing lacks. Before, the drill said "the store
    holds no such checkpoint" (inconclusive on a healthy store); the store mounted here is listed again after the
    pointer is read, as the reader pod's listing already was."""
    import builtins

    from drills.measure import store_read

    (tmp_path / "iter_0001500").mkdir()
    (tmp_path / "iter_0001500" / "model.pt").write_text("x")
    (tmp_path / TRACKER).write_text("1500")
    real_open = builtins.open

    def open_while_the_job_saves(path, *args, **kwargs):
        if str(path).endswith(TRACKER) and not (tmp_path / "iter_0003000").exists():
            (tmp_path / "iter_0003000").mkdir()  # the job's next save, complete, then its pointer
            (tmp_path / "iter_0003000" / "model.pt").write_text("x")
            (tmp_path / TRACKER).write_text("3000")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(store_read, "open", open_while_the_job_saves, raising=False)
    reading = store_read.read_local(str(tmp_path), "megatron", "2026-12-01T00:00:00Z")
    assert reading.problem is None, reading.problem
    assert [c.step for c in reading.checkpoints if c.complete] == [1500, 3000]


def test_a_pointer_caught_between_its_truncation_and_its_write_is_read_again(tmp_path, monkeypatch):
    """Megatron writes its tracker with `open(path, "w")` then `write`: a reader can find it empty in between, and
    under a saturated store that gap lasts (seen once: a healthy twin's storage drill FAILed "saves acknowledged,
    never written"). Both readers read an empty pointer again before it counts; one that stays empty still counts."""
    from drills.measure import store_read

    (tmp_path / "iter_0003000").mkdir()
    (tmp_path / "iter_0003000" / "model.pt").write_text("x")
    (tmp_path / TRACKER).write_text("")  # truncated: the job is writing it
    monkeypatch.setattr(store_read.time, "sleep", lambda _s: (tmp_path / TRACKER).write_text("3000"))
    reading = store_read.read_local(str(tmp_path), "megatron", "2026-12-01T00:00:00Z")
    assert reading.problem is None and [c.step for c in reading.checkpoints if c.complete] == [3000]

    (tmp_path / TRACKER).write_text("")
    pauses = []
    monkeypatch.setattr(store_read.time, "sleep", pauses.append)  # nobody writes it: it stays empty
    reading = store_read.read_local(str(tmp_path), "megatron", "2026-12-01T00:00:00Z")
    assert len(pauses) == store_read.POINTER_REREADS
    assert not any(c.complete for c in reading.checkpoints)
    assert "is empty or unreadable" in reading.checkpoints[0].evidence
