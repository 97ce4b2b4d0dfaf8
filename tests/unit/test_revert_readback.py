"""Reverts verified, not assumed: the read-back's verdict (drills/faults/readback.py), the state diff
(drills/faults/statediff.py), its report text (drills/report/enrich.py) and the journal's settle period."""

from __future__ import annotations

import time

from drills.core.clock import DilatedClock
from drills.core.journal import Journal
from drills.faults import DEFAULT_SETTLE_S, KINDS, fault_module
from drills.faults.readback import Observation, Reading, read, wait_until_clock
from drills.faults.statediff import diff, state_diff
from drills.profile.model import parse_profile
from drills.report.enrich import state_diff_text

CORDONED = Observation("node gpu-train-01", "spec.unschedulable=true", "nodes/gpu-train-01 @ resourceVersion 689", False)
UP = Observation("spine-1 Ethernet0", {"admin": "up", "oper": "up"}, "ssh spine-1: `show interfaces status Ethernet0`")


def test_a_reading_is_undone_only_when_every_observation_is():
    assert Reading("node", "gpu-train-01", (UP,)).undone is True
    back = Reading("node", "gpu-train-01", (UP, CORDONED), when="settled")
    assert back.undone is False and back.back == (CORDONED,)
    assert back.sentence() == ("node on gpu-train-01 is back after the settle period: node gpu-train-01: "
                               "spec.unschedulable=true (read from nodes/gpu-train-01 @ resourceVersion 689)")


def test_a_reading_that_could_not_be_made_is_not_undone():
    """Unknown is not healthy: a read that fails twice is None, and None is not True."""
    calls = []

    def broken():
        calls.append(1)
        raise OSError("connection refused")

    reading = read("switch-uplink", "leaf-1:Ethernet240", broken)
    assert reading.undone is None and len(calls) == 2
    assert reading.sentence() == "switch-uplink on leaf-1:Ethernet240: the revert could not be verified (connection refused)"
    assert read("pods", "x", lambda: ([], ())).undone is True  # nothing to read is nothing in place


def test_an_observation_of_a_port_reads_as_words():
    assert UP.sentence() == "spine-1 Ethernet0: admin up, oper up (read from ssh spine-1: `show interfaces status Ethernet0`)"
    assert Reading("x", "y", (CORDONED,), left=("pid 42",)).stamped("t", "end").to_dict() == {
        "kind": "x", "target": "y", "undone": False, "when": "end", "at": "t", "error": None, "left": ["pid 42"],
        "observations": [CORDONED.to_dict()]}


def test_every_fault_kind_reads_back_what_it_reverts():
    for kind in KINDS:
        assert callable(getattr(fault_module(kind), "verify", None)), kind


def test_the_settle_period_is_cluster_time():
    """60 s on a 600x clock is a tenth of a wall second: waited on the clock, not slept as 60 s."""
    clock = DilatedClock(scale=600.0)
    start = time.monotonic()
    wait_until_clock(clock, clock.timestamp() + 60.0)
    assert 0.09 <= time.monotonic() - start < 1.0


def test_the_settle_period_is_a_profile_value_with_a_range():
    assert parse_profile("name: t\n").safety.revert_settle_s == DEFAULT_SETTLE_S == 60.0
    assert parse_profile("name: t\nsafety: {revert_settle_s: 2m}\n").safety.revert_settle_s == 120.0
    for bad in ("-1", "2h"):
        try:
            parse_profile(f"name: t\nsafety: {{revert_settle_s: {bad}}}\n")
        except Exception as err:  # noqa: BLE001 — InvalidProfile names the field
            assert "revert_settle_s" in str(err)
        else:
            raise AssertionError(f"revert_settle_s {bad} accepted")


def test_the_journal_keeps_the_settle_period_for_drills_revert(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl", run_id="r1")
    journal.open_entry("node", "gpu-train-01", {"node": "gpu-train-01"}, settle_s=30.0)
    journal.open_entry("node", "gpu-train-02", {"node": "gpu-train-02"})
    assert [e.settle_s for e in journal.entries()] == [30.0, None]


def test_the_state_diff_names_what_changed_and_where_it_was_read():
    before = {"node gpu-train-01": {"value": {"unschedulable": False, "taints": []}, "source": "nodes/gpu-train-01 @ rv 10"},
              "left by load /r/load/1": {"value": [], "source": "before the fault"}}
    after = {"node gpu-train-01": {"value": {"unschedulable": True, "taints": []}, "source": "nodes/gpu-train-01 @ rv 99"},
             "left by load /r/load/1": {"value": [], "source": "the fault's read-back"}}
    assert diff(before, after) == [{"key": "node gpu-train-01", "before": {"unschedulable": False, "taints": []},
                                    "after": {"unschedulable": True, "taints": []}, "source": "nodes/gpu-train-01 @ rv 99"}]
    assert diff(before, before) == []
    assert diff({}, {"port leaf-1 Ethernet240": {"value": {"admin": "down"}, "source": "ssh"}})[0]["before"] is None
    text = state_diff_text(state_diff(before, after, "T0", "T1"))
    assert "changed (1):" in text
    assert ('  node gpu-train-01: {"unschedulable": false, "taints": []} → {"unschedulable": true, "taints": []}  '
            "[nodes/gpu-train-01 @ rv 99]") in text


def test_a_change_only_toward_health_is_said_not_judged():
    """A drill started while the serving replicas still loaded their model (ready 0 of 2 before the fault, 2 after)
    is not a platform the drill left worse: `settled`, not `changed` (a node-loss run on a loaded machine FAILed
    "deployment ai-platform/llama-7b-infer: ready 0 → 2"). The same field the other way, or any other field
    changing with it, is judged."""
    def pair(key, b, a):
        return {key: {"value": b, "source": "before"}}, {key: {"value": a, "source": "after"}}

    dep = "deployment ai-platform/llama-7b-infer"
    for key, b, a, judged in [
        (dep, {"replicas": 2, "ready": 0}, {"replicas": 2, "ready": 2}, False),
        (dep, {"replicas": 2, "ready": 2}, {"replicas": 2, "ready": 1}, True),
        (dep, {"replicas": 2, "ready": 0}, {"replicas": 3, "ready": 3}, True),  # its spec changed too
        ("pdb ai-platform/llama-7b-infer", {"minAvailable": 1, "disruptionsAllowed": 0},
         {"minAvailable": 1, "disruptionsAllowed": 1}, False),
        ("pdb ai-platform/llama-7b-infer", {"minAvailable": 1, "disruptionsAllowed": 1},
         {"minAvailable": 1, "disruptionsAllowed": 0}, True),
        ("node gpu-train-01", {"Ready": "Unknown", "gpu_allocatable": "7", "GPUHealthy": "False"},
         {"Ready": "True", "gpu_allocatable": "8"}, False),
        ("node gpu-train-01", {"Ready": "True", "gpu_allocatable": "8"}, {"Ready": "True", "gpu_allocatable": "0"}, True),
        ("node gpu-train-01", {"unschedulable": True}, {"unschedulable": False}, True),  # not ours to uncordon
        ("node gpu-train-01", {"Ready": "False", "taints": ["node.kubernetes.io/not-ready=:NoSchedule"]},
         {"Ready": "True", "taints": []}, False),  # its condition's taint goes with the condition
        ("node gpu-train-01", {"taints": ["node.kubernetes.io/unschedulable=:NoSchedule"]}, {"taints": []}, True),
        ("node gpu-train-01", {"taints": []}, {"taints": ["node.kubernetes.io/not-ready=:NoSchedule"]}, True),
    ]:
        result = state_diff(*pair(key, b, a), "T0", "T1")
        assert (bool(result["changed"]), bool(result["settled"])) == (judged, not judged), (key, b, a)
    text = state_diff_text(state_diff(*pair(dep, {"replicas": 2, "ready": 0}, {"replicas": 2, "ready": 2}), "T0", "T1"))
    assert "changed: nothing" in text and "settled during the drill, not judged (1):" in text
