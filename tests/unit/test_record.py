"""The typed record: its JSON round trip, and categories that follow types and fields, never sentences."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from drills.core.catalog import catalog
from drills.core.errors import (
    CheckFailed, DrillError, InjectionFailed, InvalidProfile, RevertFailed, TargetUnreachable, UnsafeTarget,
)
from drills.core.record import NOT_STARTED, PHASES, Category, Check, Outcome, Record, category_of_error
from drills.verdicts.timeline import Timeline, judge_effect, judge_max, judge_recovery, judge_resume
from fixtures.recorder import DrillScenario

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


LINE = {"run_id": "r-1", "drill": "gpu-node-loss", "scenario": "Drain a node", "verdict": "fail",
        "recovery_s": 1023.0, "target_s": 900.0,
        "phases": {"injected": "2026-03-01T02:00:00.000Z", "recovered": "2026-03-01T02:17:03.250Z"},
        "reason": "recovered in 17m3s (1023 s), 2m3s over the 15m target", "category": "slo_breach",
        "details": {"lost_node": "gpu-1", "checks": [{"name": "recovery", "verdict": "fail", "measured": 1023.0,
                                                      "target": 900.0, "unit": "s", "reason": "over"}],
                    "faults": [{"kind": "node", "target": "gpu-1"}],
                    "reverts": [{"kind": "node", "target": "gpu-1", "ok": True, "error": None}]},
        "started": "2026-03-01T01:59:00.000Z", "finished": "2026-03-01T02:20:00.000Z", "severity": "critical",
        "target": "twin", "defects": ["slow-image-pull"], "wall_started": "2026-03-01T01:58:59.123Z"}


def test_json_round_trip_keeps_the_line_as_written():
    record = Record.from_json(LINE)
    assert record.to_json() == LINE
    assert json.loads(json.dumps(record.to_json())) == LINE
    assert record.verdict is Outcome.FAIL and record.category is Category.SLO_BREACH
    assert record.checks == (Check("recovery", Outcome.FAIL, 1023.0, 900.0, "s", "over"),)
    assert record.offsets == {"injected": 0.0, "recovered": 1023.25}
    assert record.details == {"lost_node": "gpu-1"}  # checks, faults and reverts are typed fields


def test_a_record_is_frozen_all_the_way_down():
    record = Record.from_json(LINE)
    with pytest.raises(AttributeError):
        record.verdict = Outcome.PASS  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.details["lost_node"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        record.phases["ready"] = T0  # type: ignore[index]


def test_phases_follow_the_one_phases_order_whatever_the_input_order():
    record = Record(drill="d", verdict=Outcome.PASS, phases={"recovered": at(9), "injected": at(0), "ready": at(5)})
    assert list(record.phases) == [p for p in PHASES if p in ("injected", "ready", "recovered")]


def test_times_are_written_by_clock_iso():
    record = Record(drill="d", verdict=Outcome.PASS, started=at(0.0004), phases={"injected": at(1.5)})
    line = record.to_json()
    assert line["started"] == "2026-03-01T02:00:00.000Z" and line["phases"] == {"injected": "2026-03-01T02:00:01.500Z"}
    assert line["finished"] is None and line["wall_started"] is None


@pytest.mark.parametrize("error, injected, category", [
    (KeyboardInterrupt(), True, Category.INTERRUPTED),
    (KeyboardInterrupt(), False, Category.INTERRUPTED),
    (InvalidProfile("slo.x: not a duration"), False, Category.BAD_INPUT),
    (UnsafeTarget("node n9 is not in the allowlist"), False, Category.BAD_INPUT),
    (InjectionFailed("switch leaf-1: Ethernet240 is already admin down", changed=False), False,
     Category.INJECTOR_FAILED),
    (RevertFailed("could not uncordon n1"), True, Category.REVERT_FAILED),
    (CheckFailed("precondition not met: 1 node"), False, Category.PRECONDITION_NOT_MET),
    (CheckFailed("job logs unreadable"), True, Category.CHECK_FAILED),
    (TargetUnreachable("API down"), False, Category.PRECONDITION_NOT_MET),
    (DrillError("cannot take the run lock"), False, Category.PRECONDITION_NOT_MET),
    (RuntimeError("check exploded"), True, Category.ERROR),
    (ValueError("inject this"), False, Category.ERROR),  # a bug, whatever its words say
])
def test_category_of_an_error_is_its_type(error, injected, category):
    assert category_of_error(error, injected) is category


def test_outcomes_and_the_runs_that_never_started():
    assert Category.NO_EFFECT.outcome is Outcome.INCONCLUSIVE
    assert Category.PRECONDITION_NOT_MET.outcome is Outcome.INCONCLUSIVE
    assert Category.ABORTED.outcome is Outcome.ABORTED  # a tripped stop condition: not judged
    assert Category.UNCLASSIFIED_LOG.outcome is Outcome.INCONCLUSIVE  # unknown is not healthy, nor a failure
    assert Category.NOT_OBSERVED.outcome is Outcome.INCONCLUSIVE
    assert all(c.outcome is Outcome.FAIL for c in Category if c not in (Category.NO_EFFECT,
                                                                         Category.PRECONDITION_NOT_MET,
                                                                         Category.UNCLASSIFIED_LOG,
                                                                         Category.NOT_OBSERVED,
                                                                         Category.ABORTED))
    assert NOT_STARTED == {Category.BAD_INPUT, Category.INJECTOR_FAILED, Category.PRECONDITION_NOT_MET}


class _Clock:
    def now(self) -> datetime:
        return at(1200)


def _scenario(drill: str = "gpu-node-loss", injected: bool = True) -> DrillScenario:
    run = SimpleNamespace(run_id="r-1", target="twin", defects=())
    account = DrillScenario(None, catalog()[drill], "Drain a node", run, 900.0, _Clock())
    if injected:
        account.timeline = Timeline(injected=at(0))
    return account


def _record(verdicts=(), error=None, drill="gpu-node-loss", injected=True, reverts=()) -> Record:
    account = _scenario(drill, injected)
    account.verdicts = list(verdicts)
    account.reverts = list(reverts)
    return account.to_record(error)


def _reworded(verdict):
    return replace(verdict, reason="completely different words: never resumed, stale checkpoint, NET/Socket")


@pytest.mark.parametrize("verdict, category", [
    (judge_resume(4000, 6000), Category.STALE_CHECKPOINT),  # catalog: the check's name
    (judge_resume(None, 6000), Category.SLO_BREACH),  # never_reached: the target is what broke
    (judge_max("lost steps", 4150, 2000, "steps"), Category.STALE_CHECKPOINT),
    (judge_recovery(Timeline(injected=at(0), detected=at(50)), 900), Category.SLO_BREACH),
])
def test_rewording_a_reason_never_changes_its_category(verdict, category):
    assert _record([verdict]).category is category
    assert _record([_reworded(verdict)]).category is category
    # and the words that used to decide it ("never resumed") decide nothing without the field
    assert _record([replace(verdict, reason="the job never resumed", never_reached=False)]).category is \
        (_record([replace(verdict, never_reached=False)]).category)


def test_rewording_an_error_never_changes_its_category():
    for words in ("could not inject: node n1 not found", "node n1 not found", "precondition not met"):
        assert _record(error=InjectionFailed(words), injected=False).category is Category.INJECTOR_FAILED
        assert _record(error=CheckFailed(words), injected=False).category is Category.PRECONDITION_NOT_MET


def test_record_verdicts_pass_fail_inconclusive():
    good = judge_recovery(Timeline(injected=at(0), recovered=at(432)), 900)
    passed = _record([good])
    assert passed.verdict is Outcome.PASS and passed.category is None and passed.recovery_s is None  # timeline: injected only
    none = judge_effect("the drain", None)
    unsure = _record([none, good])
    assert unsure.verdict is Outcome.INCONCLUSIVE and unsure.category is Category.NO_EFFECT
    assert [c.verdict for c in unsure.checks] == [Outcome.INCONCLUSIVE, Outcome.PASS]
    pre = _record(error=CheckFailed("precondition not met: the job runs on 1 node"), injected=False)
    assert pre.verdict is Outcome.INCONCLUSIVE and pre.category is Category.PRECONDITION_NOT_MET
    stopped = _record([good], error=KeyboardInterrupt())
    assert stopped.verdict is Outcome.FAIL and stopped.category is Category.INTERRUPTED
    assert "interrupted" in stopped.reason


def test_a_failed_revert_wins_over_everything():
    good = judge_recovery(Timeline(injected=at(0), recovered=at(432)), 900)
    record = _record([good], reverts=[{"kind": "node", "target": "n1", "ok": False, "error": "API down"}])
    assert record.verdict is Outcome.FAIL and record.category is Category.REVERT_FAILED
    assert record.reason.endswith("; revert failed: API down")


def test_the_recorders_line_reads_back_as_the_same_record():
    record = _record([judge_resume(4000, 6000)])
    assert Record.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_a_tripped_stop_condition_is_aborted():
    from drills.core.errors import StopConditionBreached
    from drills.core.record import category_of_error

    assert category_of_error(StopConditionBreached("aborted: …"), injected=True) is Category.ABORTED
