"""Chinese reports: the Environment widget's keys and the postmortem's timeline line are translated."""

from __future__ import annotations

from drills.core.record import Record
from drills.report.allure_build import write_environment
from drills.report.postmortem import postmortem_markdown
from drills.report.text import environment_labels

_FACTS = {"Target profile": "twin", "Target": "twin", "Kubernetes": "v1.32.0", "Nodes": 6, "GPUs": 32,
          "Defects": "none", "Run id": "r1", "Framework": "gpu-drills 0.1", "Custom": "x"}


def test_environment_keys_in_chinese_keep_their_order_and_values():
    zh = environment_labels(_FACTS, "zh")
    assert list(zh) == ["目标配置", "目标集群", "Kubernetes 版本", "节点数", "GPU 数", "注入的缺陷", "运行 ID",
                        "框架版本", "Custom"]
    assert zh["节点数"] == 6 and zh["注入的缺陷"] == "无" and zh["Custom"] == "x"


def test_environment_keys_in_english_are_unchanged():
    assert environment_labels(_FACTS, "en") == _FACTS


def test_chinese_keys_reach_environment_properties_escaped(tmp_path):
    text = write_environment(tmp_path, environment_labels({"Nodes": 6}, "zh")).read_text()
    assert text.strip() == "\\u8282\\u70b9\\u6570=6"


def test_the_postmortem_longest_gap_line_is_chinese():
    record = Record.from_json({
        "drill": "gpu-node-loss", "scenario": "s", "verdict": "fail", "recovery_s": 700.0, "target_s": 300.0,
        "reason": "slow", "phases": {"injected": "2026-01-01T00:00:00Z", "detected": "2026-01-01T00:00:10Z",
                                     "recovered": "2026-01-01T00:11:40Z"}})
    note = postmortem_markdown(record, "zh")
    assert "最长间隔: → `recovered`" in note and "longest gap" not in note
    assert "longest gap: → `recovered`" in postmortem_markdown(record, "en")
