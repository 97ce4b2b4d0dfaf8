"""The GPU fault (the seed's drill 1, issue 34) through DCGM's field injection, end to end on the twin.

A site-like run (kubeconfig, so the target is a real cluster to every decision: no twin endpoint is used) with
`faults.gpu_fault` in its profile: the drill execs `dcgmi test --inject` in the node's DCGM pod, reads it back
with `dcgmi dmon`, the platform marks the GPU unhealthy, the drill (the site has no remediation) drains the node,
the job resumes — PASS — and the revert injects the healthy value and uncordons. On the same twin, a profile
claiming the site remediates gets FAIL not_remediated (the twin has none), and with the exporter's DaemonSet
selecting no node, FAIL not_exported. On a twin with the defect no-gpu-health-check (nothing marks a GPU DCGM
reports faulted): FAIL gpu_not_isolated (bench/verdicts.yaml rows)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests
import yaml

from bench.verdicts import mismatches, rows
from drills.twin.launcher import start_twin
from drills.twin.profile import PROFILES_DIR
from drills.verdicts.gpu_chain import GPU_IN_USE
from tests.e2e.drill_helpers import drills, drills_popen, records, schedulable, wait_for_injection

pytestmark = pytest.mark.slow

# The chain's own links (two execs, the mark, the drill's drain through the guard) cost this machine ~0.3-0.6 wall
# seconds: 3-6 cluster minutes at 600x on 2 busy cores, with a job that trains on until it is drained (the GPU
# fault is DCGM's record, not a dead GPU). At 300x that overhead halves and the 15-minute target is the platform's.
SCALE = 300.0
DCGM_FIELDS = "twin.gpu-drills.io/dcgm-fields"
SEED = 1  # random.Random(1).randrange(8) == 2: GPU 2 of the node


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("gpu-twin"), scale=SCALE)
    try:
        yield handle
    finally:
        handle.stop()


QUIET_S = 30 * 60 + 60  # the steady state's "no worker restart in the last 30 min", and a cluster minute to spare


def settled(twin) -> None:
    """Wait, on the twin's own clock, until the job's last restart (a previous test's drain) is older than the
    steady state's quiet window: drills on one shared twin must each find the platform nominal."""
    job = f"{twin.url}/apis/batch.volcano.sh/v1alpha1/namespaces/ai-platform/jobs/llm-finetune-8b"
    conditions = (requests.get(job, timeout=5).json().get("status") or {}).get("conditions") or []
    if not any(c.get("status") == "Restarting" for c in conditions):
        return
    stamps = [c.get("lastTransitionTime") for c in conditions]  # the restart, and the job running again after it
    from drills.core.clock import parse_iso

    since = max(parse_iso(t).timestamp() for t in stamps if t)
    deadline = time.monotonic() + 120
    while requests.get(f"{twin.url}/twin/v1/clock", timeout=5).json()["now"] < since + QUIET_S:
        assert time.monotonic() < deadline, "the twin's clock did not reach the end of the quiet window"
        time.sleep(0.1)


def site_profile(folder: Path, twin, **gpu_fault) -> Path:
    """A real-cluster profile reaching the twin through its kubeconfig, running the GPU fault chain only."""
    profile = {
        "name": "site-gpu",
        "cluster": {"mode": "kubeconfig", "kubeconfig": twin.kubeconfig},
        "workloads": {"training": {"checkpoint_interval_steps": 1500}},
        "faults": {"node_modes": ["gpu-unhealthy"], "gpu_fault": {"seed": SEED, **gpu_fault}},
        "safety": {"allow": {"nodes": ["gpu-train-*"], "namespaces": ["ai-platform", "gpu-operator"]}},
    }
    path = folder / "site.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _node(twin, name: str) -> dict:
    return requests.get(f"{twin.url}/api/v1/nodes/{name}", timeout=5).json()


def _fields(node_obj: dict) -> dict:
    return json.loads((node_obj["metadata"].get("annotations") or {}).get(DCGM_FIELDS) or "{}")


def _check(rec: dict, name: str) -> dict:
    return next(c for c in rec["details"]["checks"] if c["name"] == name)


def test_a_real_cluster_profile_fails_a_gpu_through_dcgm_and_the_revert_heals_it(twin, tmp_path):
    profile = site_profile(tmp_path, twin)
    proc = drills_popen("run", "-m", "training", "-k", "unhealthy", "--profile", str(profile), "--no-html",
                        "--reports", str(tmp_path), "--run-id", "gpu")
    try:
        wait_for_injection(tmp_path / "gpu", proc)
        journal = [json.loads(line) for line in (tmp_path / "gpu" / "journal.jsonl").read_text().splitlines()]
        entry = next(e for e in journal if e.get("op") == "open" and e.get("kind") == "gpu-xid")["revert"]
        lost, gpu = entry["node"], entry["gpu"]
        deadline, seen = time.monotonic() + 60, None
        while time.monotonic() < deadline and proc.poll() is None:  # the fault in place: DCGM's cache and the mark
            obj = _node(twin, lost)
            if _fields(obj).get(str(gpu), {}).get("230") == 79 and obj["status"]["allocatable"]["nvidia.com/gpu"] == "7":
                seen = obj
                break
            time.sleep(0.02)
    finally:
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, out + err
    assert seen is not None, "the node never showed XID 79 in DCGM's cache with one GPU less allocatable"
    assert entry["pod"].startswith("nvidia-dcgm-") and entry["namespace"] == "gpu-operator" and entry["seed"] == SEED
    assert gpu == 2 and entry["field"] == 230 and entry["value"] == 79 and entry["healthy"] == 0
    (rec,) = records(tmp_path / "gpu")
    assert rec["verdict"] == "pass" and rec["details"]["lost_node"] == lost
    assert rec["details"]["gpu_fault"]["read_back"].startswith("GPU 2 field 230 = 79 (dcgmi dmon in gpu-operator/")
    assert {c["name"]: c["verdict"] for c in rec["details"]["checks"]}.items() >= {
        "xid exported": "pass", "gpu marked unhealthy": "pass", "fault effect": "pass", "recovery": "pass"}.items()
    kinds = [f["kind"] for f in rec["details"]["faults"]]
    assert kinds[:2] == ["gpu-xid", "node"]  # the XID, then the drill's drain (remediation: drill)
    assert all(r["ok"] for r in rec["details"]["reverts"])
    healed = _node(twin, lost)  # the revert injected the healthy value; the GPU is allocatable again
    assert _fields(healed)[str(gpu)]["230"] == 0, healed["metadata"]
    assert schedulable(healed), (healed["spec"], healed["metadata"])
    assert healed["status"]["allocatable"]["nvidia.com/gpu"] == healed["status"]["capacity"]["nvidia.com/gpu"]
    closed = [json.loads(line) for line in (tmp_path / "gpu" / "journal.jsonl").read_text().splitlines()]
    assert {e["id"] for e in closed if e.get("op") == "open"} == {e["id"] for e in closed if e.get("op") == "close"}


def test_a_site_said_to_remediate_that_never_cordons_fails_not_remediated(twin, tmp_path):
    """The twin has no remediation controller: a profile saying the site has one is a broken link."""
    settled(twin)
    profile = site_profile(tmp_path, twin, remediation="site", remediate_within_s="10m")
    done = drills("run", "-m", "training", "-k", "unhealthy", "--profile", str(profile), "--no-html",
                  "--reports", str(tmp_path), "--run-id", "site")
    (rec,) = records(tmp_path / "site")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rec["verdict"] == "fail" and rec["category"] == "not_remediated", rec["reason"]
    assert _check(rec, "gpu marked unhealthy")["verdict"] == "pass" and _check(rec, "node remediated")["verdict"] == "fail"
    assert [f["kind"] for f in rec["details"]["faults"]] == ["gpu-xid"]  # the drill did not drain: the site was to
    assert "was not cordoned by the site's remediation within 10m" in rec["reason"]


def test_an_xid_no_exporter_on_the_node_reports_fails_not_exported(twin, tmp_path):
    """The exporter's DaemonSet selects a label no node has (a deploy label left unset): DCGM records the
    XID, no exporter runs on the node to report it — FAIL not_exported, whatever happens after (the row of the defect
    no-dcgm-exporter, built here on the shared twin). The DaemonSet is put back."""
    settled(twin)
    ds = f"{twin.url}/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-dcgm-exporter"
    merge = {"Content-Type": "application/merge-patch+json"}
    selector = {"nvidia.com/gpu.present": "true", "gpu-drills.test/no-node-has-this": "true"}
    requests.patch(ds, json={"spec": {"template": {"spec": {"nodeSelector": selector}}}}, headers=merge,
                   timeout=5).raise_for_status()
    try:
        pods = f"{twin.url}/api/v1/namespaces/gpu-operator/pods?labelSelector=app%3Dnvidia-dcgm-exporter"
        deadline = time.monotonic() + 30
        while requests.get(pods, timeout=5).json()["items"] and time.monotonic() < deadline:
            time.sleep(0.05)
        row = next(r for r in rows("training") if r.defect == "no-dcgm-exporter")
        done = drills("run", "-m", "training", "-k", row.keyword, "--profile", str(site_profile(tmp_path, twin)),
                      "--no-html", "--reports", str(tmp_path), "--run-id", "blind")
        (rec,) = records(tmp_path / "blind")
        assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
        assert _check(rec, "xid exported")["verdict"] == "fail" and "gpu marked unhealthy" not in {
            c["name"] for c in rec["details"]["checks"]}  # the chain stops at its first broken link
        assert all(r["ok"] for r in rec["details"]["reverts"])
    finally:
        selector["gpu-drills.test/no-node-has-this"] = None
        requests.patch(ds, json={"spec": {"template": {"spec": {"nodeSelector": selector}}}}, headers=merge,
                       timeout=5).raise_for_status()


@pytest.mark.parametrize("after", ["30s", "0s"])
def test_a_site_whose_remediation_drains_the_node_passes_and_the_drill_drains_nothing(after, tmp_path_factory, tmp_path):
    """The twin runs a remediation (NVSentinel-like: cordon and drain 30 s after the GPU is marked): the drill
    waits for it (remediation: site), judges it, and drains nothing itself; the revert uncordons nothing either —
    the node stays cordoned by the site, as a site's quarantine does until an operator clears it. A remediation at
    once (0 s) drains the node before the exporter reports the XID, and its series then name no pod: who used the
    GPU is read from the exporter before the fault (on a fresh twin, once the exporter answers) — read after the
    drain, the drill was inconclusive on a healthy platform."""
    raw = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    raw.update(name="site-remediates", gpu_remediation={"after": after})
    folder = tmp_path_factory.mktemp("remediating")
    (folder / "p.yaml").write_text(yaml.safe_dump(raw))
    handle = start_twin(folder / "state", scale=SCALE, profile=str(folder / "p.yaml"))
    try:
        done = drills("run", "-m", "training", "-k", "unhealthy", "--no-html", "--reports", str(tmp_path),
                      "--run-id", "site", "--profile", str(site_profile(tmp_path, handle, remediation="site")))
        (rec,) = records(tmp_path / "site")
        assert done.returncode == 0, done.stdout + done.stderr
        assert _check(rec, "node remediated")["verdict"] == "pass" and "cordoned node" in _check(rec, "node remediated")["reason"]
        assert [f["kind"] for f in rec["details"]["faults"]][0] == "gpu-xid"
        assert "node" not in [f["kind"] for f in rec["details"]["faults"]]  # the site drained, not the drill
        assert "before the fault @" in _check(rec, GPU_IN_USE)["reason"], _check(rec, GPU_IN_USE)
    finally:
        handle.stop()


@pytest.mark.parametrize("row", [r for r in rows("training") if r.test and r.test.endswith("test_gpu_fault_chain.py")],
                         ids=lambda r: r.defect)
def test_a_broken_link_of_the_chain_fails_for_its_reason(row, twin_factory, tmp_path):
    broken = twin_factory(defects=[row.defect], scale=row.scale)
    done = drills("run", "-m", row.drill, "-k", row.keyword, "--twin-state", str(broken.state_dir), "--no-html",
                  "--reports", str(tmp_path), "--run-id", row.defect)
    (rec,) = records(tmp_path / row.defect)
    assert not mismatches(row, done.returncode, rec), (mismatches(row, done.returncode, rec), done.stdout + done.stderr)
    assert _check(rec, row.check)["verdict"] == "fail"
    assert all(r["ok"] for r in rec["details"]["reverts"]) and [f["kind"] for f in rec["details"]["faults"]] == ["gpu-xid"]


def test_an_xid_on_a_gpu_no_worker_uses_is_inconclusive_not_a_pass(tmp_path_factory, tmp_path):
    """Issue 30, class 3 on the GPU fault chain (red team, wave 7): the job's workers use 6 of each node's 8 GPUs
    (twin profile edit) and the site's profile aims the fault at GPU 7 (`faults.gpu_fault.gpu`). Every link holds —
    DCGM reports it, the exporter exports it, the device plugin marks it, the drill drains the node, the job resumes:
    PASS before, for a fault that never touched the job (its recovery was from the drill's own drain). Now the chain
    reads, from the exporter's pod-resources labels of that GPU's series, which pod uses it: none — inconclusive
    (no_effect) before anything is drained, naming the GPU, what the exporter said and the job's workers there."""
    raw = yaml.safe_load((PROFILES_DIR / "minimal.yaml").read_text())
    raw["name"] = "six-of-eight"
    raw["workloads"]["training"]["llm-finetune-8b"]["gpus_per_worker"] = 6
    folder = tmp_path_factory.mktemp("six-of-eight")
    (folder / "p.yaml").write_text(yaml.safe_dump(raw))
    handle = start_twin(folder / "state", scale=SCALE, profile=str(folder / "p.yaml"))
    try:
        done = drills("run", "-m", "training", "-k", "unhealthy", "--no-html", "--reports", str(tmp_path),
                      "--run-id", "idle-gpu", "--profile", str(site_profile(tmp_path, handle, gpu=7)))
        (rec,) = records(tmp_path / "idle-gpu")
        assert done.returncode == 1, done.stdout + done.stderr
        assert rec["verdict"] == "inconclusive" and rec["category"] == "no_effect", rec["reason"]
        check = _check(rec, "faulted gpu in use")
        assert check["verdict"] == "inconclusive" and "is used by no pod" in check["reason"], check
        assert _check(rec, "xid exported")["verdict"] == "pass"  # the link before it held: the fault is in place
        assert rec["details"]["gpu_fault"]["gpu"] == 7
        assert [f["kind"] for f in rec["details"]["faults"]] == ["gpu-xid"]  # nothing drained for a fault on no one
        assert all(r["ok"] for r in rec["details"]["reverts"])
    finally:
        handle.stop()


def test_a_gpu_already_missing_before_the_xid_is_not_its_mark(twin_factory, tmp_path):
    """Issue 30, class 1 on the GPU fault chain (red team, wave 8): the device plugin of the training nodes already
    reports one GPU fewer before the drill (allocatable 7 of 8) and nothing marks an unhealthy GPU (no-gpu-health-check).
    Before, "allocatable 7 of 8" was read as the XID's mark, observed after it: PASS. The node's marks are now read
    before the XID and only a new one counts: none came, and the old one cannot say whether this GPU was marked —
    inconclusive, naming it; nothing is drained."""
    twin = twin_factory(defects=["no-gpu-health-check"], scale=600.0)
    for name in ("gpu-train-01", "gpu-train-02", "gpu-train-03"):
        requests.patch(f"{twin.url}/api/v1/nodes/{name}/status", json={"status": {"allocatable": {"nvidia.com/gpu": "7"}}},
                       headers={"Content-Type": "application/merge-patch+json"}, timeout=5).raise_for_status()
    done = drills("run", "-m", "training", "-k", "unhealthy", "--twin-state", str(twin.state_dir), "--no-html",
                  "--reports", str(tmp_path), "--run-id", "missing")
    (rec,) = records(tmp_path / "missing")
    assert (rec["verdict"], rec["category"]) == ("inconclusive", "not_observed"), (rec["reason"], done.stdout[-2000:])
    marked = _check(rec, "gpu marked unhealthy")
    assert marked["verdict"] == "inconclusive" and "already showed allocatable nvidia.com/gpu 7 of 8 before the XID" \
        in marked["reason"], marked
    assert [f["kind"] for f in rec["details"]["faults"]] == ["gpu-xid"]  # the drill drained nothing
