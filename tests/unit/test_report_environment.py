"""Environment facts kept per run, and runs ordered by wall time (not by each twin's own clock)."""

from __future__ import annotations

import json
from pathlib import Path

from drills.report.environment import load_environment, save_environment
from drills.report.records import previous_run, run_history


def _run(root: Path, run_id: str, started: str, wall: str | None) -> Path:
    rec = {"run_id": run_id, "drill": "gpu-node-loss", "scenario": "s", "verdict": "pass", "started": started}
    if wall:
        rec["wall_started"] = wall
    (root / run_id).mkdir()
    (root / run_id / "records.jsonl").write_text(json.dumps(rec) + "\n")
    return root / run_id


def test_runs_are_ordered_by_wall_time_when_twin_clocks_disagree(tmp_path):
    # Run a's twin ran longer before its scenario, so its cluster time is later than run b's.
    a = _run(tmp_path, "a", "2026-12-02T12:57:09Z", "2026-12-02T12:46:30.100Z")
    b = _run(tmp_path, "b", "2026-12-02T12:56:51Z", "2026-12-02T12:46:45.200Z")
    assert [r.run_id for r in run_history(b)] == ["a", "b"]
    assert previous_run(b).path == a
    assert previous_run(a) is None


def test_runs_without_wall_stamps_fall_back_to_cluster_time(tmp_path):
    _run(tmp_path, "old", "2025-06-01T02:00:00Z", None)
    new = _run(tmp_path, "new", "2025-06-02T02:00:00Z", None)
    assert previous_run(new).run_id == "old"


def test_the_first_scenarios_facts_are_kept(tmp_path):
    assert save_environment(tmp_path, {"Kubernetes": "v1.32.4", "GPUs": 40}) == tmp_path / "environment.json"
    assert save_environment(tmp_path, {"Kubernetes": "other"}) is None
    assert load_environment(tmp_path) == {"Kubernetes": "v1.32.4", "GPUs": 40}


def test_missing_or_broken_facts_are_empty(tmp_path):
    assert load_environment(tmp_path) == {}
    (tmp_path / "environment.json").write_text("{not json")
    assert load_environment(tmp_path) == {}
