"""Timeline → recovery seconds → verdicts, with literal timestamps."""

from datetime import datetime, timedelta, timezone

import pytest

import drills.core.record
from drills.verdicts.timeline import (
    PHASES, Timeline, Verdict, combine, format_duration, judge_effect, judge_max, judge_min, judge_recovery,
    judge_resume, lost_steps, phase_durations, recovery_seconds, within,
)

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_recovery_seconds_is_recovered_minus_injected():
    tl = Timeline.from_events({"injected": at(0), "detected": at(50), "rescheduled": at(350),
                               "ready": at(400), "recovered": at(432), "caught_up": at(700)})
    assert recovery_seconds(tl) == 432.0
    assert tl.last_reached == "caught_up"


def test_missing_phases_give_no_recovery():
    assert recovery_seconds(Timeline(injected=at(0), rescheduled=at(300))) is None
    assert recovery_seconds(Timeline(recovered=at(10))) is None
    assert Timeline().last_reached is None


def test_earliest_event_of_a_phase_wins_and_order_does_not_matter():
    tl = Timeline.from_events([("recovered", at(500)), ("injected", at(0)), ("recovered", at(450))])
    assert tl.recovered == at(450)
    assert tl.mark("recovered", at(600)).recovered == at(450)


def test_events_accept_epoch_seconds_and_iso_and_reject_naive_or_unknown():
    tl = Timeline.from_events({"injected": T0.timestamp(), "recovered": "2024-05-01T10:07:12Z"})
    assert recovery_seconds(tl) == 432.0
    with pytest.raises(ValueError, match="naive"):
        Timeline(injected=datetime(2024, 5, 1, 10, 0))
    with pytest.raises(ValueError, match="unknown phase"):
        Timeline().mark("resumed", at(1))


def test_record_round_trip_keeps_millisecond_precision():
    tl = Timeline(injected=at(0), recovered=at(12.5))
    record = tl.to_record()
    assert record == {"injected": "2024-05-01T10:00:00.000Z", "recovered": "2024-05-01T10:00:12.500Z"}  # Clock.iso
    assert Timeline.from_record(record) == tl
    assert Timeline.from_record(Timeline(recovered=at(0.0004)).to_record()).recovered == at(0)  # sub-ms is dropped


def test_phase_durations_relative_to_injected_and_previous_reached_phase():
    tl = Timeline(injected=at(0), detected=at(50), ready=at(400), recovered=at(432))
    rows = [(d.phase, d.since_injected, d.previous, d.since_previous) for d in phase_durations(tl)]
    assert rows == [("injected", 0.0, None, None), ("detected", 50.0, "injected", 50.0),
                    ("ready", 400.0, "detected", 350.0), ("recovered", 432.0, "ready", 32.0)]


def test_within_is_inclusive_and_missing_fails():
    assert within(900, 900)
    assert not within(900.5, 900)
    assert not within(None, 900)
    assert not within(float("nan"), 900)


def test_judge_recovery_pass():
    v = judge_recovery(Timeline(injected=at(0), recovered=at(432)), 900)
    assert v.passed and v.verdict == "pass" and v.measured == 432.0 and v.target == 900.0
    assert v.reason == "recovered in 7m12s (432 s), within the 15m target"


def test_judge_recovery_too_slow():
    v = judge_recovery(Timeline(injected=at(0), recovered=at(1023)), 900)
    assert not v.passed
    assert v.reason == "recovered in 17m3s (1023 s), 2m3s over the 15m target"


def test_judge_recovery_never_recovered_names_the_last_phase():
    v = judge_recovery(Timeline(injected=at(0), detected=at(50), rescheduled=at(300)), 900,
                       subject="the job", verb="resume")
    assert not v.passed and v.measured is None
    assert v.reason == "never recovered: the job did not resume within the 15m target (last phase reached: rescheduled)"
    assert v.never_reached  # the field reports read; they never match "never recovered" in the sentence
    assert not judge_recovery(Timeline(injected=at(0), recovered=at(1023)), 900).never_reached


def test_judge_recovery_without_injection_fails():
    v = judge_recovery(Timeline(), 300)
    assert not v.passed and "no fault was injected" in v.reason and not v.never_reached


def test_judge_max_and_min():
    ok = judge_max("lost steps", 150, 2000, "steps")
    assert ok.passed and ok.reason == "lost steps: 150 steps, within the limit of 2000 steps"
    bad = judge_max("lost steps", 4150, 2000, "steps")
    assert not bad.passed and bad.reason == "lost steps: 4150 steps, over the limit of 2000 steps"
    assert not judge_max("error rate", None, 0.01).passed
    tp = judge_min("throughput after recovery", 0.93, 0.9, "of baseline")
    assert tp.passed and tp.reason == "throughput after recovery: 0.93 of baseline, at least the required 0.9 of baseline"
    low = judge_min("throughput after recovery", 0.2, 0.9, "of baseline")
    assert not low.passed and "below the required 0.9" in low.reason
    save = judge_max("checkpoint save time", 95.0, 60, "s")
    assert save.reason == "checkpoint save time: 1m35s (95 s), over the limit of 1m (60 s)"


def test_judge_resume_latest_stale_and_missing():
    assert judge_resume(6000, 6000).passed
    stale = judge_resume(4000, 6000)
    assert not stale.passed
    assert stale.reason == "resumed from step 4000 but the latest checkpoint was 6000: resumed from a stale checkpoint"
    assert not stale.never_reached  # resumed, but from the wrong place: a stale checkpoint, not a missed target
    never = judge_resume(None, 6000)
    assert not never.passed and never.never_reached
    assert not judge_resume(0, None).passed and not judge_resume(0, None).never_reached


def test_lost_steps():
    assert lost_steps(6150, 6000) == 150
    assert lost_steps(6150, None) is None
    assert lost_steps(5990, 6000) == 0


def test_combine_leads_with_failures():
    good = judge_recovery(Timeline(injected=at(0), recovered=at(432)), 900)
    bad = judge_max("lost steps", 4150, 2000, "steps")
    overall = combine([good, bad])
    assert not overall.passed and overall.reason == bad.reason and overall.measured == 432.0
    assert combine([good]).passed and combine([good]).reason == good.reason
    assert not combine([]).passed


def test_a_fault_without_effect_makes_the_drill_inconclusive_unless_something_failed():
    effect = judge_effect("the uplink drop", "uplink traffic fell to 0")
    assert effect.passed and effect.verdict == "pass" and not effect.inconclusive
    none = judge_effect("the uplink drop", None)
    assert not none.passed and none.inconclusive and none.verdict == "inconclusive"
    assert none.to_record()["verdict"] == "inconclusive"
    good = judge_recovery(Timeline(injected=at(0), recovered=at(432)), 900)
    unsure = combine([none, good])
    assert not unsure.passed and unsure.inconclusive and unsure.verdict == "inconclusive"
    assert unsure.reason == none.reason
    bad = judge_recovery(Timeline(injected=at(0), detected=at(10)), 900)
    worse = combine([none, bad])
    assert worse.verdict == "fail" and worse.never_reached and worse.reason == bad.reason
    with pytest.raises(ValueError, match="inconclusive and passed"):
        Verdict("x", True, None, None, "", "", inconclusive=True)


@pytest.mark.parametrize("seconds,text", [
    (0, "0s"), (4.25, "4.2s"), (45, "45s"), (60, "1m"), (432, "7m12s"), (900, "15m"),
    (3600, "1h"), (3725, "1h2m5s"), (-30, "-30s"), (None, "unknown"),
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_phases_are_in_drill_order_and_defined_once():
    assert PHASES == ("injected", "detected", "alerted", "rescheduled", "ready", "recovered", "caught_up")
    assert PHASES is drills.core.record.PHASES
