"""The one mapping (drills/core/outcomes.py) from a record's verdict × category to its Allure status, JUnit
result and exit code — table-driven over EVERY pair, with the expectations written here by hand — and the
outputs that read it: junit.xml rewritten from the records (on a file real pytest wrote), the Allure result
enriched from its record, the summary's word and colour, the score, the postmortems, the run's exit code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from itertools import product

import pytest

from drills.core import outcomes
from drills.core.outcomes import TABLE, AllureStatus, JunitResult, exit_code_of, run_exit_code
from drills.core.record import NOT_STARTED, Category, Outcome, Record
from drills.report.enrich import enrich_results
from drills.report.junit import rewrite_junit, junit_key
from drills.report.postmortem import write_postmortems
from drills.report.score import record_credit
from drills.report.summary import write_summary
from drills.report.text import LANGS, labels

P, F, B = "passed", "failed", "broken"
# verdict, category → (Allure status, JUnit result, exit code), by hand. Every other pair is not one a drill
# writes (a category under a verdict it does not imply, pass with a category): broken / error / 1.
EXPECTED = {
    ("pass", None): (P, "pass", 0),
    ("fail", "slo_breach"): (F, "failure", 1),
    ("fail", "diverged"): (F, "failure", 1),
    ("fail", "worker_failed"): (F, "failure", 1),
    ("fail", "not_exported"): (F, "failure", 1),
    ("fail", "gpu_not_isolated"): (F, "failure", 1),
    ("fail", "not_remediated"): (F, "failure", 1),
    ("fail", "unsafe_rollout"): (F, "failure", 1),
    ("fail", "serving_evicted"): (F, "failure", 1),
    ("fail", "not_restored"): (F, "failure", 1),
    ("fail", "not_detected"): (F, "failure", 1),
    ("fail", "alert_storm"): (F, "failure", 1),
    ("fail", "paged"): (F, "failure", 1),
    ("fail", "stale_checkpoint"): (F, "failure", 1),
    ("fail", "socket_fallback"): (F, "failure", 1),
    ("fail", "storage_io"): (F, "failure", 1),
    ("fail", "revert_failed"): (F, "failure", 1),
    ("fail", "check_failed"): (B, "error", 1),
    ("fail", "injector_failed"): (B, "error", 2),
    ("fail", "bad_input"): (B, "error", 2),
    ("fail", "error"): (B, "error", 1),
    ("fail", "interrupted"): (B, "error", 130),
    ("fail", None): (F, "failure", 1),
    ("inconclusive", "no_effect"): (B, "error", 1),
    ("inconclusive", "unclassified_log"): (B, "error", 1),
    ("inconclusive", "not_observed"): (B, "error", 1),
    ("inconclusive", "precondition_not_met"): (B, "error", 2),
    ("inconclusive", None): (B, "error", 1),
    ("aborted", "aborted"): (B, "error", 1),
    ("aborted", None): (B, "error", 1),
}
UNREADABLE = (B, "error", 1)
PAIRS = list(product(Outcome, [None, *Category]))


@pytest.mark.parametrize("verdict,category", PAIRS,
                         ids=[f"{v.value}-{c.value if c else 'none'}" for v, c in PAIRS])
def test_every_verdict_and_category_has_its_allure_status_junit_result_and_exit_code(verdict, category):
    row = outcomes.presentation(verdict, category)
    expected = EXPECTED.get((verdict.value, None if category is None else category.value), UNREADABLE)
    assert (row.allure.value, row.junit.value, row.exit_code) == expected
    assert row.counts_as_pass is (expected[0] == P)


def test_passed_belongs_to_the_verdict_pass_alone_and_skipped_to_no_record():
    assert [key for key, row in TABLE.items() if row.allure is AllureStatus.PASSED] == [(Outcome.PASS, None)]
    assert [key for key, row in TABLE.items() if row.junit is JunitResult.PASS] == [(Outcome.PASS, None)]
    assert [key for key, row in TABLE.items() if row.counts_as_pass] == [(Outcome.PASS, None)]
    assert not any(row.allure is AllureStatus.SKIPPED or row.junit is JunitResult.SKIPPED for row in TABLE.values())


def test_the_table_has_a_row_for_each_category_under_the_verdict_it_implies_and_not_started_is_exit_2():
    assert {c for (v, c) in TABLE if c is not None and v is c.outcome} == set(Category)
    assert {c for (v, c), row in TABLE.items() if row.exit_code == 2} == NOT_STARTED


@pytest.mark.parametrize("lang", LANGS)
def test_every_word_of_the_table_has_a_label(lang):
    words = labels(lang)
    assert all(words.get(row.word) for row in [*TABLE.values(), outcomes.UNREADABLE])
    assert labels("en")["revert_failed"] == "REVERT FAILED"


T0 = "2025-06-01T02:00:00Z"


def record(verdict="pass", category=None, injected=True, reverts=(), nodeid="", scenario="Drain a node",
           reason="recovered in 10m") -> Record:
    return Record.from_json({
        "run_id": "r", "drill": "gpu-node-loss", "scenario": scenario, "verdict": verdict, "category": category,
        "recovery_s": 600.0, "target_s": 900.0, "severity": "critical", "reason": reason, "nodeid": nodeid,
        "phases": {"injected": T0} if injected else {}, "details": {"reverts": list(reverts)}})


REVERT_FAILED = dict(verdict="fail", category="revert_failed",
                     reason="recovered in 10m; revert failed: could not revert node gpu-train-01: 403 Forbidden",
                     reverts=[{"kind": "node", "target": "gpu-train-01", "ok": False, "error": "403 Forbidden"}])


@pytest.mark.parametrize("records,code", [
    ([record()], 0),
    ([record(), record(**REVERT_FAILED)], 1),
    ([record("inconclusive", "no_effect")], 1),
    ([record("inconclusive", "precondition_not_met", injected=False)], 2),
    ([record("fail", "bad_input", injected=False), record("inconclusive", "precondition_not_met", injected=False)], 2),
    ([record("inconclusive", "precondition_not_met", injected=False), record()], 1),
    ([record("fail", "injector_failed", injected=False,  # partly made, then reverted: it started
             reverts=[{"kind": "node", "target": "n", "ok": True, "error": None}])], 1),
    ([record(), record("fail", "interrupted")], 130),
], ids=["pass", "revert-failed", "inconclusive", "not-started", "none-started", "one-started", "partly-made",
        "interrupted"])
def test_the_runs_exit_code_comes_from_its_records_rows(records, code):
    assert run_exit_code(records) == code


def test_a_record_keeps_its_node_id_and_an_older_line_without_one_still_reads():
    rec = record(nodeid="features/training/test_training.py::test_drain[cordon-drain]")
    assert Record.from_json(json.loads(json.dumps(rec.to_json()))) == rec
    old = rec.to_json()
    del old["nodeid"]
    assert Record.from_json(old).nodeid == "" and "nodeid" not in Record.from_json(old).to_json()


def test_junit_written_by_pytest_is_rewritten_from_the_records(tmp_path):
    """Real pytest output: a scenario whose steps passed and whose teardown failed (the revert), a pass, an
    inconclusive drill pytest saw fail, and a test with no record (left as pytest wrote it)."""
    (tmp_path / "test_drills.py").write_text(textwrap.dedent("""\
        import pytest

        @pytest.fixture
        def revert():
            yield
            raise RuntimeError("revert failed")

        def test_reverted_badly(revert):
            pass

        @pytest.mark.parametrize("mode", ["cordon-drain", "taint"])
        def test_drain(mode):
            assert mode == "cordon-drain"

        def test_without_record():
            pass
        """))
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
                    "--rootdir", str(tmp_path), f"--junitxml={junit}", str(tmp_path / "test_drills.py")],
                   cwd=tmp_path, capture_output=True, timeout=120, check=False)
    cases = {c.get("name"): c for c in ET.parse(junit).iter("testcase")}
    assert cases["test_reverted_badly"].find("error") is not None  # pytest: "failed on teardown"
    assert cases["test_drain[taint]"].find("failure") is not None

    records = [record(**REVERT_FAILED, nodeid="test_drills.py::test_reverted_badly"),
               record(nodeid="test_drills.py::test_drain[cordon-drain]"),
               record("inconclusive", "no_effect", nodeid="test_drills.py::test_drain[taint]",
                      reason="inconclusive: the fault had no effect")]
    assert rewrite_junit(junit, records) == 3
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    results = {name: [(child.tag, child.get("type")) for child in case if child.tag in ("failure", "error", "skipped")]
               for name, case in cases.items()}
    assert results == {"test_reverted_badly": [("failure", "revert_failed")], "test_drain[cordon-drain]": [],
                       "test_drain[taint]": [("error", "no_effect")], "test_without_record": []}
    assert cases["test_reverted_badly"].find("failure").get("message") == (
        "REVERT FAILED [revert_failed]: " + REVERT_FAILED["reason"])
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "1", "0")
    before = junit.read_text()
    rewrite_junit(junit, records)
    assert junit.read_text() == before  # idempotent


def test_mangled_node_ids_are_what_pytest_writes():
    assert junit_key("features/training/test_training.py::test_lose[cordon-drain]") == (
        "features.training.test_training", "test_lose[cordon-drain]")


def _allure_result(tmp_path, name: str, nodeid: str, status: str = "passed") -> dict:
    result = {"uuid": name, "name": "Drain a node", "fullName": "training.feature:Drain a node", "status": status,
              "labels": [{"name": "nodeid", "value": nodeid}], "steps": [], "attachments": [], "parameters": []}
    (tmp_path / f"{name}-result.json").write_text(json.dumps(result))
    return result


def test_allure_status_comes_from_the_record_matched_by_node_id(tmp_path):
    """Two results of the same scenario name: each takes its own record's status; pytest's `passed` of a scenario
    whose revert failed becomes `failed`, with the record's reason; a pass stays passed."""
    _allure_result(tmp_path, "a", "t.py::test_drain[one]")
    _allure_result(tmp_path, "b", "t.py::test_drain[two]")
    enrich_results(tmp_path, [record(**REVERT_FAILED, nodeid="t.py::test_drain[one]"),
                              record(nodeid="t.py::test_drain[two]")])
    a, b = (json.loads((tmp_path / f"{n}-result.json").read_text()) for n in "ab")
    assert a["status"] == "failed" and a["statusDetails"]["message"] == REVERT_FAILED["reason"]
    assert a["statusDetails"]["trace"].startswith("drill-category: revert_failed")
    assert b["status"] == "passed" and "statusDetails" not in b
    assert enrich_results(tmp_path, [record(**REVERT_FAILED, nodeid="t.py::test_drain[one]")]) == 0  # idempotent


def test_an_inconclusive_drill_pytest_saw_fail_is_broken_not_failed(tmp_path):
    _allure_result(tmp_path, "c", "t.py::test_drain[one]", status="failed")
    enrich_results(tmp_path, [record("inconclusive", "no_effect", nodeid="t.py::test_drain[one]")])
    assert json.loads((tmp_path / "c-result.json").read_text())["status"] == "broken"


def test_summary_score_and_postmortem_read_the_table(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    bad = record(**REVERT_FAILED)
    (run / "records.jsonl").write_text(json.dumps(bad.to_json()) + "\n")
    md = write_summary(run)["md"].read_text()
    assert f"| REVERT FAILED | {bad.reason} [revert_failed] |" in md
    assert '<td class="fail">REVERT FAILED</td>' in (run / "summary.html").read_text()
    assert record_credit(bad) == 0.0
    (note,) = write_postmortems([bad], run)
    assert "**REVERT FAILED**" in note.read_text()
    assert exit_code_of(bad) == 1
