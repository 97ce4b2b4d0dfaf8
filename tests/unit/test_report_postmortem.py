"""Postmortem notes, timeline charts, Allure result enrichment and the Allure config files."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from drills.core.errors import DrillError
from drills.core.record import Category, Outcome, Record
from drills.report.allure_build import (
    allure_bin,
    extract_history,
    write_categories,
    write_environment,
    write_executor,
)
from drills.report.enrich import category_trace_line, enrich_results
from drills.report.postmortem import likely_cause, postmortem_markdown, slowest_gap, write_postmortems
from drills.report.timeline_chart import timeline_png

PNG = b"\x89PNG\r\n\x1a\n"


def failed(drill="gpu-node-loss", scenario="Drain a node", category=None, reason="over the target",
           ready="02:09:00", **extra) -> Record:
    record = {"run_id": "run-7", "drill": drill, "scenario": scenario, "verdict": "fail",
              "recovery_s": 700.0, "target_s": 300.0, "severity": "critical", "target": "twin",
              "phases": {"injected": "2025-06-01T02:00:00Z", "detected": "2025-06-01T02:00:30Z",
                         "rescheduled": "2025-06-01T02:01:00Z", "ready": f"2025-06-01T{ready}Z",
                         "recovered": "2025-06-01T02:11:40Z"},
              "reason": reason, "details": {"steps_lost": 2000}, "defects": ["slow-image-pull"], **extra}
    if category:
        record["category"] = category
    return Record.from_json(record)


@pytest.mark.parametrize("record, expect", [
    (failed(category="socket_fallback", reason="NCCL used NET/Socket"), r"PFC.*NCCL_IB_HCA"),
    (failed(category="stale_checkpoint"), r"checkpoint interval"),
    (failed(drill="inference-pod-kill", category="slo_breach", details={"slowest_phase": {"phase": "image pull"}}),
     r"Pre-pull"),  # the slowest startup phase, a measured fact, beats the drill's usual cause
    (failed(category="slo_breach", ready="02:01:30", details={"slowest_phase": {"phase": "model load"}}),
     r"local NVMe"),
    (failed(drill="inference-pod-kill", category="slo_breach"), r"local NVMe"),
    (failed(category="slo_breach"), r"Pre-pull"),  # slowest gap ends at ready
    (failed(category="slo_breach", ready="02:01:30"), r"Find the longest gap"),  # slowest ends at recovered
    (failed(drill="storage-saturation", category="storage_io"), r"rated bandwidth"),
    # the first failed check, a typed name: saves the log reported that the store never completed (red team wave 5)
    (failed(drill="storage-saturation", category="storage_io",
            details={"checks": [{"name": "training checkpoint save", "verdict": "pass"},
                                {"name": "saves on the store", "verdict": "fail"}]}), r"write-back caching"),
    (failed(category="injector_failed"), r"allowlist"),
    (failed(category="revert_failed"), r"drills revert"),
    (failed(category="precondition_not_met"), r"Given steps"),
    (failed(category="no_effect"), r"really carries the workload"),
    (failed(category="bad_input"), r"allowlist"),
    (failed(category="interrupted"), r"drills revert"),
    (failed(category="error"), r"--debug"),
    (failed(reason="something nobody has seen"), r"Read the failing check"),
])
def test_likely_cause_is_chosen_by_category_drill_and_timeline(record, expect):
    cause, steps = likely_cause(record)
    assert cause and steps
    assert re.search(expect, " ".join(steps), re.S)


def test_rewording_a_reason_never_changes_the_likely_cause():
    """causes.yaml matches structured facts: the same record with another sentence gets the same advice."""
    for category in Category:
        a = failed(category=category.value, reason="pulling image took 8m: stale checkpoint over NET/Socket")
        b = failed(category=category.value, reason="something else entirely")
        assert likely_cause(a) == likely_cause(b)


def test_slowest_gap_names_the_phase_that_ended_it():
    assert slowest_gap(failed()) == ("ready", 480.0)
    assert slowest_gap(Record.from_json({"drill": "d", "verdict": "fail",
                                         "phases": {"injected": "2025-06-01T02:00:00Z"}})) is None


def test_note_has_symptom_timeline_check_cause_and_next_steps(tmp_path):
    records = [failed(category="stale_checkpoint", reason="resumed from step 4000, latest checkpoint was 6000"),
               replace(failed(), verdict=Outcome.PASS)]
    paths = write_postmortems(records, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == ["postmortem/gpu-node-loss-drain-a-node.md"]
    note = paths[0].read_text()
    for heading in ("## Symptom", "## Timeline", "## Failing check", "## Likely cause", "## What to do next"):
        assert heading in note
    assert "**FAIL** — Measured recovery 11m 40s / Target 5m 00s — resumed from step 4000" in note
    assert "| ready | 2025-06-01T02:09:00.000Z | 9m 00s |" in note  # Clock.iso
    assert "longest gap: → `ready` (8m 00s)" in note
    assert "> resumed from step 4000, latest checkpoint was 6000" in note
    assert "Stale checkpoint (`stale_checkpoint`)" in note
    assert '"steps_lost": 2000' in note and "`slow-image-pull`" in note
    assert re.search(r"^1\. Compare the checkpoint interval", note, re.M)


def test_note_in_chinese():
    note = postmortem_markdown(failed(category="socket_fallback"), lang="zh")
    assert note.startswith("# 翻车笔记: gpu-node-loss")
    for heading in ("## 现象", "## 时间线", "## 失败的检查", "## 可能原因", "## 下一步"):
        assert heading in note
    assert "NCCL 回退到 Socket" in note and "PFC 与 ECN" in note


def test_timeline_png_with_and_without_overlay(tmp_path):
    out = timeline_png(failed(), tmp_path / "a.png", overlay=[(-30, 100.0), (0, 0.0), (600, 90.0)],
                       overlay_label="samples/s")
    assert out.read_bytes()[:8] == PNG
    assert timeline_png(Record(drill="x", verdict=Outcome.PASS), tmp_path / "b.png").read_bytes()[:8] == PNG
    assert timeline_png(failed(), tmp_path / "c.png", lang="zh").read_bytes()[:8] == PNG


def _result(name: str, status: str, message: str = "") -> dict:
    result = {"name": name, "status": status, "uuid": name, "labels": [{"name": "feature", "value": "F"}],
              "fullName": f"features/gpu_node_loss.feature:{name}"}
    if message:
        result["statusDetails"] = {"message": message}
    return result


def test_enrich_adds_parameters_attachments_severity_and_category_once(tmp_path):
    (tmp_path / "a-result.json").write_text(json.dumps(_result("Drain a node", "failed", "AssertionError: x")))
    (tmp_path / "b-result.json").write_text(json.dumps(_result("Other", "passed")))
    record = failed(category="stale_checkpoint", details={"logs": ["line 1", "line 2"]})
    assert enrich_results(tmp_path, [record]) == 1
    assert enrich_results(tmp_path, [record]) == 0  # idempotent
    assert enrich_results(tmp_path, [failed(scenario="not in the results")]) == 0
    result = json.loads((tmp_path / "a-result.json").read_text())
    assert {p["name"]: p["value"] for p in result["parameters"]} == {
        "measured recovery": "11m 40s", "target": "5m 00s", "verdict": "fail"}
    assert {"name": "severity", "value": "critical"} in result["labels"]
    assert {"name": "category", "value": "stale_checkpoint"} in result["labels"]
    assert result["statusDetails"]["message"] == "AssertionError: x"  # the sentence is left as it was
    assert result["statusDetails"]["trace"] == "drill-category: stale_checkpoint"
    kinds = {a["name"]: a for a in result["attachments"]}
    assert set(kinds) == {"drill record (JSON)", "timeline", "logs excerpt"}
    assert json.loads((tmp_path / kinds["drill record (JSON)"]["source"]).read_text())["drill"] == "gpu-node-loss"
    assert (tmp_path / kinds["timeline"]["source"]).read_bytes()[:8] == PNG
    assert (tmp_path / kinds["logs excerpt"]["source"]).read_text() == "line 1\nline 2"
    assert "attachments" not in json.loads((tmp_path / "b-result.json").read_text())


def test_enrich_names_its_parameters_and_attachments_in_chinese(tmp_path):
    """`drills run --lang zh`: the Allure result's parameters, verdict word and attachments read in Chinese."""
    (tmp_path / "a-result.json").write_text(json.dumps(_result("Drain a node", "failed", "AssertionError: x")))
    record = failed(category="stale_checkpoint", details={"logs": ["line 1"]})
    assert enrich_results(tmp_path, [record], lang="zh") == 1
    result = json.loads((tmp_path / "a-result.json").read_text())
    assert {p["name"]: p["value"] for p in result["parameters"]} == {"实测恢复时间": "11m 40s", "目标": "5m 00s",
                                                                     "结论": "失败"}
    assert {a["name"] for a in result["attachments"]} == {"drill record (JSON)", "时间线", "日志摘录"}


def test_categories_json_has_one_category_per_type_matching_only_the_trace_line(tmp_path):
    cats = json.loads(write_categories(tmp_path).read_text())
    assert len(cats) == len(Category) and all("messageRegex" not in c for c in cats)
    by_name = {c["name"]: c for c in cats}
    stale = by_name["Stale checkpoint"]
    # Allure matches a traceRegex against the whole trace, with DOTALL (CategoriesPlugin.matches).
    matches = lambda cat, trace: re.fullmatch(cat["traceRegex"], trace, re.S) is not None  # noqa: E731
    line = category_trace_line(Category.STALE_CHECKPOINT)
    assert matches(stale, line) and matches(stale, line + "\nTraceback (most recent call last):\n  …")
    assert not matches(stale, "resumed from a stale checkpoint")  # the words of a reason never match
    assert not matches(by_name["SLO breach"], line)
    assert [c for c in cats if matches(c, category_trace_line(Category.NO_EFFECT))] == \
        [by_name["Inconclusive - the fault had no effect"]]
    assert json.loads(write_categories(tmp_path, "zh").read_text())[1]["name"] == "从过期检查点恢复"


def test_enrich_keeps_a_trace_below_the_category_line(tmp_path):
    result = _result("Drain a node", "broken", "CheckFailed: precondition not met")
    result["statusDetails"]["trace"] = "Traceback …"
    (tmp_path / "a-result.json").write_text(json.dumps(result))
    enrich_results(tmp_path, [failed(category="precondition_not_met")])
    trace = json.loads((tmp_path / "a-result.json").read_text())["statusDetails"]["trace"]
    assert trace == "drill-category: precondition_not_met\nTraceback …"


def test_environment_and_executor_files(tmp_path):
    props = write_environment(tmp_path, {"Target": "twin", "Run id": "r-1", "GPUs": 32, "Skipped": None,
                                         "Defects": ["a", "b"], "Profile": "小型"}).read_text()
    assert props.splitlines() == ["Target=twin", "Run\\ id=r-1", "GPUs=32", "Defects=a, b",
                                  "Profile=\\u5c0f\\u578b"]
    executor = json.loads(write_executor(tmp_path, "r-1", "Drills — r-1", build_order=3).read_text())
    assert executor == {"name": "gpu-drills", "type": "gpu-drills", "buildName": "r-1", "buildOrder": 3,
                        "reportName": "Drills — r-1"}


def test_history_is_extracted_from_a_single_file_report(tmp_path):
    html = tmp_path / "index.html"
    html.write_text("<script>d('history/history-trend.json','W3siZGF0YSI6e319XQ=='),"
                    "d('data/suites.json','e30='),</script>")
    files = extract_history(html, tmp_path / "history")
    assert [f.name for f in files] == ["history-trend.json"]
    assert json.loads(files[0].read_text()) == [{"data": {}}]


def test_missing_allure_is_one_line_pointing_at_make_drill(monkeypatch, tmp_path):
    monkeypatch.setenv("GPU_DRILLS_ALLURE", str(tmp_path / "none"))
    with pytest.raises(DrillError, match=r"Allure CLI not found at .*run `make drill`"):
        allure_bin()
    monkeypatch.setenv("GPU_DRILLS_ALLURE", str(Path(__file__)))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(DrillError, match=r"Java \(17\+\) not found"):
        allure_bin()
