"""The rolling-restart drill (issue 35, the seed §5.3) on the twin: the real `drills run` restarts the serving
Deployment as `kubectl rollout restart` does under locust load, and each broken platform fails for its own reason.
The rows are bench/verdicts.yaml's (drill inference_rolling_restart), the table `make verdicts` runs too.

| construction                                   | verdict | category       | check / reason names                         |
|------------------------------------------------|---------|----------------|----------------------------------------------|
| healthy, 30 s endpoint propagation             | pass    |                | 2 old uids gone, 2 new pods serving, 0 errors |
| no-readiness-probe (Ready before the model)    | fail    | slo_breach     | rollout errors: 502 connection refused        |
| no-prestop-drain (+ the 30 s propagation)      | fail    | slo_breach     | rollout errors: requests failing              |
| rollout-all-at-once (maxUnavailable 100%)      | fail    | unsafe_rollout | unavailable replicas: fewest available 0 of 2 |

The healthy twin carries the same 30 s endpoint propagation as no-prestop-drain (a profile edit): its 40 s preStop
sleep covers it, so the defect's FAIL comes from the missing drain, not from the propagation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.verdicts import mismatches, rows
from drills.twin.launcher import start_twin
from drills.twin.profile import PROFILES_DIR
from tests.e2e.drill_helpers import drills, records, write_profile

pytestmark = [pytest.mark.slow, pytest.mark.inference]

DRILL = "inference_rolling_restart"
ROWS = rows(DRILL)
SCALE = 120  # the load is sparse in cluster time at higher scales: a 30 s propagation window must see requests


@pytest.fixture(scope="module")
def propagating_twin(tmp_path_factory):
    """The minimal twin whose endpoint changes take 30 s to reach the gateway (as no-prestop-drain's do)."""
    profile = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    profile["workloads"]["inference"]["llama-7b-infer"]["endpoints_lag"] = "30s"
    folder = tmp_path_factory.mktemp("propagating")
    handle = start_twin(folder / "state", profile=write_profile(folder / "propagating.yaml", yaml.safe_dump(profile)),
                        scale=SCALE)
    try:
        yield handle
    finally:
        handle.stop()


def _run(tmp_path: Path, run_id: str, *args: str) -> tuple:
    done = drills("run", "-m", DRILL, *args, "--no-html", "--reports", str(tmp_path), "--run-id", run_id)
    recs = records(tmp_path / run_id)
    assert len(recs) == 1, done.stdout + done.stderr
    return done, recs[0]


def _checks(rec: dict) -> dict:
    return {c["name"]: c for c in rec["details"]["checks"]}


def test_a_rolling_restart_replaces_every_replica_without_a_failed_request(propagating_twin, tmp_path):
    done, rec = _run(tmp_path, "healthy", "--twin-state", str(propagating_twin.state_dir))
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
    rollout = rec["details"]["rollout"]
    before, after = rollout["pods_before"], rollout["pods_after"]
    assert len(before) == 2 and len(after) == 2 and not rollout["left"]
    assert not set(before.values()) & {p["uid"] for p in after.values()}  # replaced: judged by uid, not by name
    assert all(p["ready"] and p["in_endpoints"] and p["served"] > 0 for p in after.values())
    assert rollout["min_available"] == 2 and rollout["completed_s"] == rec["recovery_s"] > 60  # two model loads
    assert rec["details"]["load"]["failures"] == 0 and rec["details"]["load"]["requests"] > 50
    assert rec["details"]["restart"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.defect)
def test_each_broken_rollout_fails_for_its_own_reason(row, tmp_path):
    done, rec = _run(tmp_path, row.defect, *row.args()[:2], "--scale", str(row.scale))
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    checks = _checks(rec)
    assert checks["rollout"]["verdict"] == "pass"  # every defect still completes the rollout: its own check fails
    if row.defect == "rollout-all-at-once":
        assert rec["details"]["rollout"]["min_available"] == 0 and rec["details"]["load"]["failures"] > 0
    else:
        assert checks["unavailable replicas"]["verdict"] == "pass"  # a replica was always Ready: users still lost
        assert rec["details"]["load"]["failures"] > 0
