"""`drills accept` against the twin's new nodes (profile expansion): healthy nodes pass and are untainted;
each acceptance defect makes exactly the right check of gpu-new-02 a no-go, which keeps its gate taint with
the reason as annotation and event while gpu-new-01 is accepted; SIGINT mid-run leaves no Job and no taint;
a dry run changes nothing; a node that runs workloads is refused. Every run leaves no Job behind and its
journal closed."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import requests
import yaml

from drills.core.journal import Journal
from drills.core.kube import connect_twin, wait_for
from tests.e2e.drill_helpers import REPO, audit_of, drill_mutations, drills, drills_popen, node, records
from tests.e2e.matrix import cases

pytestmark = pytest.mark.slow

NODES = "gpu-new-01,gpu-new-02"
NS = "ai-platform"
GATE = "gpu-drills.io/unaccepted"
RUN_LABEL = "gpu-drills.io/accept-run"
# Verdicts are judged at 300× (every check's work is modelled in twin time, as are the Jobs' 1,800 s deadlines:
# 6 s of wall; the file 57 → 39 s alone against 120×); a signal is sent mid-phase at 60×, where the DCGM phase
# lasts 2 s of wall.
ACCEPT_SCALE = 300.0
SIGNAL_SCALE = 60.0

# defect → the checks of gpu-new-02 it must fail (and no other)
EXPECTED = {
    "missing-gpu": {"gpu", "dcgm", "burn", "nccl-node"},  # the others covered 7 of its 8 GPUs: partial
    "dcgm-fail": {"dcgm"},
    "hot-gpu": {"burn"},
    "slow-rail": {"rdma", "nccl-pair"},
    "nic-down": {"rdma"},  # 7 of 8 rails still outrun the 4-rail reference: only ibstat sees it
    "slow-store-client": {"storage"},
    "pfc-off-on-new-port": {"switch-port"},
}
WORDS = {"missing-gpu": "sees 7 GPUs", "dcgm-fail": "GPU Memory failed", "hot-gpu": "reached 88 °C",
         "slow-rail": "rail mlx5_2", "nic-down": "mlx5_1", "slow-store-client": "read 2400 MB/s",
         "pfc-off-on-new-port": "PFC off"}


def _accept(twin, tmp_path: Path, *extra: str, run_id: str = "acc"):
    proc = drills("accept", "--nodes", NODES, "--twin-state", str(twin.state_dir), "--reports", str(tmp_path),
                  "--run-id", run_id, "--no-html", *extra, timeout=600)
    return proc, tmp_path / run_id


def _gated(twin, name: str) -> bool:
    return any(t.get("key") == GATE for t in (node(twin, name).get("spec") or {}).get("taints") or [])


def _leftovers(twin) -> list[str]:
    pods = requests.get(f"{twin.url}/api/v1/namespaces/{NS}/pods", params={"labelSelector": RUN_LABEL}, timeout=5).json()
    jobs = requests.get(f"{twin.url}/apis/batch/v1/namespaces/{NS}/jobs", params={"labelSelector": RUN_LABEL},
                        timeout=5).json()
    return [o["metadata"]["name"] for o in pods.get("items", []) + jobs.get("items", [])]


def _failed(run_dir: Path, name: str) -> set[str]:
    return {r["details"]["check"] for r in records(run_dir)
            if r["details"]["node"] == name and r["details"]["decides"] and r["verdict"] == "fail"}


def test_healthy_new_nodes_pass_and_are_untainted(twin_factory, tmp_path):
    twin = twin_factory("expansion", scale=ACCEPT_SCALE)
    proc, run_dir = _accept(twin, tmp_path, "--gate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and "gpu-new-02: GO" in proc.stdout
    for name in ("gpu-new-01", "gpu-new-02"):
        assert not _gated(twin, name)
        assert node(twin, name)["metadata"]["annotations"]["gpu-drills.io/acceptance"] == "go"
    recs = [r for r in records(run_dir) if r["details"]["decides"]]
    assert len(recs) == 16 and all(r["verdict"] == "pass" for r in recs)
    assert {r["details"]["check"] for r in recs} == {"gpu", "dcgm", "burn", "nccl-node", "rdma", "nccl-pair",
                                                      "switch-port", "storage"}
    pair = next(r for r in recs if r["details"]["check"] == "nccl-pair" and r["details"]["node"] == "gpu-new-01")
    assert pair["details"]["peer"] == "gpu-train-01" and pair["details"]["measured"]["busbw_gbs"] >= 160
    assert _leftovers(twin) == []
    assert Journal(run_dir / "journal.jsonl").open_entries() == []
    assert "| gpu-new-01 | GO |" in (run_dir / "summary.md").read_text()
    assert (run_dir / "nccl-pairs.png").stat().st_size > 1000 and (run_dir / "summary.html").exists()
    allure = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    assert len(allure) == 17 and all(r["status"] == "passed" for r in allure)
    assert {lb["value"] for r in allure for lb in r["labels"] if lb["name"] == "suite"} == {"Pre-expansion acceptance"}
    burn = next(r for r in allure if r["name"] == "burn on gpu-new-01")
    assert {"measured: temp_max_c", "threshold: max_temp_c"} <= {p["name"] for p in burn["parameters"]}


def _one_defect_per_node(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The expansion profile with one new node per acceptance defect (gpu-new-02…08, each defect's own
    overlay moved onto its node) and gpu-new-01 sound: one run proves every defect's no-go at once."""
    profile = yaml.safe_load((REPO / "drills/twin/profiles/expansion.yaml").read_text())
    profile["node_pools"]["new"]["count"] = 1 + len(EXPECTED)
    faults, lossy, where = {}, [], {}
    for i, defect in enumerate(sorted(EXPECTED), start=2):
        name = f"gpu-new-{i:02d}"
        where[defect] = name
        overlay = yaml.safe_load((REPO / f"drills/twin/defects/{defect}.yaml").read_text())["overlay"]
        if "new_nodes" in overlay:
            faults[name] = overlay["new_nodes"]["faults"]["gpu-new-02"]
        else:
            assert overlay["fabric"]["port_faults"]["lossy_nodes"] == ["gpu-new-02"], overlay
            lossy.append(name)
    profile["new_nodes"]["faults"] = faults
    profile.setdefault("fabric", {}).setdefault("port_faults", {})["lossy_nodes"] = lossy
    path = tmp_path / "one-defect-per-node.yaml"
    path.write_text(yaml.safe_dump(profile))
    return str(path), where


def test_every_defect_is_a_no_go_on_its_own_node_for_the_right_checks(twin_factory, tmp_path):
    """Seven new nodes, each with one acceptance defect, and one sound node, accepted in one gated run."""
    profile, where = _one_defect_per_node(tmp_path)
    twin = twin_factory(profile=profile, scale=ACCEPT_SCALE)
    nodes = ",".join(["gpu-new-01", *where.values()])
    proc = drills("accept", "--nodes", nodes, "--gate", "--twin-state", str(twin.state_dir), "--reports",
                  str(tmp_path), "--run-id", "all", "--no-html", timeout=900)
    run_dir = tmp_path / "all"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _failed(run_dir, "gpu-new-01") == set(), proc.stdout
    assert "gpu-new-01: GO" in proc.stdout and not _gated(twin, "gpu-new-01")
    for defect, name in where.items():
        assert _failed(run_dir, name) == EXPECTED[defect], (defect, proc.stdout)
        assert f"{name}: NO-GO" in proc.stdout and _gated(twin, name), (defect, proc.stdout)
        assert WORDS[defect] in node(twin, name)["metadata"]["annotations"]["gpu-drills.io/acceptance-reason"]
    assert _leftovers(twin) == []
    assert Journal(run_dir / "journal.jsonl").open_entries() == []


# A named defect as shipped (`--defect`), with the node's event and the Allure results. `make test`: the port
# defect (the node defects are each a no-go on a node of their own above); bench/matrix.py: every one alone
@pytest.mark.parametrize("defect", cases(["pfc-off-on-new-port"], ["missing-gpu", "pfc-off-on-new-port"]))
def test_each_defect_is_a_no_go_on_the_right_node_and_check(defect, twin_factory, tmp_path):
    twin = twin_factory("expansion", defects=[defect], scale=ACCEPT_SCALE)
    proc, run_dir = _accept(twin, tmp_path, "--gate")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _failed(run_dir, "gpu-new-01") == set(), proc.stdout
    assert _failed(run_dir, "gpu-new-02") == EXPECTED[defect], proc.stdout
    assert "gpu-new-02: NO-GO" in proc.stdout and WORDS[defect] in proc.stdout
    assert not _gated(twin, "gpu-new-01") and _gated(twin, "gpu-new-02")
    annotations = node(twin, "gpu-new-02")["metadata"]["annotations"]
    assert annotations["gpu-drills.io/acceptance"] == "no-go" and WORDS[defect] in annotations[
        "gpu-drills.io/acceptance-reason"]
    events = requests.get(f"{twin.url}/api/v1/namespaces/default/events", timeout=5).json()["items"]
    assert any(e["reason"] == "AcceptanceFailed" and e["involvedObject"]["name"] == "gpu-new-02"
               and WORDS[defect] in e["message"] for e in events)
    failed = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    where = {c: "gpu-new-02 ↔ gpu-train-01" if c == "nccl-pair" else "gpu-new-02" for c in EXPECTED[defect]}
    assert {r["name"] for r in failed if r["status"] == "failed"} >= {f"{c} on {w}" for c, w in where.items()}
    nogo = [r for r in records(run_dir) if r["verdict"] == "fail" and r["details"]["decides"]]
    assert {r["category"] for r in nogo} == {"slo_breach"}
    assert _leftovers(twin) == []
    assert Journal(run_dir / "journal.jsonl").open_entries() == []


def test_sigint_mid_run_leaves_no_job_and_no_taint(twin_factory, tmp_path):
    twin = twin_factory("expansion", scale=SIGNAL_SCALE)  # the DCGM phase lasts 2 s of wall time
    conn = connect_twin(twin.kubeconfig, twin.url)
    run_dir = tmp_path / "int"
    proc = drills_popen("accept", "--nodes", NODES, "--gate", "--twin-state", str(twin.state_dir),
                        "--reports", str(tmp_path), "--run-id", "int")
    try:
        found = wait_for(conn, conn.core.list_namespaced_pod, lambda p: p["status"].get("phase") == "Running",
                         conn.clock.timestamp() + 120 * twin.scale, NS, label_selector=f"{RUN_LABEL},gpu-drills.io/accept-check=dcgm")
        assert found is not None, "no DCGM pod ran"
        assert _gated(twin, "gpu-new-01") and _gated(twin, "gpu-new-02")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        conn.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == "drills: interrupted (SIGINT); every fault injected so far was reverted"
    assert _leftovers(twin) == []
    assert not _gated(twin, "gpu-new-01") and not _gated(twin, "gpu-new-02")
    assert "gpu-drills.io/acceptance" not in node(twin, "gpu-new-02")["metadata"].get("annotations", {})
    journal = Journal(run_dir / "journal.jsonl")
    assert journal.entries() and journal.open_entries() == []
    assert json.loads((run_dir / "acceptance.json").read_text())["interrupted"] == "SIGINT"


def test_dry_run_prints_the_plan_and_changes_nothing(twin_factory, tmp_path):
    twin = twin_factory("expansion", scale=ACCEPT_SCALE)
    proc, run_dir = _accept(twin, tmp_path, "--gate", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing changed" in proc.stdout and "gpu-new-01, gpu-new-02" in proc.stdout
    assert not run_dir.exists()
    assert drill_mutations(audit_of(twin)) == []
    assert not _gated(twin, "gpu-new-01")


def test_a_node_running_workloads_is_refused_before_any_change(twin_factory, tmp_path):
    twin = twin_factory("expansion", scale=ACCEPT_SCALE)
    conn = connect_twin(twin.kubeconfig, twin.url)
    try:  # the training job's workers must be on their nodes first
        assert wait_for(conn, conn.core.list_namespaced_pod, lambda p: p["spec"].get("nodeName") == "gpu-train-02",
                        conn.clock.timestamp() + 120 * twin.scale, NS, label_selector="volcano.sh/job-name") is not None
    finally:
        conn.close()
    proc = drills("accept", "--nodes", "gpu-new-01,gpu-train-02", "--gate", "--twin-state", str(twin.state_dir),
                  "--reports", str(tmp_path), "--run-id", "bad", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "gpu-train-02 already runs" in proc.stderr and "not a new node" in proc.stderr
    assert drill_mutations(audit_of(twin)) == []
    assert not (tmp_path / "bad").exists()


def test_after_sigkill_drills_revert_removes_the_jobs_and_the_taints(twin_factory, tmp_path):
    twin = twin_factory("expansion", scale=SIGNAL_SCALE)
    conn = connect_twin(twin.kubeconfig, twin.url)
    proc = drills_popen("accept", "--nodes", NODES, "--gate", "--twin-state", str(twin.state_dir),
                        "--reports", str(tmp_path), "--run-id", "killed")
    try:
        found = wait_for(conn, conn.core.list_namespaced_pod, lambda p: p["status"].get("phase") == "Running",
                         conn.clock.timestamp() + 120 * twin.scale, NS, label_selector=f"{RUN_LABEL},gpu-drills.io/accept-check=dcgm")
        assert found is not None, "no DCGM pod ran"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        conn.close()
        if proc.poll() is None:
            proc.kill()
    assert _leftovers(twin) and _gated(twin, "gpu-new-02")  # a SIGKILL reverts nothing by itself
    kinds = {e.kind for e in Journal(tmp_path / "killed" / "journal.jsonl").open_entries()}
    assert kinds == {"accept-gate", "accept-jobs", "lock"}  # the run lock (Lease) too
    reverted = drills("revert", "--reports", str(tmp_path), "--run", "killed", timeout=300)
    assert reverted.returncode == 0, reverted.stdout + reverted.stderr
    assert "reverted accept-gate" in reverted.stdout and "reverted accept-jobs" in reverted.stdout
    assert _leftovers(twin) == []
    assert not _gated(twin, "gpu-new-01") and not _gated(twin, "gpu-new-02")
