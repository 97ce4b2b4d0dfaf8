"""Pure parts of the drill engine: verdict wording, the catalog, step parsing, the final table."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from drills.core.catalog import UNKNOWN, catalog, drill_for_tags
from drills.core.record import Category, Outcome, Record
from drills.measure.checkpoint import TrainingRecovery
from drills.verdicts.training import judge_left_node, judge_resumed
from drills.faults.node import NodeFaultRecord, revert_spec
from drills.core.runner import _not_started, final_table
from fixtures.steps.common import duration_s
from drills.verdicts.timeline import Timeline

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _recovery(**kw) -> TrainingRecovery:
    values = dict(timeline=Timeline(injected=T0), step_at_fault=6210, latest_checkpoint=6000, resumed_step=None,
                  first_step=None, new_nodes=(), ended=None, job_phase="Running", retry_count=0)
    values.update(kw)
    return TrainingRecovery(**values)


def test_rescheduled_off_the_lost_node_passes():
    rec = _recovery(timeline=Timeline(injected=T0, rescheduled=T0 + timedelta(seconds=4)),
                    new_nodes=("gpu-train-02", "gpu-train-03"))
    verdict = judge_left_node(rec, "gpu-train-01")
    assert verdict.passed and "onto gpu-train-02, gpu-train-03" in verdict.reason


def test_rescheduled_back_onto_the_lost_node_fails():
    rec = _recovery(timeline=Timeline(injected=T0, rescheduled=T0), new_nodes=("gpu-train-01",))
    verdict = judge_left_node(rec, "gpu-train-01")
    assert not verdict.passed and "back onto the lost node" in verdict.reason


def test_a_job_that_ended_never_resumed():
    rec = _recovery(ended="Volcano job phase Failed")
    assert judge_left_node(rec, "n1").reason.startswith("the job never resumed: Volcano job phase Failed")
    verdict = judge_resumed(rec)
    assert not verdict.passed
    assert verdict.reason == "the job never resumed: Volcano job phase Failed (the latest checkpoint was 6000)"


def test_a_hung_job_never_resumed_within_the_wait():
    verdict = judge_resumed(_recovery(waited_s=1080.0))
    assert not verdict.passed
    assert verdict.reason == ("the job never resumed: no worker resumed from a checkpoint within 18m of the fault "
                              "(Volcano job phase Running, 0 retries); the latest checkpoint was 6000")


def test_stale_checkpoint_keeps_the_timeline_wording():
    verdict = judge_resumed(_recovery(resumed_step=4000))
    assert not verdict.passed and "stale checkpoint" in verdict.reason


def test_catalog_finds_the_drill_by_tag_and_maps_checks_to_categories():
    info = drill_for_tags({"training", "gpu_node_loss", "slo_15m"})
    assert info is catalog()["gpu-node-loss"]
    assert info.category("lost steps") == "stale_checkpoint" and info.category("recovery") == "slo_breach"
    assert drill_for_tags({"nothing"}) is UNKNOWN


@pytest.mark.parametrize("text, seconds", [("15 minutes", 900), ("1 minute", 60), ("90 seconds", 90),
                                           ("1.5 hours", 5400)])
def test_duration_from_gherkin(text, seconds):
    assert duration_s(text) == seconds


def test_duration_rejects_other_words():
    with pytest.raises(ValueError, match="not a duration"):
        duration_s("a while")


def test_node_fault_record_is_json_ready():
    record = NodeFaultRecord("n1", "cordon-drain", "2026-01-01T00:00:00Z", cordoned=True, evicted=("ns/p",))
    assert record.to_dict()["evicted"] == ["ns/p"] and record.to_dict()["cordoned"] is True


def test_revert_spec_only_uncordons_what_we_cordon():
    class Twin:
        def describe(self):
            return {"name": "twin"}

    from drills.faults.node import NodeFaultSpec

    already = {"spec": {"unschedulable": True}}
    assert revert_spec(Twin(), NodeFaultSpec("n1", "cordon-drain"), already)["uncordon"] is False
    assert revert_spec(Twin(), NodeFaultSpec("n1", "cordon-drain"), {"spec": {}})["uncordon"] is True
    spec = revert_spec(Twin(), NodeFaultSpec("n1", "taint-noexecute"), {"spec": {}})
    assert spec["taint"]["effect"] == "NoExecute" and spec["uncordon"] is False


def test_runs_that_never_injected_are_bad_input():
    recs = [Record(drill="d", verdict=Outcome.FAIL, category=Category.INJECTOR_FAILED, reason="node x not found"),
            Record(drill="d", verdict=Outcome.FAIL, category=Category.STALE_CHECKPOINT, phases={"injected": T0},
                   reason="lost steps"),
            Record(drill="d", verdict=Outcome.INCONCLUSIVE, category=Category.PRECONDITION_NOT_MET,
                   reason="precondition not met: 1 node")]
    assert _not_started(recs) == ["node x not found", "precondition not met: 1 node"]


def test_final_table_has_one_row_per_record():
    from rich.console import Console

    table = final_table([Record.from_json({"drill": "gpu-node-loss", "scenario": "s", "target_s": 900,
                                           "recovery_s": 61.0, "verdict": "pass"})])
    console = Console(width=120, record=True)
    console.print(table)
    text = console.export_text()
    assert "gpu-node-loss" in text and "15m" in text and "1m1s" in text and "PASS" in text


def test_a_selection_pytest_cannot_parse_is_one_line_and_creates_no_run(tmp_path, capsys):
    from drills.cli import main

    assert main(["run", "-k", "one uplink", "--reports", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-k 'one uplink' is not a selection expression" in err[0], err
    assert not (tmp_path / "reports").exists()
