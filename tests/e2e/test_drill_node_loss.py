"""The GPU-node-loss drill end to end: the real `drills run` against twins — healthy, and with the
defects that must make it fail for the right reason — measured against the twin's ground truth."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import audit_file, drill_mutations, drills, node, records, schedulable

pytestmark = pytest.mark.slow

SCALE = "600"  # the drill waits until training caught up (~10 cluster minutes): 1 s of wall time here
TARGET_S = 900.0
MAX_ERROR_S = 0.01 * TARGET_S  # measured recovery vs ground truth: ≤ 1 % of the target


@pytest.fixture(scope="module")
def healthy_run(tmp_path_factory) -> tuple:
    """One `drills run -m training` on healthy twins (one per fault mode), report built: shared by the tests below."""
    reports = tmp_path_factory.mktemp("reports")
    done = drills("run", "-m", "training", "--scale", SCALE, "--reports", str(reports), "--run-id", "healthy")
    return done, reports / "healthy", reports


def test_healthy_twin_passes_every_fault_mode(healthy_run):
    done, run_dir, reports = healthy_run
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records(reports / "latest")
    assert {r["details"]["fault_mode"] for r in recs} == {"cordon-drain", "taint-noexecute", "gpu-unhealthy"}
    for rec in recs:
        assert rec["verdict"] == "pass", rec["reason"]
        assert 0 < rec["recovery_s"] <= TARGET_S and rec["target_s"] == TARGET_S
        assert list(rec["phases"]) == ["injected", "detected", "rescheduled", "ready", "recovered", "caught_up"]
        assert rec["details"]["resumed_step"] == rec["details"]["latest_checkpoint"]
        assert rec["details"]["lost_node"] not in rec["details"]["new_nodes"]
        assert rec["run_id"] == "healthy" and rec["drill"] == "gpu-node-loss" and rec["severity"] == "critical"
    assert "Drill results" in done.stdout and done.stdout.count("PASS") >= 3
    assert "waiting for" in done.stdout or "✓ recovered" in done.stdout  # progress while the drill ran
    for name in ("junit.xml", "summary.md", "journal.jsonl", "report/index.html"):
        assert (run_dir / name).exists(), name


def test_measured_recovery_matches_the_twins_ground_truth(healthy_run):
    """recovered = the first step after resume (truth); injected = the drill's first write (audit log)."""
    _, run_dir, _ = healthy_run
    for rec in records(run_dir):
        state = Path(rec["details"]["twin_state"])
        truth = json.loads((state / "truth.json").read_text())
        first = [r for r in truth["records"] if r["kind"] == "first_step_after_resume"]
        writes = drill_mutations(audit_file(state))  # the twin's /twin/v1 fault endpoints are not audited:
        injected = writes[0]["twinTime"] if writes else _ts(rec["details"]["faults"][0]["twin_at"])  # their answer
        assert first, f"the twin never resumed training in {state}"
        truth_recovery = first[0]["at"] - injected
        assert abs(rec["recovery_s"] - truth_recovery) <= MAX_ERROR_S, (rec["recovery_s"], truth_recovery)
        measured_recovered = datetime.fromisoformat(rec["phases"]["recovered"].replace("Z", "+00:00")).timestamp()
        assert abs(measured_recovered - first[0]["at"]) <= MAX_ERROR_S


def test_allure_shows_steps_parameters_attachments_and_labels(healthy_run):
    _, run_dir, _ = healthy_run
    results = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert len(results) == 3
    for result in results:
        labels = {(label["name"], label["value"]) for label in result["labels"]}
        assert {("epic", "Training resilience"), ("feature", "GPU node loss"), ("severity", "critical")} <= labels
        assert ("story", result["name"]) in labels
        assert [s["name"].split(" ", 1)[0] for s in result["steps"]] == ["Given", "And", "When", "Then", "And", "And",
                                                                        "And"]
        params = {p["name"] for p in result["parameters"]}
        assert {"measured recovery", "target", "verdict", "recovery", "lost steps"} <= params
        attachments = {a["name"] for a in result["attachments"]}
        assert {"drill record (JSON)", "timeline", "logs excerpt"} <= attachments


@pytest.mark.parametrize("defect, expected", [
    # survivors cannot rejoin a replaced worker (static rendezvous): the job hangs, then its NCCL watchdog fires
    ("no-restart-policy", "the job never resumed: no worker resumed from a checkpoint within 18m of the fault"),
    ("sparse-checkpoints", "lost steps"),
])
def test_defect_fails_for_the_right_reason_and_the_node_is_schedulable_again(defect, expected, twin_factory, tmp_path):
    twin = twin_factory(defects=[defect], scale=float(SCALE))
    done = drills("run", "-m", "training", "-k", "cordon", "--twin-state", str(twin.state_dir), "--no-html",
                  "--reports", str(tmp_path), "--run-id", defect)
    assert done.returncode == 1, done.stdout + done.stderr
    (rec,) = records(tmp_path / defect)
    assert rec["verdict"] == "fail" and expected in rec["reason"], rec["reason"]
    assert rec["defects"] == [defect]
    assert schedulable(node(twin, rec["details"]["lost_node"]))  # reverted after a failed check


def test_node_is_schedulable_again_after_a_pass(twin_factory, tmp_path):
    twin = twin_factory(scale=float(SCALE))
    done = drills("run", "-m", "training", "-k", "taint", "--twin-state", str(twin.state_dir), "--no-html",
                  "--reports", str(tmp_path), "--run-id", "pass")
    assert done.returncode == 0, done.stdout + done.stderr
    (rec,) = records(tmp_path / "pass")
    assert rec["verdict"] == "pass"
    assert schedulable(node(twin, rec["details"]["lost_node"]))


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
