"""A dry run is never a point of the trend, the runs Allure carries history from, or a score — even when a
precondition left a record in it (run.json says what kind of run it was)."""

from __future__ import annotations

import json
from pathlib import Path

from drills.report.records import RUN_FILE, load_run, previous_run, run_history
from drills.report.summary import write_summary
from tests.unit.test_report_summary import rec, write_run


def _runs(root: Path) -> Path:
    write_run(root, "r1", [rec(started="2025-06-01T02:00:00Z", wall_started="2025-06-01T02:00:00Z")])
    dry = write_run(root, "r2", [rec(verdict="inconclusive", recovery=None, started="2025-06-02T02:00:00Z",
                                     wall_started="2025-06-02T02:00:00Z", reason="precondition not met")])
    (dry / RUN_FILE).write_text(json.dumps({"dry_run": True}))
    real = write_run(root, "r3", [rec(started="2025-06-03T02:00:00Z", wall_started="2025-06-03T02:00:00Z")])
    (real / RUN_FILE).write_text(json.dumps({"dry_run": False}))
    return real


def test_dry_runs_are_not_in_the_history_of_a_real_run(tmp_path):
    real = _runs(tmp_path)
    assert [r.run_id for r in run_history(real)] == ["r1", "r3"]
    assert previous_run(real).run_id == "r1"  # Allure's history comes from the last real run
    assert load_run(tmp_path / "r2").dry_run and not load_run(tmp_path / "r1").dry_run  # no run.json: real


def test_a_dry_run_is_not_scored_and_its_summary_says_why(tmp_path):
    _runs(tmp_path)
    write_summary(tmp_path / "r2")
    md = (tmp_path / "r2" / "summary.md").read_text()
    assert "A dry run injected nothing: it is not scored and not part of the trend." in md
    assert "/ 100" not in md


def test_a_real_run_after_a_dry_run_is_scored(tmp_path):
    real = _runs(tmp_path)
    write_summary(real)
    md = (real / "summary.md").read_text()
    assert "/ 100" in md and "r2" not in md
