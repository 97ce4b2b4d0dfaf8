"""The report end to end: real pytest-bdd runs (allure-pytest-bdd) → two consecutive runs → the
single-file Allure HTML, opened in headless Chromium and read from its rendered DOM."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drills.cli import main as drills_main
from drills.core.errors import DrillError
from drills.report.allure_build import ANALYTICS_MARKERS, allure_bin
from drills.report.browser import chromium_path, dom_text, rendered_dom, report_leaves, screenshot
from drills.report.make import make_report

pytestmark = pytest.mark.slow

FEATURE = """\
@training
Feature: Training survives the loss of a GPU node
  Scenario: Drain a node under a running job
    Given the training job is running on 2 nodes
    Then training recovers within 15 minutes

  Scenario: Resume after a drain with a stale checkpoint
    Given the training job is running on 2 nodes
    Then the job resumes from its latest checkpoint
"""

STEPS = '''\
from pytest_bdd import given, scenarios, then

scenarios("drill.feature")


@given("the training job is running on 2 nodes")
def running():
    pass


@then("training recovers within 15 minutes")
def recovers():
    pass


@then("the job resumes from its latest checkpoint")
def resumes():
    assert False, "resumed from step 4000, latest checkpoint was 6000: resumed from a stale checkpoint"
'''

PASSED, FAILED = "Drain a node under a running job", "Resume after a drain with a stale checkpoint"


def _record(run_id: str, day: int, scenario: str, verdict: str, recovery: float, **extra) -> dict:
    t = f"2025-06-0{day}T02:"
    return {"run_id": run_id, "drill": "gpu-node-loss", "scenario": scenario, "verdict": verdict,
            "recovery_s": recovery, "target_s": 900.0,
            "phases": {"injected": t + "00:00Z", "detected": t + "00:40Z", "rescheduled": t + "01:10Z",
                       "ready": t + "07:00Z", "recovered": t + "08:00Z"},
            "reason": extra.pop("reason", "recovered within the 15m target"), "details": {},
            "started": t + "00:00Z", "finished": t + "10:00Z", "severity": "critical",
            "target": "twin", "defects": extra.pop("defects", []), **extra}


def _drill_run(root: Path, run_id: str, day: int) -> Path:
    """One run directory as the drill engine leaves it: allure-results from a real pytest-bdd run
    and the records of its two scenarios."""
    run_dir = root / run_id
    work = root / f"_suite-{run_id}"
    work.mkdir(parents=True)
    (work / "drill.feature").write_text(FEATURE)
    (work / "test_drill.py").write_text(STEPS)
    (work / "pytest.ini").write_text("[pytest]\nmarkers =\n    training: training drills\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--alluredir={run_dir / 'allure-results'}", str(work)],
                          cwd=work, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one scenario fails by design
    records = [_record(run_id, day, PASSED, "pass", 480.0 + day),
               _record(run_id, day, FAILED, "fail", 480.0, category="stale_checkpoint",
                       reason="resumed from step 4000, latest checkpoint was 6000", defects=["stale-checkpoint"])]
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    try:
        allure_bin()
    except DrillError as err:
        pytest.skip(f"Allure CLI not bootstrapped: {err}")
    root = tmp_path_factory.mktemp("reports")
    first = _drill_run(root, "run-0001", 1)
    make_report(first, reports_root=root)
    second = _drill_run(root, "run-0002", 2)
    (root / "latest").symlink_to(second.name)
    assert drills_main(["report", "--reports", str(root)]) == 0  # RUN defaults to reports/latest
    return first, second


@pytest.fixture(scope="module")
def browser():
    if not chromium_path():
        pytest.skip("chromium not installed: `make bootstrap` as root installs Debian chromium")


def _embedded(html: Path, name: str):
    match = re.search(rf"d\('{re.escape(name)}','([A-Za-z0-9+/=]*)'\)", html.read_text())
    assert match, f"{name} not embedded in {html}"
    return json.loads(base64.b64decode(match.group(1)))


def test_report_is_one_offline_file_without_analytics(runs):
    report = runs[1] / "report"
    html = (report / "index.html").read_text()
    files = sorted(p.name for p in report.iterdir() if p.is_file())
    assert files == (["index.html", "screenshot.png"] if chromium_path() else ["index.html"])  # + the artefact
    assert not [m for m in ANALYTICS_MARKERS if m in html]
    assert not re.search(r'<script[^>]+src="https?://', html)


def test_allure_embeds_analytics_unless_disabled(runs, tmp_path):
    """Proves ALLURE_NO_ANALYTICS is what keeps analytics out (so the check above can fail)."""
    env = {k: v for k, v in os.environ.items() if k != "ALLURE_NO_ANALYTICS"}
    subprocess.run([str(allure_bin()), "generate", "--single-file", "-o", str(tmp_path / "r"),
                    str(runs[1] / "allure-results")], env=env, check=True, capture_output=True, timeout=300)
    assert "googletagmanager" in (tmp_path / "r" / "index.html").read_text()


def test_second_run_has_a_trend_of_two_points(runs):
    html = runs[1] / "report" / "index.html"
    trend = _embedded(html, "history/history-trend.json")
    assert [p["buildOrder"] for p in trend] == [2, 1]
    assert [p["data"]["total"] for p in trend] == [2, 2]
    assert len(_embedded(runs[0] / "report" / "index.html", "history/history-trend.json")) == 1
    assert (runs[1] / "report" / "history" / "history-trend.json").exists()  # for the next run


def test_dom_names_every_scenario_with_its_status(runs, browser):
    html = runs[1] / "report" / "index.html"
    dom = rendered_dom(html, "suites")
    assert report_leaves(dom) == {PASSED: "passed", FAILED: "failed"}
    screenshot(html, runs[1] / "report-screenshot.png")
    assert (runs[1] / "report-screenshot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_overview_shows_trend_environment_and_category(runs, browser):
    text = dom_text(rendered_dom(runs[1] / "report" / "index.html", until=lambda dom: "#1" in dom_text(dom)))
    assert "GPU cluster resilience drills — run-0002" in text
    trend = text[text.index("Trend"):]
    assert "#1" in trend and "#2" in trend
    assert "Target twin" in text and "Defects stale-checkpoint" in text and "Run id run-0002" in text
    assert "Stale checkpoint 1" in text
    assert "Executors gpu-drills run-0002" in text


def test_failed_scenario_shows_category_failed_step_and_reason(runs, browser):
    html = runs[1] / "report" / "index.html"
    leaf = re.search(r'href="#(suites/[0-9a-f]+/[0-9a-f]+/)"[^>]*>(?:(?!</a>).)*' + re.escape(FAILED),
                     rendered_dom(html, "suites"), re.S)
    assert leaf, "failed scenario not in the suites tree"
    text = dom_text(rendered_dom(html, leaf.group(1)))
    assert f"Failed {FAILED}" in text
    assert "Categories: Stale checkpoint" in text
    assert "Then the job resumes from its latest checkpoint" in text
    assert "resumed from step 4000, latest checkpoint was 6000" in text
    assert "measured recovery : 8m 00s" in text and "target : 15m 00s" in text


def test_failed_scenario_gets_a_postmortem_and_the_summary_lists_both(runs):
    run = runs[1]
    note = (run / "postmortem" / "gpu-node-loss-resume-after-a-drain-with-a-stale-checkpoint.md").read_text()
    assert "resumed from step 4000" in note and "checkpoint interval" in note
    summary = (run / "summary.md").read_text()
    assert PASSED in summary and FAILED in summary
    assert "| run-0001 | run-0002 |" in summary
    assert (run / "trend.png").exists()


def test_chinese_report_renders_chinese_labels(runs, browser, tmp_path):
    shutil.copytree(runs[1].parent, tmp_path / "reports", symlinks=True)  # the shared runs stay in English
    run = tmp_path / "reports" / runs[1].name
    make_report(run, lang="zh", shot=False)  # the DOM is read below; the screenshot has its own test
    text = dom_text(rendered_dom(run / "report" / "index.html"))
    assert "GPU 集群韧性演练" in text and "趋势" in text and "从过期检查点恢复" in text
    assert "翻车笔记" in (run / "summary.md").read_text()
