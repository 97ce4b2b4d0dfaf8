"""The drill safety contract end to end (DESIGN §6): the node is schedulable again after an exception,
SIGINT, SIGTERM, and SIGKILL followed by `drills revert`; bad input is one clear line, a non-zero exit,
and nothing injected (the twin's audit log shows no write by the drills)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.e2e.drill_helpers import (REPO, audit_of, drill_mutations, drills, drills_popen, node, records, schedulable,
                                     wait_for_injection, write_profile, without_readings)
from tests.e2e.matrix import cases
from tests.e2e.test_drill_lock import read_lease

pytestmark = pytest.mark.slow

SLOW_SCALE = 30.0  # slow enough that the drill is still waiting when the signal arrives
LOST = "gpu-train-01"  # the healthy twin's job runs on gpu-train-01 and -02; the drill picks the first


def _drill_in_background(twin, reports, run_id: str):
    proc = drills_popen("run", "-m", "training", "-k", "cordon", "--twin-state", str(twin.state_dir), "--no-html",
                        "--reports", str(reports), "--run-id", run_id)
    wait_for_injection(reports / run_id, proc)
    assert not schedulable(node(twin, LOST))  # the fault is really in place
    return proc


# test_interrupts.py runs one trial per kind (training: SIGTERM; SIGINT twice on two other kinds) asserting all of
# this and more; this per-kind trial runs in bench/matrix.py (DRILLS_TEST_MATRIX=full)
@pytest.mark.parametrize("signum", cases([], [signal.SIGINT, signal.SIGTERM]), ids=lambda s: signal.Signals(s).name)
def test_signal_mid_drill_reverts(signum, twin_factory, tmp_path):
    twin = twin_factory(scale=SLOW_SCALE)
    proc = _drill_in_background(twin, tmp_path, "sig")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert schedulable(node(twin, LOST))
    journal = (tmp_path / "sig" / "journal.jsonl").read_text()
    assert '"op":"close"' in journal and '"outcome":"reverted"' in journal
    (rec,) = records(tmp_path / "sig")
    assert rec["verdict"] == "fail" and "interrupted" in rec["reason"]


def test_sigkill_then_drills_revert(twin_factory, tmp_path):
    twin = twin_factory(scale=SLOW_SCALE)
    proc = _drill_in_background(twin, tmp_path, "killed")
    proc.kill()
    proc.communicate(timeout=30)
    assert not schedulable(node(twin, LOST))  # nobody reverted: the journal entry is still open
    assert read_lease(twin)["spec"]["holderIdentity"].endswith("/killed")  # nobody released the run's lock
    done = drills("revert", "--reports", str(tmp_path), "--run", "killed")
    assert done.returncode == 0, done.stderr
    assert f"reverted node on {LOST}" in done.stdout
    assert schedulable(node(twin, LOST))
    assert not read_lease(twin)["spec"].get("holderIdentity")  # drills revert released it
    again = drills("revert", "--reports", str(tmp_path))
    assert again.returncode == 0 and "nothing to revert" in again.stdout


def test_exception_in_a_step_still_reverts(twin_factory, tmp_path):
    """A feature of our own whose check raises after the fault: the injector fixture reverts anyway."""
    twin = twin_factory(scale=600.0)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "boom.feature").write_text(textwrap.dedent("""\
        @training @gpu_node_loss
        Feature: A drill whose check blows up
          Scenario: Lose a node, then a check raises
            Given the training job is running on at least 2 nodes
            When one GPU node running the job is lost by cordon-drain
            Then a check raises an unexpected error
        """))
    (suite / "test_boom.py").write_text(textwrap.dedent("""\
        from pytest_bdd import scenarios, then

        scenarios("boom.feature")


        @then("a check raises an unexpected error")
        def boom(lost_node):
            raise RuntimeError(f"check exploded after losing {lost_node.node}")
        """))
    # a fresh interpreter where bytecode may be written, as in most shells (a prefork child keeps its server's flag)
    writable = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-m", "drills.cli", "run", str(suite), "--twin-state", str(twin.state_dir),
                           "--no-html", "--reports", str(tmp_path / "reports"), "--run-id", "boom"],
                          cwd=REPO, env=writable, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert sorted(p.name for p in suite.iterdir()) == ["boom.feature", "test_boom.py"]  # read, never written
    (rec,) = records(tmp_path / "reports" / "boom")
    assert rec["verdict"] == "fail" and "RuntimeError: check exploded" in rec["reason"]
    assert without_readings(rec["details"]["reverts"]) == [{"kind": "node", "target": LOST, "ok": True, "error": None}]
    assert schedulable(node(twin, LOST))


@pytest.mark.parametrize("profile, expected", [
    ("faults: {node: gpu-nope-99}\n", "node gpu-nope-99 not found"),
    ("workloads: {training: {job: no-such-job}}\n", "training job ai-platform/no-such-job not found"),
], ids=["unknown-node", "unknown-job"])
def test_unknown_target_is_one_line_and_injects_nothing(profile, expected, twin_factory, tmp_path):
    twin = twin_factory(scale=600.0)
    path = write_profile(tmp_path / "target.yaml", profile)
    done = drills("run", "-m", "training", "-k", "cordon", "--profile", path, "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path), "--run-id", "bad")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drills: ") and expected in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert drill_mutations(audit_of(twin)) == []
    assert all(schedulable(n) for n in _nodes(twin))


def test_unreachable_api_is_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}]}))
    path = write_profile(tmp_path / "real.yaml", f"cluster: {{mode: kubeconfig, kubeconfig: {kubeconfig}}}\n"
                                                 "safety: {allow: {nodes: [gpu-train-*], namespaces: [ai-platform]}}\n")
    done = drills("run", "-m", "training", "--profile", path, "--no-html", "--reports", str(tmp_path / "r"),
                  "--run-id", "dead")
    assert done.returncode == 2
    assert done.stderr.strip() == ("drills: cannot reach the Kubernetes API at http://127.0.0.1:9: connection refused; "
                                   "check --target/kubeconfig")
    assert not (tmp_path / "r" / "dead" / "journal.jsonl").exists()


def test_invalid_profile_is_one_line(tmp_path):
    path = write_profile(tmp_path / "typo.yaml", "slo: {training_recovery: 15m}\n")
    done = drills("run", "-m", "training", "--profile", path, "--reports", str(tmp_path / "r"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "training_recovery" in lines[0] and str(path) in lines[0], done.stderr
    assert not list((tmp_path / "r").glob("*/journal.jsonl")) if (tmp_path / "r").exists() else True


def _nodes(twin) -> list[dict]:
    import requests

    return requests.get(f"{twin.url}/api/v1/nodes", timeout=5).json()["items"]


def test_dry_run_prints_the_plan_and_injects_nothing(twin_factory, tmp_path):
    twin = twin_factory(scale=600.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--dry-run", "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path), "--run-id", "dry")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run: would cordon and drain node gpu-train-01" in done.stdout
    assert drill_mutations(audit_of(twin)) == [] and records(tmp_path / "dry") == []
