"""Score, records history and the compliance summary, from literal records."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from drills.core.errors import DrillError
from drills.core.record import Category, Record
from drills.report.records import load_records, previous_run, run_history
from drills.report.score import FORMULA, record_credit, resilience_score
from drills.report.summary import write_summary
from drills.report.text import categories, category_name, fmt_seconds, labels, slug


def typed(**kw) -> Record:
    return Record.from_json(rec(**kw))


def rec(drill="gpu-node-loss", scenario="Drain a node", verdict="pass", recovery=600.0, target=900.0,
        severity="critical", started="2025-06-01T02:00:00Z", **extra) -> dict:
    return {"run_id": extra.pop("run_id", "r"), "drill": drill, "scenario": scenario, "verdict": verdict,
            "recovery_s": recovery, "target_s": target, "severity": severity, "started": started,
            "phases": {"injected": "2025-06-01T02:00:00Z", "detected": "2025-06-01T02:00:30Z",
                       "ready": "2025-06-01T02:09:00Z", "recovered": "2025-06-01T02:10:00Z"},
            "reason": extra.pop("reason", "recovered in 10m"), "target": "twin", "defects": [], **extra}


def write_run(root: Path, run_id: str, records: list[dict]) -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    (run / "records.jsonl").write_text("".join(json.dumps({**r, "run_id": run_id}) + "\n" for r in records))
    return run


def test_score_is_severity_weighted_and_scaled_by_recovery_margin():
    at_target = typed(recovery=900.0)
    instant = typed(recovery=0.0)
    assert resilience_score([at_target]) == 75.0
    assert resilience_score([instant]) == 100.0
    assert record_credit(typed(recovery=450.0)) == pytest.approx(0.875)
    # critical (3) instant pass + normal (1) failure → 3/4.
    assert resilience_score([instant, typed(verdict="fail", severity="normal")]) == 75.0
    assert resilience_score([instant, typed(verdict="inconclusive", severity="normal")]) == 75.0  # proved nothing
    assert resilience_score([typed(recovery=2000.0)]) == 75.0  # a pass over target still earns the floor
    assert resilience_score([typed(recovery=None), typed(target=None)]) == 100.0
    assert resilience_score([]) is None
    assert "Σ" in FORMULA and "critical 3" in FORMULA


def test_formats_and_categories():
    assert fmt_seconds(None) == "—"
    assert fmt_seconds(42.15) == "42.1s"
    assert fmt_seconds(312.4) == "5m 12s"
    assert fmt_seconds(3725) == "1h 02m 05s"
    assert slug("Drain a node, under load!") == "drain-a-node-under-load"
    assert slug("节点 掉线") == "节点-掉线"
    # A record's category is what it carries; its reason's words never name one.
    assert typed(verdict="fail", category="socket_fallback").category == "socket_fallback"
    assert typed(verdict="fail", reason="resumed from a stale checkpoint").category is None
    assert category_name(typed(verdict="fail", category="socket_fallback").category) == \
        "NCCL socket fallback (`socket_fallback`)"
    assert category_name(None) == "—"
    assert all(set(c) == {"id", "name", "name_zh", "statuses"} for c in categories())  # no regexes
    assert [c["id"] for c in categories()] == [c.value for c in Category]  # one name per typed category
    with pytest.raises(DrillError, match="unknown report language"):
        labels("fr")


def test_records_errors_name_file_and_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(rec()) + "\n{not json\n")
    with pytest.raises(DrillError, match=r"records.jsonl:2: not a JSON record"):
        load_records(path)
    path.write_text('{"scenario": "x"}\n')
    with pytest.raises(DrillError, match="needs at least `drill` and `verdict`"):
        load_records(path)
    path.write_text(json.dumps(rec(verdict="passed")) + "\n")
    with pytest.raises(DrillError, match=r"records.jsonl:1: `verdict` is 'passed', not one of pass, fail, inconclusive"):
        load_records(path)
    path.write_text(json.dumps(rec(verdict="fail", category="flaky")) + "\n")
    with pytest.raises(DrillError, match=r"records.jsonl:1: `category` is 'flaky'"):
        load_records(path)


def test_history_is_ordered_by_start_and_stops_at_this_run(tmp_path):
    # Names sort the other way round from the start times: order must follow `started`.
    b = write_run(tmp_path, "b-first", [rec(started="2025-06-01T00:00:00Z")])
    a = write_run(tmp_path, "a-second", [rec(started="2025-06-02T00:00:00Z")])
    c = write_run(tmp_path, "c-third", [rec(started="2025-06-03T00:00:00Z")])
    (tmp_path / "latest").symlink_to(c.name)
    (tmp_path / "twin").mkdir()  # not a run
    assert [r.run_id for r in run_history(c)] == ["b-first", "a-second", "c-third"]
    assert [r.run_id for r in run_history(a)] == ["b-first", "a-second"]
    assert [r.run_id for r in run_history(c, last=2)] == ["a-second", "c-third"]
    assert previous_run(b) is None and previous_run(c).path == a


def test_phase_offsets_are_seconds_since_injection_in_phase_order():
    record = typed(phases={"recovered": "2025-06-01T02:10:00+00:00", "injected": "2025-06-01T02:00:00Z",
                           "detected": "2025-06-01T02:00:30Z", "custom": "2025-06-01T02:11:00Z"})
    assert record.offsets == {"injected": 0.0, "detected": 30.0, "recovered": 600.0}  # unknown phases are dropped
    assert list(record.offsets) == ["injected", "detected", "recovered"]
    assert typed(phases={}).offsets == {}
    assert typed(phases={"recovered": "2025-06-01T02:10:00Z"}).offsets == {}  # nothing injected


def test_summary_lists_every_drill_runs_side_by_side_and_score(tmp_path):
    write_run(tmp_path, "run-1", [rec(started="2025-06-01T00:00:00Z", recovery=500.0),
                                  rec(drill="inference-pod-kill", scenario="Kill a pod", target=120.0,
                                      recovery=60.0, severity="normal", started="2025-06-01T00:00:00Z")])
    run2 = write_run(tmp_path, "run-2", [
        rec(started="2025-06-02T00:00:00Z", recovery=900.0),
        rec(drill="inference-pod-kill", scenario="Kill a pod", target=120.0, recovery=200.0, verdict="fail",
            severity="normal", started="2025-06-02T00:00:00Z", reason="ready after 200s, over the target",
            category="slo_breach"),
        rec(drill="switch-uplink", scenario="Drop an uplink", target=900.0, recovery=None, verdict="inconclusive",
            severity="normal", started="2025-06-02T00:00:00Z", category="no_effect",
            reason="inconclusive: the uplink drop had no observable effect, so recovery was not tested")])
    paths = write_summary(run2)
    md = paths["md"].read_text()
    assert "| gpu-node-loss | Drain a node | critical | 15m 00s | 15m 00s | PASS | recovered in 10m |" in md
    assert "| inference-pod-kill | Kill a pod | normal | 2m 00s | 3m 20s | FAIL | ready after 200s, over the target [slo_breach] |" in md
    assert "| Drill | Scenario | run-1 | run-2 |" in md
    assert "| gpu-node-loss | Drain a node | PASS 8m 20s | PASS 15m 00s |" in md
    assert ("| switch-uplink | Drop an uplink | normal | 15m 00s | — | INCONCLUSIVE | inconclusive: the uplink drop "
            "had no observable effect, so recovery was not tested [no_effect] |") in md
    assert "**45.0 / 100**" in md  # (3 × 0.75 + 1 × 0 + 1 × 0) / 5
    assert "[switch-uplink — Drop an uplink](postmortem/switch-uplink-drop-an-uplink.md)" in md
    assert FORMULA in md
    assert "[inference-pod-kill — Kill a pod](postmortem/inference-pod-kill-kill-a-pod.md)" in md
    assert paths["trend"].read_bytes()[:4] == b"\x89PNG"


def test_summary_html_is_self_contained(tmp_path):
    run = write_run(tmp_path, "run-1", [rec()])
    page = write_summary(run)["html"].read_text()
    assert "data:image/png;base64," in page
    assert not re.search(r"<script|<link|(src|href)=\"https?:", page)
    assert '<td class="pass">PASS</td>' in page
    assert "No failed or inconclusive drills in this run." in page


def test_summary_in_chinese(tmp_path):
    run = write_run(tmp_path, "run-1", [rec(verdict="fail", category="stale_checkpoint")])
    md = write_summary(run, lang="zh")["md"].read_text()
    for heading in ("演练合规报告", "韧性评分", "最近几次运行对比", "恢复时间趋势", "翻车笔记"):
        assert heading in md
    assert "| 失败 |" in md


def test_summary_of_a_run_without_records_still_renders(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    md = write_summary(run)["md"].read_text()
    assert "**—**" in md and os.path.exists(run / "trend.png")
