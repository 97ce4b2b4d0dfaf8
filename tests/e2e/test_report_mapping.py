"""A drill whose revert fails is `failed` everywhere an auditor looks (issue 30, class 6; drills/core/outcomes.py).

A real `drills run` of the GPU-node-loss drill (cordon-drain) on a twin, in-cluster as a scheduled run connects,
under the RBAC `drills schedule` renders. Once the node is cordoned, the run's right to patch nodes is taken away
— as a GitOps sync of the cluster's RBAC would, between the drill's start and its end — so every step passes (the
job recovers on the other nodes) and then the uncordon in teardown is refused with the API server's real 403. The
record is `revert_failed`; the Allure result file, the JUnit testcase and the exit code must all say so too.
Before the one mapping the Allure result was `passed` and junit.xml had a pass: the revert runs in fixture
teardown, after pytest had decided the scenario passed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

from tests.e2e.drill_helpers import REPO, audit_of, node, records, schedulable, wait_for_injection
from tests.e2e.test_revert_in_cluster import in_cluster
from tests.e2e.test_twin_rbac import SA, apply_as_admin, schedule_rbac

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")]

SCALE = 120.0  # the drill waits for the job to catch up (~10 cluster minutes): ~5 s of wall to revoke the right in
LOST = "gpu-train-01"  # the drill cordons the first node of the healthy twin's job
ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpu-drills"


@pytest.fixture
def profile(tmp_path) -> Path:
    """The built-in twin profile in in-cluster mode (the mode `drills schedule` renders RBAC for)."""
    path = tmp_path / "in-cluster.yaml"
    path.write_text((REPO / "drills" / "profile" / "twin.yaml").read_text().replace("  mode: twin ", "  mode: in-cluster "))
    return path


def test_a_drill_whose_revert_fails_is_failed_in_allure_junit_and_the_exit_code(twin_factory, profile, tmp_path):
    twin = twin_factory(scale=SCALE, tls=True)
    apply_as_admin(twin, schedule_rbac(profile))
    reports = tmp_path / "reports"
    run_dir = reports / "revert"
    run = subprocess.Popen([sys.executable, "-m", "drills.cli", "run", "-m", "training", "-k", "cordon",
                            "--profile", str(profile), "--no-html", "--reports", str(reports), "--run-id", "revert",
                            "--lanes", "1"], cwd=REPO, env=in_cluster(twin), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_injection(run_dir, run)
        _revoke_patch_nodes(twin)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate(timeout=30)

    # the revert really failed on the cluster: the uncordon was refused (403) and the node is still cordoned
    refused = [r for r in audit_of(twin) if (r.get("user") or {}).get("username") == SA and r["verb"] == "patch"
               and r["resource"] == "nodes" and r["code"] == 403]
    assert refused, "the drill's uncordon was never refused"
    assert not schedulable(node(twin, LOST))

    (rec,) = records(run_dir)
    assert (rec["verdict"], rec["category"]) == ("fail", "revert_failed")
    assert rec["details"]["checks"] and all(c["verdict"] == "pass" for c in rec["details"]["checks"])  # steps passed
    assert "revert failed: could not revert node gpu-train-01: 403" in rec["reason"]
    assert rec["nodeid"]

    assert run.returncode == 1, out[-3000:] + err[-3000:]

    (result,) = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert result["status"] == "failed"
    assert result["statusDetails"]["message"] == rec["reason"]
    assert {"name": "nodeid", "value": rec["nodeid"]} in result["labels"]
    assert all(step["status"] == "passed" for step in result["steps"])  # what pytest saw: every step passed

    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    (case,) = suite.findall("testcase")
    assert [(child.tag, child.get("type")) for child in case if child.tag in ("failure", "error", "skipped")] == [
        ("failure", "revert_failed")]
    assert (suite.get("failures"), suite.get("errors")) == ("1", "0")


def _revoke_patch_nodes(twin) -> None:
    """The ClusterRole keeps reading nodes but may no longer patch them (replaced over the admin listener)."""
    role = requests.get(twin.url + ROLE, timeout=10).json()
    for rule in role["rules"]:
        if "nodes" in rule.get("resources", ()):
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    resp = requests.put(twin.url + ROLE, json=role, timeout=10)
    assert resp.status_code == 200, resp.text
