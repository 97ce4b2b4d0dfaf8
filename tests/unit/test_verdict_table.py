"""The false-pass table (bench/verdicts.yaml) and how a run is compared with a row; and a node drain's
evictions as a kill record (drills.faults.pods.drained)."""

from types import SimpleNamespace

from bench.verdicts import Row, mismatches, rows, built_by_tests
from drills.faults.pods import drained
from drills.twin.profile import list_defects

ROW = Row(defect="no-pdb", drill="inference", keyword="evict", scale=60, exit=1, verdict="fail",
          reason="failing from the drain on", category="slo_breach", check="error budget")


def test_every_row_names_a_real_defect_and_a_drill():
    known = {name for name, _ in list_defects()}
    table = rows()
    areas = ("training", "inference", "network", "storage")  # a drill's area, or its own marker (one scenario each)
    assert table and all(r.defect in known and r.drill in (*areas, "gpu_node_loss", "inference_pod_kill",
                                                           "switch_uplink", "inference_rolling_restart",
                                                           "inference_noisy_neighbour") for r in table)
    assert len({(r.defect, r.drill, r.keyword) for r in table}) == len(table)  # one row per construction
    assert all(r.test.startswith("tests/e2e/") for r in table if r.test)
    assert all(t["test"].startswith("tests/e2e/") for t in built_by_tests())


def test_a_record_as_expected_has_no_mismatch():
    rec = {"verdict": "fail", "category": "slo_breach", "reason": "error budget: 58 % … failing from the drain on",
           "details": {"checks": [{"name": "error budget", "verdict": "fail"}]}}
    assert mismatches(ROW, 1, rec) == []


def test_a_pass_is_named_on_every_count():
    rec = {"verdict": "pass", "category": None, "reason": "error budget: 0 %",
           "details": {"checks": [{"name": "error budget", "verdict": "pass"}]}}
    got = mismatches(ROW, 0, rec)
    assert got == ["exit 0, expected 1", "verdict pass, expected fail", "category None, expected slo_breach",
                   "reason does not say 'failing from the drain on'", "check 'error budget' is pass, expected to fail"]
    assert mismatches(ROW, 1, None) == ["no record written"]
    assert ROW.args() == ["--defect", "no-pdb", "-m", "inference", "-k", "evict", "--scale", "60"]


def test_a_drain_becomes_a_kill_record_of_the_workload_pods_only():
    node_record = SimpleNamespace(node="gpu-infer-01", injected_at="2026-01-01T00:00:00.000Z",
                                  evicted=("ai-platform/llama-a", "kube-system/dns-x", "ai-platform/batch-0"))
    record = drained(node_record, "ai-platform", "app=llama", {"llama-a": "uid-a", "llama-b": "uid-b"})
    assert record.pods == ("llama-a",) and record.uids == ("uid-a",) and record.nodes == ("gpu-infer-01",)
    assert record.mode == "evict" and record.running_before == 2 and record.injected_at == node_record.injected_at
