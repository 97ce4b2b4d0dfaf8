"""Stop conditions (DESIGN §6, drills/core/stop.py): a guard over the steady state that trips during the
fault reverts every fault at once and records the verdict `aborted` with the guard's reading."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.drill_helpers import drills, node, records, schedulable, write_profile

pytestmark = pytest.mark.slow

BUILTIN = Path(__file__).resolve().parents[2] / "drills" / "profile" / "twin.yaml"
LOST = "gpu-train-01"


def _profile(tmp_path: Path, conditions: str) -> str:
    text = BUILTIN.read_text().replace("  dry_run: false", f"  dry_run: false\n  stop_conditions: {conditions}")
    return write_profile(tmp_path / "site.yaml", text)


def test_unschedulable_beyond_the_guard_aborts_and_reverts(twin_factory, tmp_path):
    """No node may be unschedulable here: the cordon trips the guard, the node is uncordoned at once."""
    twin = twin_factory(scale=60.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--profile",
                  _profile(tmp_path, "[{metric: unschedulable_nodes, above: 0}]"), "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "abort")
    assert done.returncode == 1, done.stdout + done.stderr
    (rec,) = records(tmp_path / "r" / "abort")
    assert rec["verdict"] == "aborted" and rec["category"] == "aborted", rec["reason"]
    assert rec["reason"].startswith("aborted: stop condition unschedulable_nodes > 0 tripped (read 1 at ")
    assert rec["details"]["stop_condition"]["metric"] == "unschedulable_nodes"
    assert rec["details"]["reverts"] == [{"kind": "node", "target": LOST, "ok": True, "error": None}]
    assert schedulable(node(twin, LOST))
    journal = [json.loads(line) for line in (tmp_path / "r" / "abort" / "journal.jsonl").read_text().splitlines()]
    at = {(e["op"], e["id"].split("-")[0]): datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
          for e in journal if "at" in e}
    reverted_after_s = (at[("close", "node")] - at[("injected", "node")]).total_seconds()
    assert reverted_after_s < 2.0, reverted_after_s  # at once (a drill that runs its course takes far longer)


def test_a_guard_that_holds_changes_nothing(twin_factory, tmp_path):
    """The same drill under a guard it never reaches passes as before (the guard is not a verdict)."""
    twin = twin_factory(scale=120.0)
    done = drills("run", "-m", "training", "-k", "cordon", "--profile",
                  _profile(tmp_path, "[{metric: not_ready_nodes, above: 3}]"), "--twin-state", str(twin.state_dir),
                  "--no-html", "--reports", str(tmp_path / "r"), "--run-id", "holds")
    (rec,) = records(tmp_path / "r" / "holds")
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
    assert "stop_condition" not in rec["details"]
