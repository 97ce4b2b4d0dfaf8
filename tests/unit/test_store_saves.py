"""The storage drill's completion evidence for the saves its job logged under saturation (red team wave 5):
a save the log reports but the store holds incomplete fails; rotated or unreadable is not observed, never a pass."""

from __future__ import annotations

from drills.measure.ckpt_store import Entry, read_store
from drills.verdicts.store_saves import judge_saves_on_store


def _megatron(tracker: str, *iters: int):
    entries = [Entry(".", True)] + [Entry(f"iter_{i:07d}", True) for i in iters]
    entries += [Entry(f"iter_{i:07d}/mp_rank_00", True) for i in iters]
    entries.append(Entry("latest_checkpointed_iteration.txt", False))
    return read_store(entries, {"latest_checkpointed_iteration.txt": tracker}, "auto", "listing @ t")


def test_a_save_logged_under_saturation_the_store_holds_incomplete_fails():
    v = judge_saves_on_store([7500], _megatron("6000", 6000, 7500), "/store/job")
    assert v.verdict == "fail" and "step 7500" in v.reason and "saves acknowledged, never written" in v.reason


def test_saves_complete_on_the_store_pass():
    v = judge_saves_on_store([7500], _megatron("7500", 6000, 7500), "/store/job")
    assert v.verdict == "pass" and "complete on the store" in v.reason


def test_absent_with_nothing_later_fails_and_rotated_away_is_not_observed():
    assert judge_saves_on_store([7500], _megatron("6000", 6000), "/s").verdict == "fail"
    rotated = judge_saves_on_store([7500], _megatron("9000", 9000), "/s")
    assert rotated.verdict == "inconclusive" and rotated.unobserved and "rotated away" in rotated.reason


def test_unreadable_or_nothing_to_look_for_is_not_observed():
    for v in (judge_saves_on_store([7500], None, "/s"), judge_saves_on_store([], _megatron("1", 1), "/s")):
        assert v.verdict == "inconclusive" and v.unobserved
