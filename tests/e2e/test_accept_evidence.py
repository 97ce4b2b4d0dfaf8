"""Constructions against `drills accept` (issue 31): broken expansions that earned GO because the verdict
trusted what a node says about itself. One twin for the module (the expansion profile, grown):

    leaf-4 (uplinks up)   gpu-new-01 sound · gpu-new-02 lost a GPU for good (nvidia-smi AND nvidia.com/gpu say 7
                          on an 8-GPU DGX H100) · gpu-new-03 fronts gpu-new-04's machine (its tools print
                          gpu-new-04's host name, GPU UUIDs, NIC GUIDs) · gpu-new-04 sound · gpu-new-05's
                          ib_write_bw loops through its own HCA (1.2 × line rate) · gpu-new-06 has no store
                          mounted (fio measures its local NVMe)
                          the red-team round's (each defect's fault moved onto its node): gpu-new-07 reboots with 7
                          GPUs and gpu-new-08 is relabelled after its last check, before the gate lifts ·
                          gpu-new-09's nvidia-smi warns of a corrupted infoROM and exits 14 · gpu-new-10's pair
                          all-reduce finishes after NCCL warned of a port error · gpu-new-11's DCGM ends a test Warn
                          · a pod tolerating every taint lands on gpu-new-14 during its checks
                          · gpu-new-12's leaf port runs without PFC and ECN, and its port annotation names gpu-new-01's
                          · gpu-new-13's DCGM run is when its reference gpu-train-02 gets cordoned (after the plan)
                          · gpu-new-15 shows 4 of its 8 NICs and is labelled (by the test) a p5.48xlarge
    leaf-3 (no uplink)    gpu-iso-01 new · gpu-iso-02 new, failing, still tainted from an earlier run

Each class gets GO without the change and a no-go with it, for the right reason: expectation
(missing_gpu against the catalogue), identity (wrong_node naming both), plausibility (implausible), a
required check left out of the profile (not_run), a pair whose reference cannot prove the path (not_run,
the reference's taint named). The verdicts before the change are in bench/accept_constructions.py's table.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests
import yaml

from drills.twin.launcher import start_twin
from tests.e2e.drill_helpers import REPO, drills, records

pytestmark = pytest.mark.slow

SCALE = 300.0
GATE = "gpu-drills.io/unaccepted"


# node → the twin defect it carries (each defect file's fault for gpu-new-02, moved onto its node)
DEFECTS = {"gpu-new-02": "gpu-lost-everywhere", "gpu-new-05": "rdma-loopback", "gpu-new-06": "store-not-mounted",
           "gpu-iso-02": "nic-down"}
ISOLATED = "isolated-new-leaf"  # leaf-3, where gpu-iso-01/02 sit
# the red-team round (issue 31): node → defect; a change comes after the last check the round's run asks for
LATE = {"gpu-new-07": "changed-after-checks", "gpu-new-08": "relabelled-after-checks", "gpu-new-09": "inforom-corrupted",
        "gpu-new-10": "nccl-async-warn", "gpu-new-11": "dcgm-warn", "gpu-new-14": "workload-lands-mid-run"}
LATE_CHECKS = ["gpu", "dcgm", "nccl-pair"]
COPIED_PORT = "gpu-new-12"  # its own leaf port lost its lossless config ("pfc-off-on-new-port"); it names gpu-new-01's
PORT = "network.gpu-drills.io/leaf-port"
# "reference-cordoned-mid-run" on gpu-new-13, its reference gpu-train-02 (gpu-train-01 stays the others' reference)
MOVED_REF, REF = "gpu-new-13", "gpu-train-02"
HALF_NICS = "gpu-new-15"  # "nics-absent-relabelled": 4 of its 8 NICs absent; the test labels it a p5.48xlarge
# the second red-team round: a taint, a Ready flap, a pressure after the last check its run asks for;
# gpu-new-19 is under DiskPressure before the run (the test writes its status); gpu-new-20's reference
# gpu-train-03 comes under MemoryPressure after the DCGM phase ("reference-pressure-mid-run")
ROUND2 = {"gpu-new-16": "tainted-mid-run", "gpu-new-17": "ready-flaps-mid-run", "gpu-new-18": "pressure-mid-run"}
ROUND2_CHECKS = ["gpu", "dcgm", "rdma"]  # the order the runbook runs them in (rdma last)
PRESSED, PRESSED_REF, REF3 = "gpu-new-19", "gpu-new-20", "gpu-train-03"
UNREAD = "gpu-new-21"  # "cqe-error-zero-exit": libmlx5's error dump in a healthy, zero-exit RDMA output
MISCABLED, CABLING = "gpu-new-22", "miscabled-node"  # its cable is in another leaf-4 port than its annotation names
# the third round (rails): leaf-4 carries rails 0-3, leaf-5 rails 4-7 (each new node cabled per NIC); gpu-new-23's DCGM
# pod reports gpu-new-01's GPUs ("dcgm-other-host"), gpu-new-24's NIC 3 and 4 cables are swapped ("rail-swapped"),
# gpu-new-25's mlx5_5 is cabled nowhere ("nic-uncabled")
OTHER_DCGM, SWAPPED, UNCABLED = "gpu-new-23", "gpu-new-24", "gpu-new-25"
RAIL_CHECKS = ["gpu", "dcgm", "rdma", "switch-port"]


def twin_profile() -> dict:
    raw = yaml.safe_load((REPO / "drills/twin/profiles/expansion.yaml").read_text())
    pools = raw["node_pools"]
    pools["new"].update(count=25, leaves=["leaf-4"])  # gpu-new-01…06, LATE (07…11, 14), 12, 13, 15, ROUND2 (16…18), 19…25
    pools["iso"] = {**pools["new"], "prefix": "gpu-iso", "count": 2, "leaves": ["leaf-3"]}
    rails = yaml.safe_load((REPO / "drills/twin/defects/rail-swapped.yaml").read_text())["overlay"]["fabric"]
    assert rails["switches"]["leaf-3"]["rails"] == [0, 1, 2, 3] and rails["switches"]["leaf-5"]["rails"] == [4, 5, 6, 7]
    raw["fabric"]["switches"]["leaf-4"] = {"role": "leaf", "dialect": "sonic", "rails": [0, 1, 2, 3]}  # the defect's leaf-3
    raw["fabric"]["switches"]["leaf-5"] = rails["switches"]["leaf-5"]
    overlay = yaml.safe_load((REPO / "drills/twin/defects" / f"{ISOLATED}.yaml").read_text())["overlay"]
    raw["fabric"].setdefault("port_faults", {}).update(overlay["fabric"]["port_faults"])  # leaf-3: no uplink
    lossy = yaml.safe_load((REPO / "drills/twin/defects/pfc-off-on-new-port.yaml").read_text())["overlay"]
    assert lossy["fabric"]["port_faults"]["lossy_nodes"] == ["gpu-new-02"]
    raw["fabric"]["port_faults"]["lossy_nodes"] = [COPIED_PORT]
    cabling = yaml.safe_load((REPO / "drills/twin/defects" / f"{CABLING}.yaml").read_text())["overlay"]
    assert cabling["fabric"]["port_faults"]["miscabled"] == ["gpu-new-02"]
    raw["fabric"]["port_faults"]["miscabled"] = [MISCABLED]
    assert rails["port_faults"] == {"rail_swapped": ["gpu-new-02"]}
    raw["fabric"]["port_faults"]["rail_swapped"] = [SWAPPED]
    uncabled = yaml.safe_load((REPO / "drills/twin/defects/nic-uncabled.yaml").read_text())["overlay"]["fabric"]
    raw["fabric"]["port_faults"]["uncabled"] = {UNCABLED: uncabled["port_faults"]["uncabled"]["gpu-new-02"]}
    faults = {node: yaml.safe_load((REPO / f"drills/twin/defects/{name}.yaml").read_text())["overlay"]["new_nodes"]
              ["faults"]["gpu-new-02"] for node, name in {**DEFECTS, **LATE, **ROUND2,
                                                          UNREAD: "cqe-error-zero-exit",
                                                          OTHER_DCGM: "dcgm-other-host"}.items()}
    for node in [*LATE, *ROUND2]:
        if "changes" in faults[node]:  # the defect's "after its last check" is this module's last check
            assert faults[node]["changes"]["after"] == "storage"
            faults[node]["changes"]["after"] = LATE_CHECKS[-1] if node in LATE else ROUND2_CHECKS[-1]
    cloned = yaml.safe_load((REPO / "drills/twin/defects/cloned-node-identity.yaml").read_text())["overlay"]
    assert cloned["new_nodes"]["faults"]["gpu-new-02"] == {"machine": "gpu-new-01"}
    faults["gpu-new-03"] = {"machine": "gpu-new-04"}  # "cloned-node-identity", on the pair 03/04
    moved = yaml.safe_load((REPO / "drills/twin/defects/reference-cordoned-mid-run.yaml").read_text())["overlay"]
    faults[MOVED_REF] = moved["new_nodes"]["faults"]["gpu-new-02"]
    assert faults[MOVED_REF]["changes"]["node"] == "gpu-train-01"
    faults[MOVED_REF]["changes"]["node"] = REF
    faults[HALF_NICS] = yaml.safe_load((REPO / "drills/twin/defects/nics-absent-relabelled.yaml").read_text())[
        "overlay"]["new_nodes"]["faults"]["gpu-new-02"]
    dump = faults[UNREAD]["warnings"]["rdma"]  # libmlx5 prints the host's name: this node's
    faults[UNREAD]["warnings"]["rdma"] = [dump[0].replace("gpu-new-02", UNREAD), *dump[1:]]
    ref = yaml.safe_load((REPO / "drills/twin/defects/reference-pressure-mid-run.yaml").read_text())["overlay"]
    faults[PRESSED_REF] = ref["new_nodes"]["faults"]["gpu-new-02"]
    assert faults[PRESSED_REF]["changes"]["node"] == "gpu-train-01"
    faults[PRESSED_REF]["changes"]["node"] = REF3
    raw["new_nodes"]["faults"] = faults
    return raw


def target_profile(tmp: Path, name: str, **acceptance) -> str:
    raw = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())
    raw["acceptance"].update(acceptance)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("accept-evidence")
    (tmp / "profile.yaml").write_text(yaml.safe_dump(twin_profile()))
    handle = start_twin(tmp / "twin", profile=str(tmp / "profile.yaml"), scale=SCALE)
    try:
        yield handle
    finally:
        handle.stop()


def _accept(twin, tmp: Path, nodes: str, run_id: str, *extra: str):
    proc = drills("accept", "--nodes", nodes, "--gate", "--twin-state", str(twin.state_dir), "--reports", str(tmp),
                  "--run-id", run_id, "--no-html", *extra, timeout=600)
    return proc, tmp / run_id


def _nogo(run_dir: Path, node: str) -> dict[str, dict]:
    return {r["details"]["check"]: r for r in records(run_dir)
            if r["details"]["node"] == node and r["details"]["decides"] and r["verdict"] == "fail"}


def _runbook(run_dir: Path) -> dict[tuple[str, str], str]:
    """(scenario's test name up to its first `__`, node) → its row's JUnit outcome in the run's runbook."""
    out = {}
    for case in ET.parse(run_dir / "runbook" / "junit.xml").iter("testcase"):
        name, _, node = case.get("name").partition("[")
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[(name.split("__")[0], node.rstrip("]"))] = kinds[0] if kinds else "passed"
    return out


def test_expectation_identity_and_plausibility_constructions_are_no_go(twin, tmp_path):
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-01,gpu-new-02,gpu-new-03,gpu-new-04,gpu-new-05,gpu-new-06", "ev")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and _nogo(run_dir, "gpu-new-01") == {}
    accepted = requests.get(f"{twin.url}/api/v1/nodes/gpu-new-01", timeout=5).json()["metadata"]["annotations"]
    recorded = json.loads(accepted["gpu-drills.io/accepted-identity"])  # what later runs compare against
    assert len(recorded["gpus"]) == 8 and len(recorded["nics"]) == 8
    # expectation: the node agrees with itself (7 = 7); the catalogue's DGX H100 has 8
    lost = _nogo(run_dir, "gpu-new-02")
    assert set(lost) == {"gpu", "dcgm", "burn", "nccl-node"} and lost["gpu"]["details"]["failure"] == "missing_gpu"
    assert {lost[c]["details"]["failure"] for c in ("dcgm", "burn", "nccl-node")} == {"partial"}  # 7 of 8 GPUs
    assert "advertises 7" in lost["gpu"]["reason"] and "a DGX-H100 has 8" in lost["gpu"]["reason"]
    assert lost["gpu"]["details"]["expected"]["gpus"]["origin"] == "catalogue"
    # identity: both nodes named, neither accepted on the other's evidence
    for node, other in (("gpu-new-03", "gpu-new-04"), ("gpu-new-04", "gpu-new-03")):
        wrong = _nogo(run_dir, node)
        assert {"gpu", "burn", "rdma"} <= set(wrong), (node, proc.stdout)
        assert {wrong[c]["details"]["failure"] for c in ("gpu", "burn", "rdma")} == {"wrong_node"}
        assert other in wrong["gpu"]["reason"] and node in wrong["gpu"]["reason"]
    assert _nogo(run_dir, "gpu-new-03")["nccl-node"]["details"]["failure"] == "wrong_node"
    # plausibility: a rail faster than its port
    loop = _nogo(run_dir, "gpu-new-05")
    assert set(loop) == {"rdma"} and loop["rdma"]["details"]["failure"] == "implausible"
    assert "above the physical limit 400.0" in loop["rdma"]["reason"]
    # identity of the store: fio measured the node's own disk (the store is not mounted there)
    local = _nogo(run_dir, "gpu-new-06")
    assert set(local) == {"storage"} and local["storage"]["details"]["failure"] == "wrong_target"
    assert "a ext4 filesystem at /store on the node itself" in local["storage"]["reason"]
    # the evidence in the report: raw output attached, expectation and its source as parameters
    allure = [json.loads(p.read_text()) for p in (run_dir / "allure-results").glob("*-result.json")]
    gpu = next(r for r in allure if r["name"] == "gpu on gpu-new-02")
    params = {p["name"]: p["value"] for p in gpu["parameters"]}
    assert params["expected: gpus"].startswith("8 (catalogue: catalogue servers.DGX-H100")
    assert params["evidence: spec.nodeName"] == "gpu-new-02"
    attached = [a for a in gpu.get("attachments", []) if a["name"] == "nvidia-smi output (gpu-new-02)"]
    assert attached and "GPU 6: NVIDIA H100" in (run_dir / "allure-results" / attached[0]["source"]).read_text()
    assert gpu["steps"][-1] == {**gpu["steps"][-1], "name": "Then the gpu check of gpu-new-02 is a go", "status": "failed"}
    # the runbook that judged them (features/acceptance, its rows the planned nodes): the same go/no-go, row by row
    rows = _runbook(run_dir)
    assert {v for k, v in rows.items() if k[1] == "gpu-new-01"} == {"passed"} and len(rows) == 6 * 10 + 2
    assert rows[("test_gpus", "gpu-new-02")] == rows[("test_signoff", "gpu-new-02")] == "failure"
    assert rows[("test_identity", "")] == "failure" and rows[("test_rdma", "gpu-new-05")] == "failure"
    assert rows[("test_signoff", "gpu-new-04")] == "failure"  # 03 printed 04's identities: neither is accepted


def test_a_required_check_left_out_of_the_profile_is_a_not_run_no_go(twin, tmp_path):
    profile = target_profile(tmp_path, "no-dcgm", checks=["gpu"], required={"gpu": {}, "dcgm": {"min_level": 2}})
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-01", "req", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    nogo = _nogo(run_dir, "gpu-new-01")
    assert set(nogo) == {"dcgm"} and nogo["dcgm"]["details"]["failure"] == "not_run"
    assert "not in acceptance.checks" in nogo["dcgm"]["reason"]
    summary = (run_dir / "summary.md").read_text()
    assert "not run" in summary and "dcgm" in summary
    # the same gap, waived by a named person, is accepted and printed in the sign-off
    waived = target_profile(tmp_path, "waived", checks=["gpu"], required={"gpu": {}, "dcgm": {"min_level": 2}},
                            waivers=[{"check": "dcgm", "node": "gpu-new-01", "reason": "DCGM image not mirrored yet",
                                      "by": "j.doe"}])
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-01", "waived", "--profile", waived)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and "(waived by j.doe: DCGM image not mirrored yet)" in proc.stdout
    signoff = (run_dir / "summary.md").read_text().split("## Sign-off", 1)[1]
    assert "dcgm" in signoff and "j.doe" in signoff and "DCGM image not mirrored yet" in signoff
    assert "Required checks: dcgm (level ≥ 2), gpu." in signoff and "Not required by this profile" in signoff
    rows = _runbook(run_dir)  # the runbook: dcgm's rows skipped (not in the checks), its required row waived (xfail)
    assert rows[("test_dcgm_diagnostic", "gpu-new-01")] == rows[("test_required_checks", "gpu-new-01")] == "skipped"
    assert rows[("test_signoff", "gpu-new-01")] == "passed"


def test_a_reference_that_is_a_failing_tainted_node_on_the_same_isolated_leaf_proves_nothing(twin, tmp_path):
    # gpu-iso-02 failed an earlier acceptance: it keeps the gate taint and the no-go annotation
    patch = {"metadata": {"annotations": {"gpu-drills.io/acceptance": "no-go"}},
             "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                 {"key": GATE, "value": "true", "effect": "NoSchedule"}]}}
    requests.patch(f"{twin.url}/api/v1/nodes/gpu-iso-02", json=patch, timeout=5,
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    profile = target_profile(tmp_path, "iso-ref", checks=["nccl-pair"], required={"nccl-pair": {}},
                             reference_node="gpu-iso-02")
    proc, run_dir = _accept(twin, tmp_path, "gpu-iso-01", "path", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    pair = _nogo(run_dir, "gpu-iso-01")["nccl-pair"]
    assert pair["details"]["failure"] == "not_run" and pair["details"]["peer"] == "gpu-iso-02"
    assert f"still carries {GATE}" in pair["reason"]
    # with a fit reference under another leaf, the isolated leaf itself fails the pair (the twin honours it)
    fit = target_profile(tmp_path, "fit-ref", checks=["nccl-pair"], required={"nccl-pair": {}},
                         reference_node="gpu-train-01")
    proc, run_dir = _accept(twin, tmp_path, "gpu-iso-01", "cut", "--profile", fit)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    cut = _nogo(run_dir, "gpu-iso-01")["nccl-pair"]
    assert cut["details"]["failure"] == "tool_error" and "network error" in cut["reason"]


def test_red_team_round_a_go_must_not_outlive_its_evidence_nor_rest_on_a_warning(twin, tmp_path):
    """Issue 31's red-team round: each construction got GO (and lost its taint) before; each is a no-go now,
    for its own reason, next to a sound node that is still accepted."""
    from drills.profile.acceptance import DEFAULT_JOBS

    quick_pairs = {**DEFAULT_JOBS["nccl-pair"].model_dump(), "timeout_s": 300}  # gpu-new-07's ring Job cannot fit 8 GPUs
    profile = target_profile(tmp_path, "late", checks=LATE_CHECKS, jobs={"nccl-pair": quick_pairs},
                             required={"gpu": {}, "dcgm": {"min_level": 2}, "nccl-pair": {}})
    proc, run_dir = _accept(twin, tmp_path, ",".join(["gpu-new-01", *LATE]), "late", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and _nogo(run_dir, "gpu-new-01") == {}
    nogo = {node: _nogo(run_dir, node) for node in LATE}
    # (g) the node changed between its checks and the gate: read again just before the taint would go
    assert set(nogo["gpu-new-07"]) == {"gate"} and nogo["gpu-new-07"]["gate"]["details"]["failure"] == "changed"
    reason = nogo["gpu-new-07"]["gate"]["reason"]
    assert "the machine rebooted" in reason and "capacity nvidia.com/gpu '8' → '7'" in reason
    stray = nogo["gpu-new-14"]["gate"]["reason"]  # a pod that tolerates every taint: the gate kept nothing out
    assert set(nogo["gpu-new-14"]) == {"gate"} and "runs workload pods now: ai-platform/stray-debug" in stray
    relabel = nogo["gpu-new-08"]["gate"]["reason"]
    assert set(nogo["gpu-new-08"]) == {"gate"} and "node.kubernetes.io/instance-type 'dgx-h100' → 'p5.48xlarge'" in relabel
    # (f) a warning is not a pass: nvidia-smi's own, DCGM's Warn, NCCL's WARN in a run that finished
    assert {n: {c: r["details"]["failure"] for c, r in nogo[n].items()} for n in ("gpu-new-09", "gpu-new-10", "gpu-new-11")} == {
        "gpu-new-09": {"gpu": "warned"}, "gpu-new-10": {"nccl-pair": "warned"}, "gpu-new-11": {"dcgm": "warned"}}
    assert "infoROM is corrupted at gpu 0000:18:00.0" in nogo["gpu-new-09"]["gpu"]["reason"]
    assert "Got async event : port error" in nogo["gpu-new-10"]["nccl-pair"]["reason"]
    assert "GPU Memory ended Warn" in nogo["gpu-new-11"]["dcgm"]["reason"]
    for node in LATE:  # the gate agrees with the record: every one keeps its taint, with the reason
        got = requests.get(f"{twin.url}/api/v1/nodes/{node}", timeout=5).json()
        assert any(t["key"] == GATE for t in got["spec"].get("taints") or []), node
        assert got["metadata"]["annotations"]["gpu-drills.io/acceptance"] == "no-go" and f"{node}: NO-GO" in proc.stdout
    assert "| gpu-new-07 | **NO-GO** |" in (run_dir / "summary.md").read_text()
    rows = _runbook(run_dir)  # the runbook read them again too: its sign-off agrees with the record and the gate
    assert {node: rows[("test_signoff", node)] for node in ["gpu-new-01", *LATE]} == {
        "gpu-new-01": "passed", **{node: "failure" for node in LATE}}


def test_a_policy_that_requires_nothing_accepts_nothing(twin, tmp_path):
    """(c) a GO without any evidence: no check asked for, none required — the node was accepted on silence."""
    profile = target_profile(tmp_path, "nothing", checks=[], required={})
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-06", "nothing", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    nogo = _nogo(run_dir, "gpu-new-06")
    assert set(nogo) == {"evidence"} and nogo["evidence"]["details"]["failure"] == "not_run"
    assert "nothing was observed of gpu-new-06" in nogo["evidence"]["reason"]
    got = requests.get(f"{twin.url}/api/v1/nodes/gpu-new-06", timeout=5).json()
    assert any(t["key"] == GATE for t in got["spec"].get("taints") or [])


def test_a_node_that_names_another_nodes_switch_port_is_judged_by_neither(twin, tmp_path):
    """(a)/(b) × switch-port: which port faces a node is the node's own word (leaf label, port annotation);
    gpu-new-12's own port lost its lossless config, and its annotation names gpu-new-01's healthy port."""
    profile = target_profile(tmp_path, "port", checks=["switch-port"], required={"switch-port": {}})
    proc, run_dir = _accept(twin, tmp_path, COPIED_PORT, "own-port", "--profile", profile)
    own = _nogo(run_dir, COPIED_PORT)["switch-port"]  # by its own annotation: its own, lossy port
    assert own["details"]["failure"] == "port_config" and "PFC off" in own["reason"], proc.stdout
    theirs = requests.get(f"{twin.url}/api/v1/nodes/gpu-new-01", timeout=5).json()["metadata"]["annotations"][PORT]
    requests.patch(f"{twin.url}/api/v1/nodes/{COPIED_PORT}", json={"metadata": {"annotations": {PORT: theirs}}},
                   timeout=5, headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    proc, run_dir = _accept(twin, tmp_path, COPIED_PORT, "port", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    port = _nogo(run_dir, COPIED_PORT)["switch-port"]
    assert port["details"]["failure"] == "wrong_node" and f"leaf port is named by gpu-new-01 too" in port["reason"]


def test_a_node_cabled_to_another_port_than_its_annotation_is_wrong_port_naming_both(twin, tmp_path):
    """Identity × switch-port, the fabric's key (issue 30/31, defect miscabled-node): gpu-new-22's cable is in
    another leaf-4 port than its annotation names. The annotated port is up, 400G, lossless and faces nothing:
    before LLDP it was a GO for a port that does not face the node; now leaf-4's LLDP shows where it is."""
    profile = target_profile(tmp_path, "cabled", checks=["switch-port"], required={"switch-port": {}})
    proc, run_dir = _accept(twin, tmp_path, MISCABLED, "cabled", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    port = _nogo(run_dir, MISCABLED)["switch-port"]
    annotated = requests.get(f"{twin.url}/api/v1/nodes/{MISCABLED}", timeout=5).json()["metadata"]["annotations"][PORT]
    assert port["details"]["failure"] == "wrong_port", port["reason"]
    assert f"names leaf-4 {annotated}, but LLDP on leaf-4 shows {MISCABLED} on Ethernet" in port["reason"]
    assert "show lldp table" in port["reason"]
    got = requests.get(f"{twin.url}/api/v1/nodes/{MISCABLED}", timeout=5).json()
    assert any(t["key"] == GATE for t in got["spec"].get("taints") or [])


def test_a_reference_cordoned_after_the_plan_proves_no_path(twin, tmp_path):
    """(d) the reference was fit when planned, then cordoned for maintenance while the batch ran its DCGM
    diagnostic: the pair tests must not lean on it (read again just before they run)."""
    profile = target_profile(tmp_path, "ref-moved", checks=["dcgm", "nccl-pair"], reference_node=REF,
                             required={"dcgm": {"min_level": 2}, "nccl-pair": {}})
    try:
        proc, run_dir = _accept(twin, tmp_path, MOVED_REF, "ref-moved", "--profile", profile)
        cordoned = requests.get(f"{twin.url}/api/v1/nodes/{REF}", timeout=5).json()["spec"].get("unschedulable")
    finally:
        requests.patch(f"{twin.url}/api/v1/nodes/{REF}", json={"spec": {"unschedulable": None}}, timeout=5,
                       headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    assert cordoned, "the construction did not cordon the reference"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    nogo = _nogo(run_dir, MOVED_REF)
    assert set(nogo) == {"nccl-pair"} and nogo["nccl-pair"]["details"]["failure"] == "not_run"
    assert f"{REF} is cordoned" in nogo["nccl-pair"]["reason"]


def test_a_batch_the_store_cannot_serve_keeps_its_nodes_out(twin, tmp_path):
    """(h) the run said no-go (the batch's aggregate read below the site's target, exit 1) while each node was
    printed GO and lost its taint: the batch's no-go is now each node's, in the record, the table and the gate.
    (a) gpu-new-06 measured its own NVMe (25,000 MB/s): that reading is no share of the store's aggregate —
    before, it lifted the sum to 49,000 and the batch passed the target it had missed."""
    t = yaml.safe_load((REPO / "drills/profile/twin.yaml").read_text())["acceptance"]["thresholds"]
    profile = target_profile(tmp_path, "aggregate", checks=["storage"], required={"storage": {}},
                             thresholds={**t, "store_aggregate_read_mb_s_min": 30000})  # 2 × 12,000 MB/s from the store
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-01,gpu-new-05,gpu-new-06", "aggregate", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for node in ("gpu-new-01", "gpu-new-05", "gpu-new-06"):  # gpu-new-05's fault is in its rdma check only
        nogo = _nogo(run_dir, node)
        assert set(nogo) == ({"store-aggregate", "storage"} if node == "gpu-new-06" else {"store-aggregate"}), node
        assert "read 24000 MB/s" in nogo["store-aggregate"]["reason"]
        assert f"{node}: NO-GO" in proc.stdout
        got = requests.get(f"{twin.url}/api/v1/nodes/{node}", timeout=5).json()
        assert any(t["key"] == GATE for t in got["spec"].get("taints") or []), node


def test_a_node_fronting_another_machine_is_caught_alone_by_its_machine_identity(twin, tmp_path):
    """(a) gpu-new-03 fronts gpu-new-04's machine, and is accepted alone (gpu-new-04 never was): no GPU UUID
    clashes within the run nor with an accepted node. Its kubelet reports that machine's DMI system UUID and
    machine-id, the same as gpu-new-04's Node object — two Node objects, one machine."""
    profile = target_profile(tmp_path, "alone", checks=["gpu"], required={"gpu": {}})
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-03", "alone", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    nogo = _nogo(run_dir, "gpu-new-03")
    assert set(nogo) == {"identity"} and nogo["identity"]["details"]["failure"] == "wrong_node"
    assert "systemUUID" in nogo["identity"]["reason"] and "gpu-new-04" in nogo["identity"]["reason"]


def test_a_node_labelled_as_a_product_with_only_a_nic_total_still_shows_that_total(twin, tmp_path):
    """(b) the node's own instance-type label picks a product the catalogue knows only by its NIC aggregate
    (p5.48xlarge: 3,200 Gb/s, no count): a DGX H100 that shows 4 of its 8 NICs passed every rail it showed."""
    requests.patch(f"{twin.url}/api/v1/nodes/{HALF_NICS}",
                   json={"metadata": {"labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}, timeout=5,
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    profile = target_profile(tmp_path, "nics", checks=["rdma"], required={"rdma": {}})
    proc, run_dir = _accept(twin, tmp_path, HALF_NICS, "nics", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rdma = _nogo(run_dir, HALF_NICS)["rdma"]
    assert rdma["details"]["failure"] == "missing_nic" and "1600 Gb/s" in rdma["reason"] and "3200" in rdma["reason"]


def _status(twin, node: str, kind: str, status: str) -> None:
    """Write one condition of `node` as its kubelet would (the status subresource, a new lastTransitionTime)."""
    cond = {"type": kind, "status": status, "reason": f"Test{kind}{status}",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    requests.patch(f"{twin.url}/api/v1/nodes/{node}/status", json={"status": {"conditions": [cond]}}, timeout=5,
                   headers={"Content-Type": "application/strategic-merge-patch+json"}).raise_for_status()


def test_second_round_a_node_tainted_flapping_under_pressure_or_printing_an_error_is_not_accepted(twin, tmp_path):
    """Issue 31's second red-team round, (g) and (i): a GPU health checker's taint, a NotReady flap that is over
    by the end, DiskPressure that arrives mid-run, and DiskPressure the node had before the run — each got GO and
    lost its gate taint before (the gate's re-read compared no taint, no condition but Ready's status); (f) an RDMA
    output whose tables are healthy but which also carries libmlx5's completion-error dump, exit 0 — GO before (the
    reader reads its sections only). Each is a no-go now, next to a sound node that is still accepted."""
    _status(twin, PRESSED, "DiskPressure", "True")
    profile = target_profile(tmp_path, "round2", checks=ROUND2_CHECKS,
                             required={"gpu": {}, "dcgm": {"min_level": 2}, "rdma": {}})
    proc, run_dir = _accept(twin, tmp_path, ",".join(["gpu-new-01", *ROUND2, PRESSED, UNREAD]), "round2",
                            "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and _nogo(run_dir, "gpu-new-01") == {}
    gate = {}
    for node in ROUND2:
        nogo = _nogo(run_dir, node)
        assert set(nogo) == {"gate"}, (node, nogo)
        gate[node] = nogo["gate"]
    pressed = _nogo(run_dir, PRESSED)  # ailing when planned: no Job ran on it, each check says why
    assert set(pressed) == {"gate", *ROUND2_CHECKS} and {pressed[c]["details"]["failure"] for c in ROUND2_CHECKS} == {
        "not_run"} and "was not healthy when the run planned it (DiskPressure True since" in pressed["gpu"]["reason"]
    gate[PRESSED] = pressed["gate"]
    assert gate["gpu-new-16"]["details"]["failure"] == "changed"
    assert "→ 'nvidia.com/gpu.unhealthy=xid:NoSchedule, nvidia.com/gpu=present:NoSchedule'" in gate["gpu-new-16"]["reason"]
    assert gate["gpu-new-17"]["details"]["failure"] == "changed" and "Ready since" in gate["gpu-new-17"]["reason"]
    assert gate["gpu-new-18"]["details"]["failure"] == "changed"
    assert "condition DiskPressure 'False since" in gate["gpu-new-18"]["reason"]
    assert gate[PRESSED]["details"]["failure"] == "node_unhealthy" and "DiskPressure True" in gate[PRESSED]["reason"]
    # (f) a zero-exit tool with an error line: every rail's table is healthy, libmlx5 said a completion failed
    unread = _nogo(run_dir, UNREAD)
    assert set(unread) == {"rdma"} and unread["rdma"]["details"]["failure"] == "unread_error"
    assert "also says `mlx5: gpu-new-21: got completion with error:`: a line no reader" in unread["rdma"]["reason"]
    # (h) the report agrees: Allure, the summary's table, the runbook's sign-off rows
    allure = {r["name"]: r["status"] for r in (json.loads(p.read_text()) for p in
                                               (run_dir / "allure-results").glob("*-result.json"))}
    assert allure["gpu on gpu-new-01"] == "passed" and allure["rdma on gpu-new-21"] == "broken"  # measurement in doubt
    assert {allure[f"gate on {n}"] for n in [*ROUND2, PRESSED]} == {"failed"}
    summary = (run_dir / "summary.md").read_text()
    assert all(f"| {n} | **NO-GO** |" in summary for n in [*ROUND2, PRESSED, UNREAD])
    rows = _runbook(run_dir)
    assert {n: rows[("test_signoff", n)] for n in ["gpu-new-01", *ROUND2, PRESSED, UNREAD]} == {
        "gpu-new-01": "passed", **{n: "failure" for n in [*ROUND2, PRESSED, UNREAD]}}
    for node in [*ROUND2, PRESSED, UNREAD]:  # the gate agrees with the record
        got = requests.get(f"{twin.url}/api/v1/nodes/{node}", timeout=5).json()
        assert any(t["key"] == GATE for t in got["spec"].get("taints") or []), node
        assert f"{node}: NO-GO" in proc.stdout


def test_second_round_a_reference_under_memory_pressure_proves_no_path(twin, tmp_path):
    """(d)/(i) the reference was fit when planned (Ready, schedulable, untainted), then came under MemoryPressure
    during the batch's DCGM phase: its pair test measures an ailing partner (GO before: only Ready was read)."""
    profile = target_profile(tmp_path, "ref-pressed", checks=["dcgm", "nccl-pair"], reference_node=REF3,
                             required={"dcgm": {"min_level": 2}, "nccl-pair": {}})
    try:
        proc, run_dir = _accept(twin, tmp_path, PRESSED_REF, "ref-pressed", "--profile", profile)
        conds = requests.get(f"{twin.url}/api/v1/nodes/{REF3}", timeout=5).json()["status"]["conditions"]
    finally:
        _status(twin, REF3, "MemoryPressure", "False")
    assert any(c["type"] == "MemoryPressure" and c["status"] == "True" for c in conds), "no pressure came"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    nogo = _nogo(run_dir, PRESSED_REF)
    assert set(nogo) == {"nccl-pair"} and nogo["nccl-pair"]["details"]["failure"] == "not_run"
    assert f"{REF3} is not healthy (MemoryPressure True since" in nogo["nccl-pair"]["reason"]


def test_rails_every_nic_on_its_rails_leaf_and_dcgm_bound_to_the_nodes_gpus(twin, tmp_path):
    """The third round (issue 31 (a) × DCGM, (b) × switch port): a DCGM diagnostic of another node's GPUs, NIC 3 and
    NIC 4 cables swapped between the rail leaves, a rail NIC cabled nowhere. Before: GO each (dcgmi diag names no GPU;
    the annotated port — the first NIC's — is healthy). Now each is a no-go naming what and where, next to a sound
    node whose 8 NIC ports are judged one by one."""
    profile = target_profile(tmp_path, "rails", checks=RAIL_CHECKS,
                             required={"gpu": {}, "dcgm": {"min_level": 2}, "rdma": {}, "switch-port": {}})
    proc, run_dir = _accept(twin, tmp_path, ",".join(["gpu-new-01", OTHER_DCGM, SWAPPED, UNCABLED, MISCABLED]),
                            "rails", "--profile", profile)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-new-01: GO" in proc.stdout and _nogo(run_dir, "gpu-new-01") == {}, proc.stdout
    sound = next(r for r in records(run_dir) if r["details"]["node"] == "gpu-new-01"
                 and r["details"]["check"] == "switch-port")
    assert sound["reason"].startswith("8 NICs, each alone on a port of its rail's leaf by LLDP (mlx5_0 leaf-4 Ethernet")
    assert "mlx5_4 leaf-5 Ethernet" in sound["reason"]
    dcgm = _nogo(run_dir, OTHER_DCGM)
    assert set(dcgm) == {"dcgm"} and dcgm["dcgm"]["details"]["failure"] == "wrong_node"
    assert "(gpu-new-01's, by nvidia-smi -L on gpu-new-01)" in dcgm["dcgm"]["reason"]
    swapped = _nogo(run_dir, SWAPPED)
    assert set(swapped) == {"switch-port"} and swapped["switch-port"]["details"]["failure"] == "wrong_port"
    assert "mlx5_3 (MAC 58:a2:e1:" in swapped["switch-port"]["reason"]
    assert ", rail 3) is on leaf-5 Ethernet" in swapped["switch-port"]["reason"]
    assert "a leaf of rails 4,5,6,7 (rail 3 is leaf-4)" in swapped["switch-port"]["reason"]
    uncabled = _nogo(run_dir, UNCABLED)
    assert set(uncabled) == {"switch-port"} and uncabled["switch-port"]["details"]["failure"] == "missing_nic"
    assert "mlx5_5 (MAC 58:a2:e1:" in uncabled["switch-port"]["reason"]
    assert "is seen by LLDP on no leaf port" in uncabled["switch-port"]["reason"]
    # miscabled-node, judged per NIC: its first NIC is on another leaf-4 port than its annotation names
    moved = _nogo(run_dir, MISCABLED)
    assert set(moved) == {"switch-port"} and moved["switch-port"]["details"]["failure"] == "wrong_port"
    assert f"but LLDP shows none of {MISCABLED}'s NICs there (mlx5_0 on leaf-4 Ethernet" in moved["switch-port"]["reason"]
    for node in (OTHER_DCGM, SWAPPED, UNCABLED, MISCABLED):  # the gate agrees with the record
        got = requests.get(f"{twin.url}/api/v1/nodes/{node}", timeout=5).json()
        assert any(t["key"] == GATE for t in got["spec"].get("taints") or []), node


def test_a_site_without_lldp_says_so_and_the_sign_off_lists_each_port_taken_from_the_inventory(twin, tmp_path):
    """`fabric.lldp: unavailable` with its reason (a site whose switches run no LLDP): the port check judges the
    annotated port without asking the fabric, and the GO carries the words in its record, and the sign-off section lists
    it like a waiver — never silent. Without the opt-out the same port is confirmed by LLDP first."""
    path = Path(target_profile(tmp_path, "nolldp", checks=["switch-port"], required={"switch-port": {}}))
    raw = yaml.safe_load(path.read_text())
    raw["fabric"] = {"lldp": "unavailable", "lldp_reason": "leaf images built without lldpd"}
    path.write_text(yaml.safe_dump(raw))
    proc, run_dir = _accept(twin, tmp_path, "gpu-new-06", "nolldp", "--profile", str(path))  # its port: its own
    assert proc.returncode == 0, proc.stdout + proc.stderr
    port = next(r for r in records(run_dir) if r["details"]["check"] == "switch-port")
    words = "port identity from the inventory, not verified by the fabric (fabric.lldp: unavailable — leaf images " \
            "built without lldpd)"
    assert port["verdict"] == "pass" and port["details"]["evidence"]["port_identity"] == words, port
    summary = (run_dir / "summary.md").read_text()
    assert f"Port identity not verified by the fabric — {words}:" in summary
    assert "- gpu-new-06: switch-port — leaf-4 Ethernet" in summary and "(facing gpu-new-06): up, 400G" in summary
