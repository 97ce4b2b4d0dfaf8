"""Reverts verified, not assumed (issue 30, class 2): a revert the platform undoes is `revert_failed`.

Each construction makes every judged check of the drill pass — the record was PASS before the guard read its
reverts back — and then undoes the revert the way a real platform does: a node-health agent cordons the lost
node again 15 s after the drill's uncordon (`recordon-agent`), a switch's config agent shuts the uplink again
20 s after `no shutdown` (`port-reshut`). The guard reads each revert back after `safety.revert_settle_s` (60 s
of twin time) and again at the end: FAIL `revert_failed`, naming the object, the value and where it was read;
the journal entry stays open, and `drills revert` verifies the same way (the agent undoes its uncordon too).
The other rows (taint and GPU modes, the inference drain, the far end of the link) run in `make verdicts`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.verdicts import mismatches, rows
from tests.e2e.drill_helpers import drills, node, records

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


def test_an_uplink_shut_again_after_no_shutdown_fails_reading_both_ends(twin_factory, tmp_path):
    row = _row("port-reshut", "switch_uplink")
    twin = twin_factory(defects=[row.defect], scale=float(row.scale))
    _done, rec = _run(row, twin, tmp_path)
    (revert,) = [r for r in rec["details"]["reverts"] if r["kind"] == "switch-uplink"]
    near, far = revert["readings"][0]["observations"]
    assert near["value"] == {"admin": "down", "oper": "down"} and not near["ok"]
    assert far["object"] == "spine-1 Ethernet0" and far["value"]["admin"] == "up" and far["source"].startswith("ssh spine-1")
    changed = {c["key"] for c in rec["details"]["state_diff"]["changed"]}
    assert {"port leaf-1 Ethernet240", "port spine-1 Ethernet0"} <= changed
