"""The drills in zh-CN (`drills run --lang zh`, features/zh/) reach the verdicts they reach in English.

Kept cheap for `make test`: one scenario per kind on one shared healthy twin, in Chinese, each record holding
the targets, the fault and the PASS its English scenario gets there (the English smoke and integrity tests run
those); and one defect on a shared twin in both languages, the two records compared as bench/lang_parity.py
compares them — which runs every construction of bench/verdicts.yaml and every healthy scenario in both.
"""

from __future__ import annotations

import json

import pytest

from bench.lang_parity import differences, zh_args
from bench.verdicts import mismatches, rows
from drills.core.languages import counterparts, keyword_for
from drills.core.selection import candidates, drill_feature_files
from drills.twin.launcher import start_twin
from fixtures.targets import CONTRACTS, feature_value
from tests.e2e.drill_helpers import REPO, drills, records

pytestmark = pytest.mark.slow

FEATURES = REPO / "features"
SCALE = 600.0
# One scenario per kind, by its English name: its zh-CN counterpart is run.
REPRESENTATIVES = (
    "test_lose_a_gpu_node_under_the_finetuning_job_by_fault[cordon-drain]",
    "test_the_inference_deployment_loses_killed_under_load[1 of its 2 replicas-InferenceReplicasUnavailable]",
    "test_drop_one_uplink_of_the_leaf_carrying_the_finetuning_job",
    "test_saturate_the_checkpoint_store_with_fio_under_the_finetuning_job",
)
DEFECT = next(r for r in rows("network") if r.defect == "idle-uplink")  # stops at its first check: cheap


def _twin(tmp_path_factory, name: str, defects=()):
    return start_twin(tmp_path_factory.mktemp(name), profile="minimal", defects=list(defects), scale=SCALE)


@pytest.fixture(scope="module")
def healthy_zh(tmp_path_factory):
    """The four representatives in zh-CN, one after another on one healthy twin."""
    twin = _twin(tmp_path_factory, "healthy")
    reports = tmp_path_factory.mktemp("reports")
    pairs = counterparts(FEATURES, "zh")
    try:
        done = drills("run", "--lang", "zh", "-k", keyword_for([pairs[n] for n in REPRESENTATIVES]),
                      "--twin-state", str(twin.state_dir), "--reports", str(reports), "--run-id", "zh", "--no-html",
                      timeout=400)
    finally:
        twin.stop()
    return done, records(reports / "zh"), reports / "zh"


def test_each_kind_passes_in_chinese_with_its_english_targets_and_fault(healthy_zh):
    done, recs, run_dir = healthy_zh
    assert done.returncode == 0, done.stdout + done.stderr
    pairs = counterparts(FEATURES, "zh")
    by_name = {r["nodeid"].split("::", 1)[1]: r for r in recs}
    assert set(by_name) == {pairs[n] for n in REPRESENTATIVES}, sorted(by_name)
    steps = _english_steps()
    for english in REPRESENTATIVES:
        rec = by_name[pairs[english]]
        assert rec["verdict"] == "pass" and rec["category"] is None, (english, rec["reason"])
        assert all(c["verdict"] == "pass" for c in rec["details"]["checks"]), (english, rec["details"]["checks"])
        assert rec["nodeid"].startswith("features/zh/test_drills_zh.py::")
        # the numbers the English scenario states are the targets the Chinese one was judged against
        for key, target in rec["details"]["targets"].items():
            assert target["value"] == feature_value(steps[english], CONTRACTS[key]), (english, key, target)
    assert by_name[pairs[REPRESENTATIVES[0]]]["details"]["fault_mode"] == "cordon-drain"
    kill = next(f for f in by_name[pairs[REPRESENTATIVES[1]]]["details"]["faults"] if f["kind"] == "pods")
    assert len(kill["pods"]) == 1 and kill["running_before"] == 2  # "2个副本中的1个" is "1 of its 2 replicas"
    # the console speaks Chinese: the table, its verdict words, the report line
    assert "演练结果" in done.stdout and "通过" in done.stdout and "报告：" in done.stdout, done.stdout
    assert "▶ gpu-node-loss：以 cordon-drain 方式丢失微调作业的一个 GPU 节点（目标 15m）" in done.stdout, done.stdout
    # and so does Allure: the results' names are the Chinese scenarios', their epics Chinese
    results = [json.loads(p.read_text(encoding="utf-8")) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert {r["name"] for r in results} == {r["scenario"] for r in recs}
    assert {label["value"] for r in results for label in r["labels"] if label["name"] == "epic"} == {
        "训练韧性", "推理韧性", "网络韧性", "存储韧性"}


def test_a_defect_gets_the_same_record_in_both_languages(tmp_path_factory):
    """One defect twin, the English then the Chinese run of the same scenario on it: their records agree."""
    twin = _twin(tmp_path_factory, "defect", [DEFECT.defect])
    reports = tmp_path_factory.mktemp("reports")
    try:
        en = drills("run", "-m", DEFECT.drill, "-k", DEFECT.keyword, "--twin-state", str(twin.state_dir),
                    "--reports", str(reports), "--run-id", "en", "--no-html")
        zh = drills("run", *zh_args(DEFECT.drill, DEFECT.keyword), "--twin-state", str(twin.state_dir),
                    "--reports", str(reports), "--run-id", "zh", "--no-html")
    finally:
        twin.stop()
    (en_rec,), (zh_rec,) = records(reports / "en"), records(reports / "zh")
    assert not mismatches(DEFECT, en.returncode, en_rec), en.stdout + en.stderr
    assert not differences(en_rec, zh_rec, en.returncode, zh.returncode), (en_rec, zh_rec)
    assert zh_rec["scenario"] == "关闭承载微调作业的叶交换机的一条上行链路"
    (note,) = (reports / "zh" / "postmortem").glob("*.md")  # the postmortem in Chinese: headings, category
    postmortem = note.read_text(encoding="utf-8")
    assert "翻车笔记" in postmortem and "无法判定：故障未产生影响 (`no_effect`)" in postmortem, postmortem
    assert "无法判定" in zh.stdout, zh.stdout


def _english_steps() -> dict[str, tuple[str, ...]]:
    """English test name → its rendered steps' texts (the files `candidates` names them from, in its order: not the
    acceptance runbook, not the zh tree)."""
    from pytest_bdd.feature import get_features

    out = {}
    names = iter(c.name for c in candidates(FEATURES))
    for feature in get_features(drill_feature_files(FEATURES)):
        for template in feature.scenarios.values():
            contexts = [ctx for ex in template.examples for ctx in ex.as_contexts()] or [{}]
            for ctx in contexts:
                out[next(names)] = tuple(s.name for s in template.render(ctx).steps)
    return out
