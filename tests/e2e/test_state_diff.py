"""What else the plans could reach is judged, not only shown (issue 30, class 2; red team, wave 8).

The fault's own read-back holds in each construction — the node is uncordoned and untainted, the killed replica is
replaced — while something else the plans could reach changed under the drill: a quarantine agent labels the node
out of the training pool (`quarantine-label-agent`), its device plugin never registers its GPUs again
(`device-plugin-lost`), a deploy sync prunes the serving PDB (`pdb-pruned`). The guard's state diff (before the
first fault, after the reverts settled) recorded each change and the record said PASS. Now a change is FAIL
`not_restored`, naming the object and the fields that changed, in the record, the console and the reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.verdicts import mismatches, rows
from tests.e2e.drill_helpers import drills, records

pytestmark = pytest.mark.slow


def _row(defect: str):
    (row,) = [r for drill in ("gpu_node_loss", "inference") for r in rows(drill) if r.defect == defect]
    return row


def test_a_node_labelled_out_of_its_pool_with_its_gpus_unregistered_is_not_restored(twin_factory, tmp_path: Path):
    label, plugin = _row("quarantine-label-agent"), _row("device-plugin-lost")
    twin = twin_factory(defects=[label.defect, plugin.defect], scale=label.scale)
    done = drills("run", "-m", label.drill, "-k", label.keyword, "--no-html", "--reports", str(tmp_path),
                  "--run-id", "node", "--twin-state", str(twin.state_dir))
    (rec,) = records(tmp_path / "node")
    for row in (label, plugin):
        assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), rec["reason"])
    assert all(c["verdict"] == "pass" for c in rec["details"]["checks"]), rec["details"]["checks"]
    assert all(r["ok"] for r in rec["details"]["reverts"])  # the fault's own read-back held: uncordoned, untainted
    assert rec["reason"].startswith("the platform is not as it was before the fault: node gpu-train-01: ")
    (changed,) = rec["details"]["state_diff"]["changed"]
    assert changed["key"] == "node gpu-train-01" and changed["after"]["gpu_allocatable"] == "0"
    assert "✗ the platform is not as it was before the fault" in done.stdout


def test_a_pdb_pruned_during_the_kill_is_not_restored(twin_factory, tmp_path: Path):
    row = _row("pdb-pruned")
    twin = twin_factory(defects=[row.defect], scale=row.scale)
    done = drills("run", "-m", row.drill, "-k", row.keyword, "--no-html", "--reports", str(tmp_path),
                  "--run-id", "pdb", "--twin-state", str(twin.state_dir))
    (rec,) = records(tmp_path / "pdb")
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), rec["reason"])
    assert all(c["verdict"] == "pass" for c in rec["details"]["checks"]), rec["details"]["checks"]
    after = rec["details"]["state_diff"]["after"]
    assert "pdb ai-platform/llama-7b-infer" in rec["details"]["state_diff"]["before"]
    assert "pdb ai-platform/llama-7b-infer" not in after
