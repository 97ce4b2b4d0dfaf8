"""Reverts verified, not assumed (issue 30, class 2): a revert the platform undoes is `revert_failed`.

Each construction makes every judged check of the drill pass — the record was PASS before the guard read its
reverts back — and then undoes the revert the way a real platform does: a node-health agent cordons the lost
node again 15 s after the drill's uncordon (`recordon-agent`), a switch's config agent shuts the uplink again
20 s after `no shutdown` (`port-reshut`), or the far end of the cable is shut (`peer-port-reshut`). The guard
reads each revert back after `safety.revert_settle_s` (60 s of twin time) and again at the end: FAIL
`revert_failed`, naming the object, the value and where it was read; the journal entry stays open, and
`drills revert` verifies the same way (the agent undoes its uncordon too). The other rows of bench/verdicts.yaml
(the taint and GPU modes, the inference drain, `port-reshut` under the drill) run in `make verdicts`.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from bench.verdicts import mismatches, rows
from drills.core.clock import DilatedClock
from drills.faults.switch import uplink as switch
from drills.faults.switch.ends import far_end
from drills.profile.base import parse_duration
from drills.profile.model import SwitchConfig
from drills.twin.fabric import leaf_spine, start_fabric
from tests.e2e.drill_helpers import REPO, drills, node, records

pytestmark = pytest.mark.slow


def _row(defect: str, drill: str):
    return next(r for r in rows(drill) if r.defect == defect)


def _run(row, twin, tmp_path: Path) -> tuple:
    done = drills("run", "-m", row.drill, "-k", row.keyword, "--no-html", "--reports", str(tmp_path), "--run-id",
                  row.defect, "--twin-state", str(twin.state_dir))
    (rec,) = records(tmp_path / row.defect)
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    # before the read-back existed this was a PASS: every judged check passed, only the revert did not hold
    assert rec["details"]["checks"] and all(c["verdict"] == "pass" for c in rec["details"]["checks"])
    return done, rec


def _journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines() if line.strip()]


def test_a_node_cordoned_again_after_the_uncordon_fails_and_drills_revert_verifies_it(twin_factory, tmp_path):
    row = _row("recordon-agent", "gpu_node_loss")
    twin = twin_factory(defects=[row.defect], scale=float(row.scale))
    done, rec = _run(row, twin, tmp_path)
    (revert,) = [r for r in rec["details"]["reverts"] if r["kind"] == "node"]
    settled = revert["readings"][0]
    assert not revert["ok"] and settled["when"] == "settled" and settled["undone"] is False
    lost = revert["target"]
    assert {"object": f"node {lost}", "value": "spec.unschedulable=true", "ok": False} | \
        {"source": settled["observations"][0]["source"]} == settled["observations"][0]
    changed = {c["key"]: c for c in rec["details"]["state_diff"]["changed"]}
    assert changed[f"node {lost}"]["before"]["unschedulable"] is False
    assert changed[f"node {lost}"]["after"]["unschedulable"] is True
    assert node(twin, lost)["spec"]["unschedulable"] is True  # the twin's truth: the agent did cordon it
    journal = _journal(tmp_path / row.defect)
    (entry,) = [op for op in journal if op["op"] == "open" and op["kind"] == "node"]
    assert entry["settle_s"] == 60.0
    assert not any(op["op"] == "close" and op["id"] == entry["id"] for op in journal)  # still open
    assert "still open in the journal: node" in done.stderr

    again = drills("revert", "--reports", str(tmp_path), "--run", row.defect)
    assert again.returncode != 0 and "spec.unschedulable=true" in again.stderr, again.stdout + again.stderr
    journal = _journal(tmp_path / row.defect)
    assert not any(op["op"] == "close" and op["id"] == entry["id"] for op in journal)
    assert sum(op["op"] == "revert_failed" and op["id"] == entry["id"] for op in journal) == 2


def test_the_far_end_shut_after_no_shutdown_fails_reading_both_ends(twin_factory, tmp_path):
    """The leaf's own port is admin up again — only the far end (the spine's port, read over the spine's own
    session) says why the link is down."""
    row = _row("peer-port-reshut", "switch_uplink")
    twin = twin_factory(defects=[row.defect], scale=float(row.scale))
    _done, rec = _run(row, twin, tmp_path)
    (revert,) = [r for r in rec["details"]["reverts"] if r["kind"] == "switch-uplink"]
    near, far = revert["readings"][0]["observations"]
    assert near["object"] == "leaf-1 Ethernet240" and near["value"] == {"admin": "up", "oper": "down"}
    assert far["object"] == "spine-1 Ethernet0" and far["value"] == {"admin": "down", "oper": "down"}
    assert far["source"].startswith("ssh spine-1") and not far["ok"]
    changed = {c["key"] for c in rec["details"]["state_diff"]["changed"]}
    assert {"port leaf-1 Ethernet240", "port spine-1 Ethernet0"} <= changed
    # class 6 on the uplink drill (test_report_mapping.py proves it on the node loss): revert_failed is red wherever
    # an auditor reads it — the Allure result and junit.xml say failed though every step passed
    run_dir = tmp_path / row.defect
    (result,) = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert result["status"] == "failed" and result["statusDetails"]["message"] == rec["reason"], result["status"]
    case = ET.parse(run_dir / "junit.xml").getroot().find("testsuite").find("testcase")
    assert case.find("failure") is not None, ET.tostring(case)


def test_a_port_shut_again_on_its_own_switch_is_read_back_over_ssh(tmp_path):
    """`port-reshut` on a bare fabric (no drill): the revert's own check passes (admin and oper up right after
    `no shutdown`), and the read-back a moment later finds the port shut again."""
    defect = "port-reshut"
    faults = yaml.safe_load((REPO / "drills/twin/defects" / f"{defect}.yaml").read_text())["overlay"]
    faults = faults["fabric"]["port_faults"]  # the defect's own data: 20 s, the near end
    fab = start_fabric(leaf_spine(leaves=1, spines=2, downlinks=1, dialects=("sonic",)), tmp_path / "fabric",
                       clock=DilatedClock(scale=60.0), reshut_after_s=parse_duration(faults["reshut_after"]),
                       reshut_end=faults["reshut_end"])
    try:
        configs = [SwitchConfig.model_validate({**fab.entry(n), "password_env": None}) for n in ("leaf1", "spine1")]
        leaf, iface = configs[0], fab.entry("leaf1")["uplinks"][0]
        undo = {**switch.revert_spec(leaf, iface), "peer": far_end(leaf, iface, configs)}
        record = switch.inject_port(leaf, iface)
        assert switch.revert(None, undo, record.to_dict()) == "reverted"  # the switch's OK, oper up verified
        deadline = time.monotonic() + 5.0
        while fab.fabric.iface_state("leaf1", iface).admin and time.monotonic() < deadline:
            time.sleep(0.05)
        reading = switch.verify(None, undo, record.to_dict())
        assert reading.undone is False
        near, far = reading.observations
        assert near.value == {"admin": "down", "oper": "down"} and not near.ok
        assert far.object.startswith("spine1 ") and far.value == {"admin": "up", "oper": "down"}
    finally:
        fab.stop()
