"""Class 2 for detection (issue 30, wave 8): an alert that goes while its fault is still in place, because the
exporter it reads went quiet, is not a resolution. Run on its own file so the suite's file-by-file scheduling can
place it beside tests/e2e/test_detect_stack.py rather than after it. Skipped, naming why, where Debian's
prometheus / prometheus-alertmanager are not installed."""

from __future__ import annotations

import os

import pytest

from drills.detect.stack import missing_tools
from drills.profile.monitoring import OPT_OUT
from tests.e2e.drill_helpers import drills, records

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(missing_tools()), reason=f"{' and '.join(missing_tools())} not installed "
                                                               f"(Debian packages; `make bootstrap` installs them as root)")]


def _judged() -> dict:
    """This process's environment without the test suite's opt-out (tests/conftest.py): detection judged."""
    return {k: v for k, v in os.environ.items() if k != OPT_OUT}


def test_an_alert_that_resolves_because_its_exporter_went_quiet_mid_fault_fails_the_drill(tmp_path):
    """Class 2 for detection (issue 30): the alert goes, the fault does not. On one twin, kube-state-metrics stops
    answering 2 minutes after a node is lost (ksm-stops-mid-fault) and the leaf's SNMP agent 2 minutes after one of
    its ports is shut (snmp-stops-mid-fault): TrainingNodeLost and FabricLinkDown resolve while the node is still
    cordoned and the port still down. Before, "it resolves after recovery" passed both (gone before the recovery:
    0 s). Now each drill FAILs on that check alone, naming the object Prometheus stopped reading."""
    reports = tmp_path / "reports"
    done = drills("run", "-m", "cordon_drain or (switch_uplink and not (sonic or nxos or eos or cumulus or onyx))",
                  "--defect", "ksm-stops-mid-fault", "--defect", "snmp-stops-mid-fault", "--lanes", "2",
                  "--scale", "60", "--no-html", "--reports", str(reports), "--run-id", "quiet", env=_judged(),
                  timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    recs = {r["drill"]: r for r in records(reports / "quiet")}
    objects = {"gpu-node-loss": "node=gpu-train-01 (TrainingNodeLost)", "switch-uplink": "instance=leaf-1 (FabricLinkDown)"}
    assert set(recs) == set(objects), sorted(recs)
    for drill, named in objects.items():
        rec = recs[drill]
        assert (rec["verdict"], rec["category"]) == ("fail", "not_restored"), (drill, rec["reason"])
        checks = {c["name"]: c for c in rec["details"]["checks"]}
        resolution = checks["alert resolution"]
        assert resolution["verdict"] == "fail" and "went away, but with its data" in resolution["reason"], resolution
        assert named in resolution["reason"], resolution["reason"]
        assert checks["detection"]["verdict"] == "pass"  # it was raised; it was the resolution that lied
        assert [n for n, c in checks.items() if c["verdict"] != "pass"] == ["alert resolution"], (drill, checks)
