"""Verdict integrity of the inference drill (issue 12, items 4 and 5): each broken platform is constructed
on the twin — a defect, or a twin fault endpoint — and the real `drills run` must FAIL (or be
inconclusive) naming the cause; the healthy twin still passes with the new checks in place (for the pod kill:
test_drill_inference.py's healthy run, read by its test_healthy_twin_passes_with_the_integrity_checks).

| construction                          | verdict      | reason names                                           |
|---------------------------------------|--------------|--------------------------------------------------------|
| error-200, all replicas killed        | fail         | N requests returned HTTP 200 with an error payload     |
| fallback-model, all replicas killed   | fail         | N requests returned 2xx with a completion from another model |
| hanging-pod, 1 of 2 killed            | fail         | N requests hung past the 30s client timeout            |
| not-in-endpoints, 1 of 2 killed       | fail         | replacement X is Ready but not in the Service's endpoints |
| stale-endpoints, 1 of 2 killed        | fail         | error budget … 502 upstream connect error (its own reason) |
| kill-container, kubelets stopped      | inconclusive | the fault had no effect on 2 of 2 killed pods           |
| no-pdb, every replica evicted (drain) | fail         | error budget … failing from the drain on; 503 no ready replica |
| no-preemption, node drained, the other inference node full of low-priority work | fail | replacement … not Ready; scheduling … preemptionPolicy=Never |
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests
import yaml

from drills.twin.profile import PROFILES_DIR
from tests.e2e.drill_helpers import drills, records, write_profile
from tests.e2e.twin_core_helpers import gpu_pod

pytestmark = [pytest.mark.slow, pytest.mark.inference]

ONE, ALL, DRAIN, NODE_DRAIN = "loses and not all", "all", "evict", "cordon"


def _run(tmp_path: Path, run_id: str, keyword: str, *args: str) -> tuple:
    # the verdicts and reasons here are not timings: a fresh twin at 120× (a drill 2 cluster minutes per wall second)
    scale = () if "--twin-state" in args else ("--scale", "120")
    done = drills("run", "-m", "inference", "-k", keyword, *args, *scale, "--no-html", "--reports", str(tmp_path),
                  "--run-id", run_id)
    recs = records(tmp_path / run_id)
    assert len(recs) == 1, done.stdout + done.stderr
    return done, recs[0]


def _checks(rec: dict) -> dict:
    return {c["name"]: c for c in rec["details"]["checks"]}


def test_error_200_outage_fails_naming_the_masked_errors(tmp_path):
    """The gateway answers the outage with 200 + an error body that still has `choices`: once counted as
    success ("recovered in 0.0 s"); now every such answer is a failure and the drill names them."""
    done, rec = _run(tmp_path, "error-200", ALL, "--defect", "error-200")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach"
    n = rec["details"]["load"]["failure_kinds"]["error_200"]
    assert n > 0 and f"{n} requests returned HTTP 200 with an error payload" in rec["reason"], rec["reason"]
    assert rec["recovery_s"] > 30  # the outage is seen: a model load stands between the kill and serving
    assert _checks(rec)["visible failures"]["verdict"] == "fail"


def test_a_fallback_models_answers_are_not_the_endpoint_serving(tmp_path):
    """Red team, wave 5: a router answers the outage with another model's completions — HTTP 200, text, that
    model's name in `model`. Counted as served before (PASS, "recovered in 1.0 s"); now each is a failure."""
    done, rec = _run(tmp_path, "fallback", ALL, "--defect", "fallback-model")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach", (rec["verdict"], rec["reason"])
    n = rec["details"]["load"]["failure_kinds"]["wrong_model"]
    assert n > 0 and f"{n} requests returned 2xx with a completion from another model" in rec["reason"], rec["reason"]
    assert _checks(rec)["visible failures"]["verdict"] == "fail"


def test_hanging_replacement_fails_naming_the_hung_requests(tmp_path):
    done, rec = _run(tmp_path, "hanging-pod", ONE, "--defect", "hanging-pod")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail"
    n = rec["details"]["load"]["failure_kinds"]["timeout"]
    assert n > 0 and re.search(rf"\b{n} requests hung past the 30s client timeout", rec["reason"]), rec["reason"]
    (replacement,) = rec["details"]["replacements"].values()
    assert replacement["ready"] and replacement["in_endpoints"] and replacement["served"] == 0


def test_replacement_outside_the_endpoints_does_not_count(tmp_path):
    done, rec = _run(tmp_path, "not-in-endpoints", ONE, "--defect", "not-in-endpoints")
    assert done.returncode == 1, done.stdout + done.stderr
    (name,) = rec["details"]["replacements"]
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach"
    assert f"replacement {name} is Ready but not in the Service's endpoints" in rec["reason"], rec["reason"]
    assert _checks(rec)["recovery"]["verdict"] == "pass"  # the survivor served: only the replacement check sees it


def test_stale_endpoints_still_fails_for_its_own_reason(tmp_path):
    done, rec = _run(tmp_path, "stale-endpoints", ONE, "--defect", "stale-endpoints")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["reason"].startswith("error budget:"), rec["reason"]
    assert "502 upstream connect error: connection refused" in rec["reason"]
    assert _checks(rec)["visible failures"]["verdict"] == "pass"  # honest 502s, nothing masked


def test_a_kill_that_reaches_no_container_is_inconclusive(twin_factory, tmp_path):
    """kill-container while the inference nodes' kubelets are stopped (and the node controller too patient to
    notice): the exit requests are never carried out, the pods keep serving. Not a pass: inconclusive."""
    profile = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    profile["timings"]["node_monitor_grace_period"] = "720h"
    twin = twin_factory(profile=write_profile(tmp_path / "patient.yaml", yaml.safe_dump(profile)), scale=600)
    _wait_ready(twin.url)
    for node in ("gpu-infer-01", "gpu-infer-02"):
        resp = requests.post(f"{twin.url}/twin/v1/nodes/{node}/kubelet", json={"action": "stop"}, timeout=5)
        assert resp.status_code < 300, resp.text
    target = yaml.safe_load((Path(__file__).resolve().parents[2] / "drills/profile/twin.yaml").read_text())
    target["faults"]["pod_kill_mode"] = "kill-container"
    path = write_profile(tmp_path / "target.yaml", yaml.safe_dump(target))
    done, rec = _run(tmp_path, "no-effect", ALL, "--profile", path, "--twin-state", str(twin.state_dir))
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", rec
    assert "inconclusive: the fault had no effect on 2 of 2 killed pods" in rec["reason"], rec["reason"]
    assert rec["details"]["fault_effect"] == {"had_effect": False, "unaffected": sorted(rec["details"]["killed_pods"])}


def test_a_drain_paced_by_the_budget_keeps_serving(tmp_path):
    """Healthy: the PodDisruptionBudget refuses the second eviction until the first replacement serves."""
    done, rec = _run(tmp_path, "drain", DRAIN)
    assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
    assert len(rec["details"]["killed_pods"]) == 2 and rec["details"]["killed_by"] == "evict"
    assert rec["details"]["load"]["fault_error_rate"] == 0.0, rec["details"]["load"]
    assert rec["recovery_s"] < 5  # never stopped serving


def test_no_pdb_lets_a_drain_take_every_replica_at_once(tmp_path):
    """no-pdb: nothing paces the evictions, both replicas go at once and users see an outage for a model
    load; "no replica survived" does not excuse it for a voluntary disruption."""
    done, rec = _run(tmp_path, "no-pdb", DRAIN, "--defect", "no-pdb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach", rec["reason"]
    assert re.match(r"error budget: [\d.]+ %, over the limit of 1 % of requests failing from the drain on; "
                    r"most frequent: \d+× 503 no ready replica", rec["reason"]), rec["reason"]
    assert _checks(rec)["recovery"]["verdict"] == "pass"  # back within 5 minutes: only the budget sees the outage
    assert rec["details"]["load"]["fault_error_rate"] > 0.1


@pytest.mark.parametrize("defects, passes", [([], True), (["no-preemption"], False)], ids=["healthy", "no-preemption"])
def test_a_drained_replica_preempts_low_priority_work_for_its_gpu(defects, passes, twin_factory, tmp_path):
    """The inference nodes' spare GPUs are lent to low-priority batch pods (the noisy neighbours): the replica
    of a drained node can only come back by preempting one. Without preemption it stays Pending."""
    twin = twin_factory(defects=defects, scale=600)
    _wait_ready(twin.url)
    free = {"gpu-infer-01": 3, "gpu-infer-02": 3}  # 4 GPUs each, one replica each (the soft spread)
    for node, n in free.items():
        for i in range(n):
            pod = gpu_pod(f"batch-{node[-2:]}-{i}", gpus=1, node=node, priority_class="training-low")
            resp = requests.post(f"{twin.url}/api/v1/namespaces/ai-platform/pods", json=pod, timeout=5)
            assert resp.status_code == 201, resp.text
    _wait_bound(twin.url, sum(free.values()))
    done, rec = _run(tmp_path, "preempt", NODE_DRAIN, "--twin-state", str(twin.state_dir))
    if passes:
        assert done.returncode == 0 and rec["verdict"] == "pass", rec["reason"]
        return
    assert done.returncode == 1, done.stdout + done.stderr
    (name,) = rec["details"]["replacements"]
    assert rec["verdict"] == "fail" and rec["category"] == "slo_breach", rec["reason"]
    assert f"replacement {name} is not Ready" in rec["reason"] and "slowest phase: scheduling" in rec["reason"], rec["reason"]
    assert "preemption: not eligible due to preemptionPolicy=Never." in rec["reason"], rec["reason"]
    assert _checks(rec)["recovery"]["verdict"] == "pass"  # the other replica kept serving


def _wait_bound(url: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = requests.get(f"{url}/api/v1/namespaces/ai-platform/pods", timeout=5).json()["items"]
        if sum(1 for p in pods if p["metadata"]["name"].startswith("batch-") and p["spec"].get("nodeName")) == count:
            return
        time.sleep(0.1)
    raise AssertionError("the batch pods were never bound")


def _wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dep = requests.get(f"{url}/apis/apps/v1/namespaces/ai-platform/deployments/llama-7b-infer", timeout=5).json()
        if (dep.get("status") or {}).get("readyReplicas") == 2:
            return
        time.sleep(0.1)
    raise AssertionError("the inference Deployment never became Ready")
