"""The one rule for targets (drills/verdicts/targets.py) and the scenario numbers it reads (fixtures/targets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.profile.model import parse_profile
from drills.verdicts.targets import DEFAULT, FEATURE, GRACE, PROFILE, annotate, resolve
from drills.verdicts.timeline import judge_max
from fixtures.targets import CONTRACTS, feature_value

FEATURES = Path(__file__).resolve().parents[2] / "features"


def slo(text: str = ""):
    return parse_profile(f"slo: {{{text}}}").slo


def test_the_features_number_is_the_contract_when_the_profile_does_not_set_the_field():
    target = resolve(900, slo(), "training_recovery_s", "s")
    assert (target.value, target.source, target.feature, target.profile) == (900.0, FEATURE, 900.0, None)
    assert not target.overridden and target.describe() == "15m (feature)"


def test_a_profile_default_never_outvotes_the_feature():
    """The model's default is 900 s; the scenario says 10 minutes: 10 minutes is judged."""
    assert resolve(600, slo(), "training_recovery_s", "s").value == 600.0


def test_a_profile_that_sets_the_field_overrides_the_feature_and_both_are_kept():
    target = resolve(900, slo("training_recovery_s: 10m"), "training_recovery_s", "s")
    assert (target.value, target.source, target.feature, target.profile) == (600.0, PROFILE, 900.0, 600.0)
    assert target.overridden
    assert target.describe() == "10m (site profile; the feature says 15m)"
    assert target.to_record() == {"name": "training_recovery_s", "value": 600.0, "source": "profile",
                                  "feature": 900.0, "profile": 600.0, "unit": "s", "wait_s": 720.0}


def test_an_explicit_value_equal_to_the_default_still_counts_as_set():
    target = resolve(600, slo("training_recovery_s: 15m"), "training_recovery_s", "s")
    assert (target.value, target.source) == (900.0, PROFILE)


def test_without_a_number_in_the_scenario_the_profile_decides():
    assert resolve(None, slo(), "checkpoint_save_ratio", "x").source == DEFAULT
    assert resolve(None, slo(), "checkpoint_save_ratio", "x").value == 2.0
    assert resolve(None, slo("checkpoint_save_ratio: 3"), "checkpoint_save_ratio", "x").describe() == \
        "3× (site profile; the feature states no number)"


def test_lost_steps_budget_goes_through_the_rule():
    assert resolve(2000, slo(), "lost_steps_budget", "steps").value == 2000.0
    target = resolve(2000, slo("lost_steps_budget: 500"), "lost_steps_budget", "steps")
    assert target.value == 500.0 and target.describe() == "500 steps (site profile; the feature says 2000 steps)"
    with pytest.raises(ValueError, match="no target for lost_steps_budget"):
        resolve(None, slo(), "lost_steps_budget", "steps")


def test_ratios_read_as_percent():
    target = resolve(0.9, slo("throughput_recovery_ratio: 0.8"), "throughput_recovery_ratio", "ratio")
    assert target.describe() == "80 % (site profile; the feature says 90 %)"


def test_waiting_is_the_resolved_target_plus_the_grace():
    """The bug this replaces: a profile of 30 s cut the wait at 36 s while the feature's 15 min was judged."""
    assert GRACE == 0.2
    assert resolve(900, slo("training_recovery_s: 30"), "training_recovery_s", "s").wait_s == pytest.approx(36.0)
    assert resolve(900, slo(), "training_recovery_s", "s").wait_s == pytest.approx(1080.0)


def test_annotate_names_both_numbers_only_when_the_feature_was_overridden():
    verdict = judge_max("lost steps", 300, 500, "steps")
    overridden = annotate(verdict, resolve(2000, slo("lost_steps_budget: 500"), "lost_steps_budget", "steps"))
    assert overridden.reason.endswith("[target 500 steps (site profile; the feature says 2000 steps)]")
    assert overridden.to_record()["target_source"] == "profile"
    plain = annotate(verdict, resolve(500, slo(), "lost_steps_budget", "steps"))
    assert plain.reason == verdict.reason and plain.to_record()["target_source"] == "feature"


@pytest.mark.parametrize("key,step,value", [
    ("training recovery", "training recovers within 15 minutes", 900.0),
    ("lost steps", "no more than 2000 steps are lost", 2000.0),
    ("error budget", "no more than 1% of requests fail while a replica serves", 0.01),
    ("p99 latency", "p99 latency stays within 2x the baseline while a replica serves", 2.0),
    ("throughput", "throughput is back to at least 90 % of its baseline", 0.9),
    ("checkpoint save", "its save time stays within 2x its baseline", 2.0),
])
def test_the_scenarios_number_is_read_from_its_steps_in_the_profiles_unit(key, step, value):
    steps = ("the training job is running on at least 2 nodes", step)
    assert feature_value(steps, CONTRACTS[key]) == pytest.approx(value)
    assert feature_value(steps[:1], CONTRACTS[key]) is None


def test_every_contract_is_stated_by_a_feature():
    """A contract phrase no feature uses would silently fall back to the profile's default."""
    text = "\n".join(p.read_text() for p in FEATURES.rglob("*.feature"))
    lines = [line.strip().split(" ", 1)[1] for line in text.splitlines()
             if line.strip().split(" ", 1)[0] in ("Then", "And", "Given", "When")]
    for key, contract in CONTRACTS.items():
        assert feature_value(tuple(lines), contract) is not None, key
