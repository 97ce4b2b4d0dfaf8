"""The acceptance suite in Gherkin (features/acceptance/, drills/acceptance/runbook.py): every check the policy
can require has its Scenario Outline over the planned nodes (no check without a scenario, no scenario for
an unknown check); the runbook is rendered with the plan's nodes; it is bound only for `drills accept`, and
the drills never collect it; and a runbook run that measured nothing signs nothing off: each required check
is a `not_run` no-go row, a waiver an xfail row, whatever scenarios ran. No twin: a plan with no Job check
touches no cluster (the e2e tests in tests/e2e/test_accept*.py run the runbook against the twin)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from pytest_bdd.feature import get_features

from drills.acceptance.checks import AcceptChecks, BATCH_STEPS, JOB_PHASES
from drills.acceptance.plan import AcceptPlan
from drills.acceptance.run import AcceptResult
from drills.acceptance.runbook import FEATURES, NODE_HEADER, render, run_runbook
from drills.core.errors import DrillError
from drills.core.preflight import feature_selection
from drills.core.selection import candidates
from drills.profile.acceptance import CHECKS, Requirement, Waiver
from drills.profile.model import load_target

REPO = Path(__file__).resolve().parents[2]
RUN_STEP = re.compile(r"^the (\S+) check has run on every planned node$")


def _outlines() -> dict[str, object]:
    """check → the Scenario Outline that runs it (its `When the <check> check has run …` step)."""
    out: dict[str, object] = {}
    for feature in get_features([str(FEATURES)]):
        for scenario in feature.scenarios.values():
            for step in scenario.steps:
                m = RUN_STEP.match(step.name)
                if m:
                    assert m.group(1) not in out, f"two scenarios run {m.group(1)}"
                    out[m.group(1)] = scenario
    return out


def test_every_check_the_policy_can_require_has_a_scenario_outline_over_the_planned_nodes():
    outlines = _outlines()
    assert set(outlines) == set(CHECKS), "a check without a scenario, or a scenario for no check"
    assert [c for c in outlines if c in JOB_PHASES] == list(JOB_PHASES)  # the phases' order: each wants the GPUs
    for check, scenario in outlines.items():
        steps = [s.name for s in scenario.steps]
        assert f"the {check} check of <node> is a go" in steps, check
        assert [tuple(ex.example_params) for ex in scenario.examples] == [NODE_HEADER], check
        assert all(not ex.examples for ex in scenario.examples), "rows come from the plan, not the repository"


def test_the_batch_steps_and_the_sign_off_come_after_every_check():
    (feature,) = get_features([str(FEATURES)])
    names = [s.name for sc in feature.scenarios.values() for s in sc.steps]
    last_check = max(i for i, n in enumerate(names) if RUN_STEP.match(n))
    batch = ["the evidence of every planned node has been cross-checked", "the policy's required checks have been counted",
             "the new nodes' reads of the shared store have been added up", "every check and batch step has run"]
    assert all(names.index(b) > last_check for b in batch) and [names.index(b) for b in batch] == \
        sorted(names.index(b) for b in batch)
    assert names[-1] == "<node> may join the pool"


def test_render_fills_the_node_tables_with_the_planned_nodes(tmp_path):
    (out,) = render(FEATURES, ("gpu-new-01", "gpu-new-02"), tmp_path)
    (feature,) = get_features([str(out)])
    rows = {sc.name: [tuple(r) for ex in sc.examples for r in ex.examples] for sc in feature.scenarios.values()}
    outlines = [name for name, r in rows.items() if r]
    assert len(outlines) == len(CHECKS) + 2  # + required checks, sign-off
    assert all(rows[name] == [("gpu-new-01",), ("gpu-new-02",)] for name in outlines)


def test_the_drills_never_collect_the_runbook_and_drills_run_refuses_it():
    drills = candidates(REPO / "features")
    assert drills and not any("acceptance" in c.feature for c in drills)
    (REPO / "features" / "test_drills.py").read_text().index("drill_feature_files")  # the binder leaves it out
    with pytest.raises(DrillError, match="drills accept"):
        feature_selection([str(FEATURES)], REPO / "features")


def _checks(tmp_path, **acceptance) -> AcceptChecks:
    profile = load_target(None)
    profile = profile.model_copy(update={"acceptance": profile.acceptance.model_copy(update=acceptance)})
    nodes = ("gpu-new-01", "gpu-new-02")
    plan = AcceptPlan(nodes=nodes, reference=None, checks=tuple(profile.acceptance.checks), capacity={}, rails={},
                      ports={}, ips={})
    return AcceptChecks(None, profile, plan, "unit", None, AcceptResult(1, tmp_path, plan, policy=profile.acceptance))


def _rows(run_dir: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(run_dir / "runbook" / "junit.xml").iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = kinds[0] if kinds else "passed"
    return out


def test_a_runbook_that_measured_nothing_signs_nothing_off(tmp_path):
    """No check in acceptance.checks: every check's rows skip, every required check is a not_run no-go row, the
    sign-off rows fail; a waiver turns its row into an xfail — but a node of which nothing at all was observed is
    no GO even so (issue 31: a waiver excuses a check, never the want of all evidence)."""
    waiver = Waiver(check="gpu", node="gpu-new-02", reason="no GPU image mirrored", by="j.doe")
    checks = _checks(tmp_path, checks=[], required={"gpu": Requirement()}, waivers=[waiver])
    run_runbook(checks, tmp_path)
    rows = _rows(tmp_path)
    assert {v for k, v in rows.items() if k.startswith("test_gpus")} == {"skipped"}
    required = {k.rsplit("[", 1)[1][:-1]: v for k, v in rows.items() if k.startswith("test_required")}
    assert required == {"gpu-new-01": "failure", "gpu-new-02": "skipped"}  # xfail: junit says skipped
    signoff = {k.rsplit("[", 1)[1][:-1]: v for k, v in rows.items() if k.startswith("test_signoff")}
    assert signoff == {"gpu-new-01": "failure", "gpu-new-02": "failure"}
    assert [(r.node, r.check, r.failure) for r in checks.result.results] == \
        [("gpu-new-01", "gpu", "not_run"), ("gpu-new-02", "gpu", "not_run"), ("gpu-new-02", "evidence", "not_run")]
    assert "every check of gpu-new-02 is waived (gpu)" in checks.result.results[-1].reason
    assert checks.done[-len(BATCH_STEPS):] == list(BATCH_STEPS)
    assert not (tmp_path / "records.jsonl").exists()  # the drills' recorder is not loaded: the report writes them


def test_a_check_asked_for_after_the_verdicts_were_settled_is_refused(tmp_path):
    checks = _checks(tmp_path, checks=[])
    checks.run("required")  # runs the identity cross-check first
    assert checks.done == ["identity", "required"]
    with pytest.raises(DrillError, match="list every check first"):
        checks.run("gpu")
    checks.finish()
    assert checks.done == ["identity", "required", "aggregate", "fresh"]


def test_an_error_that_is_no_verdict_stops_the_runbook_and_is_raised_as_before(tmp_path):
    """A step that fails for another reason than a no-go (here: no cluster to create the gpu Jobs on) stops
    the runbook at once and reaches the caller as itself — `drills accept` then reverts as it always did."""
    checks = _checks(tmp_path, checks=["gpu", "dcgm"])
    with pytest.raises(AttributeError, match="api"):
        run_runbook(checks, tmp_path)
    assert checks.done == ["gpu"]  # nothing after the failing step ran, no batch verdict was settled
