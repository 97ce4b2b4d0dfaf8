"""The GPU fault chain's pure parts: the twin's `dcgmi` (shapes from NVIDIA/DCGM dcgmi/DcgmiTest.cpp and
dcgmi/DeviceMonitor.cpp), the drill's command lines and its reading of `dcgmi dmon`, the random GPU choice, the
twin's reading of DCGM's cache, the DaemonSet rule that keeps daemons through a NoSchedule taint, and the three
link judges — each failing for its own reason."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from drills.faults.dcgm import dmon_command, inject_command, parse_dmon
from drills.faults.gpu_xid import pick_gpu
from drills.measure.gpu_chain import ExporterView, Marked
from drills.twin.controllers.daemonset import eligible
from drills.twin.controllers.nodeutil import DCGM_FIELDS_ANNOTATION, dcgm_critical_xids
from drills.twin.workloads import container_exec
from drills.twin.workloads.dcgmi import dcgmi
from drills.verdicts.gpu_chain import GPU_IN_USE, judge_exported, judge_gpu_in_use, judge_marked, judge_remediated

NODE = {"metadata": {"name": "gpu-train-01", "annotations": {}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}
T0 = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc)


def _node(fields: dict | None = None) -> dict:
    ann = {DCGM_FIELDS_ANNOTATION: json.dumps(fields)} if fields is not None else {}
    return {**NODE, "metadata": {**NODE["metadata"], "annotations": ann}}


def test_the_drill_injects_with_dcgms_documented_arguments_and_reads_back_one_sample():
    # dcgmi/CommandLineParser.cpp ProcessAdminCommandLine: --inject, --gpuid, -f/--field, -v/--value, --offset
    assert inject_command(3, 230, 79) == ["dcgmi", "test", "--inject", "--gpuid", "3", "-f", "230", "-v", "79",
                                          "--offset", "0"]
    assert dmon_command(3, 230) == ["dcgmi", "dmon", "-i", "3", "-e", "230", "-c", "1"]


def test_the_twins_dcgmi_injects_into_the_nodes_cache_and_dmon_reads_it_back():
    out = dcgmi(["test", "--inject", "--gpuid", "3", "-f", "230", "-v", "79", "--offset", "0"], _node())
    assert (out.stdout, out.code) == (b"Successfully injected field info.\n", 0)  # DcgmiTest.cpp InjectCache
    assert json.loads(out.node_annotations[DCGM_FIELDS_ANNOTATION]) == {"3": {"230": 79}}
    read = dcgmi(["dmon", "-i", "3", "-e", "230", "-c", "1"], _node({"3": {"230": 79}})).stdout.decode()
    # DeviceMonitor.cpp: "#Entity" in 14 + 2, "XIDER" (width 5) in 5 + 6 + 2; the ID line; "GPU 3" then the value
    assert read.splitlines() == ["#Entity         XIDER        ", "ID                           ",
                                 "GPU 3           79           "]
    assert parse_dmon(read, 3) == (True, 79)
    never = dcgmi(["dmon", "-i", "0", "-e", "230", "-c", "1"], _node({"3": {"230": 79}})).stdout.decode()
    assert parse_dmon(never, 0) == (True, None)  # N/A: nothing in the cache for GPU 0


@pytest.mark.parametrize("args, code, says", [
    (["test", "--inject", "--gpuid", "8", "-f", "230", "-v", "79"], 254, "Unable to inject info"),  # no GPU 8
    (["test", "--inject", "--gpuid", "0", "-f", "230"], 255, "The -v/--value argument is required for --inject"),
    (["test", "--inject", "--gpuid", "0", "-v", "79"], 255, "The --field argument is required"),
    (["test", "--inject", "-g", "1", "-f", "230", "-v", "79"], 255, "Injection can only be specified for a single GPU"),
])
def test_the_twins_dcgmi_refuses_what_dcgmi_refuses(args, code, says):
    out = dcgmi(args, _node())
    assert out.code == code and says in (out.stdout + out.stderr).decode() and out.node_annotations is None


def test_only_dcgm_images_have_dcgmi():
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    with pytest.raises(container_exec.NotFound):
        container_exec.run(["dcgmi", "dmon", "-e", "230"], pod, "c", _node(), 0.0)
    pod["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/cloud-native/dcgm:3.3.9-1-ubuntu22.04"
    assert container_exec.run(["dcgmi", "dmon", "-i", "0", "-e", "230"], pod, "c", _node(), 0.0).code == 0


@pytest.mark.parametrize("text", ["", "Error: unable to establish a connection\n", "#Entity  XIDER\nID\nGPU 3  x7\n",
                                  "#Entity  XIDER\nID\nGPU 4  79\n"])
def test_a_dmon_reading_that_is_not_dmons_shape_or_lacks_the_gpu_reads_as_not_found(text):
    assert parse_dmon(text, 3) == (False, None)


def test_the_gpu_choice_is_reproducible_from_its_seed_and_within_the_node():
    picks = [pick_gpu(8, seed) for seed in range(200)]
    assert picks == [pick_gpu(8, seed) for seed in range(200)] and set(picks) == set(range(8))
    assert pick_gpu(8, 1) == 2  # the e2e test's seed


def test_the_twin_marks_a_gpu_only_for_a_critical_xid_in_dcgms_cache():
    assert dcgm_critical_xids(_node({"2": {"230": 79}, "3": {"230": 13}, "4": {"230": 0}, "5": {"311": 3}})) == {2: 79}
    assert dcgm_critical_xids(_node()) == {} and dcgm_critical_xids(
        {"metadata": {"annotations": {DCGM_FIELDS_ANNOTATION: "not json"}}}) == {}


def test_a_daemon_already_on_a_node_stays_through_a_noschedule_taint_but_not_a_noexecute_one():
    ds = {"spec": {"template": {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}}}
    health = {"spec": {"taints": [{"key": "nvidia.com/gpu.unhealthy", "value": "xid", "effect": "NoSchedule"}]}}
    assert not eligible(ds, health) and eligible(ds, health, running=True)  # upstream shouldContinueRunning
    evict = {"spec": {"taints": [{"key": "gpu-drills.io/node-loss", "value": "drill", "effect": "NoExecute"}]}}
    assert not eligible(ds, evict, running=True)


def _view(pod="nvidia-dcgm-exporter-x", ready=True, value=None, problem=None) -> ExporterView:
    return ExporterView("gpu-train-01", pod, ready, value, "gpu-operator/nvidia-dcgm-exporter-x @ resourceVersion 7",
                        problem)


def test_an_xid_no_exporter_reports_fails_and_a_wrong_reading_fails():
    none = judge_exported(_view(pod=None, problem="no app=nvidia-dcgm-exporter pod is scheduled on gpu-train-01"), 2, 79)
    assert not none.passed and not none.inconclusive and "reaches no metric and no alert" in none.reason
    assert not judge_exported(_view(ready=False), 2, 79).passed
    wrong = judge_exported(_view(value=0.0), 2, 79)
    assert not wrong.passed and wrong.measured == 0.0 and "not the injected 79" in wrong.reason
    assert judge_exported(_view(value=79.0), 2, 79).passed
    unread = judge_exported(_view(problem="its /metrics was not read through the pod proxy (404)"), 2, 79)
    assert unread.passed and "metric not read" in unread.reason  # the pod on the node is what was observed


def test_a_fault_on_a_gpu_no_worker_of_the_job_uses_is_inconclusive():
    """Issue 30, class 3 on the GPU chain: the exporter's pod-resources labels say who uses the faulted GPU; a GPU
    no worker uses (or another pod's) never reached the job; an exporter that names no pod, or was not read, leaves
    it unobserved — never a pass on the node's word."""
    workers = ("llm-finetune-8b-worker-0",)

    def view(owner=None, mapped=True, value=79.0, problem=None):
        return ExporterView("gpu-train-01", "nvidia-dcgm-exporter-x", True, value, "gpu-operator/x @ resourceVersion 7",
                            problem, owner, mapped)

    ok = judge_gpu_in_use(view("ai-platform/llm-finetune-8b-worker-0"), 3, "ai-platform", workers)
    assert ok.passed and ok.name == GPU_IN_USE and "ai-platform/llm-finetune-8b-worker-0" in ok.reason
    idle = judge_gpu_in_use(view(None), 7, "ai-platform", workers)
    assert idle.inconclusive and not idle.unobserved and "GPU 7 of node gpu-train-01 is used by no pod" in idle.reason
    other = judge_gpu_in_use(view("ai-platform/burst-1-worker-0"), 7, "ai-platform", workers)
    assert other.inconclusive and "used by ai-platform/burst-1-worker-0, not a worker of the job" in other.reason
    same_name = judge_gpu_in_use(view("other-ns/llm-finetune-8b-worker-0"), 3, "ai-platform", workers)
    assert same_name.inconclusive  # a pod of the same name in another namespace is not the job's
    unmapped = judge_gpu_in_use(view(None, mapped=False), 3, "ai-platform", workers)
    assert unmapped.inconclusive and unmapped.unobserved and "pod mapping is off" in unmapped.reason
    unread = judge_gpu_in_use(view(None, mapped=False, value=None, problem="its /metrics was not read (404)"), 3,
                              "ai-platform", workers)
    assert unread.inconclusive and unread.unobserved and "was not read (404)" in unread.reason


def test_a_gpu_never_marked_fails_as_its_own_link_not_as_an_slo_breach():
    never = judge_marked(None, T0.timestamp(), 300.0, "gpu-train-01", 2)
    assert not never.passed and not never.never_reached and never.name == "gpu marked unhealthy"
    late = judge_marked(Marked("allocatable nvidia.com/gpu 7 of 8", datetime(2026, 12, 5, 12, 6, tzinfo=timezone.utc),
                               "nodes/gpu-train-01"), T0.timestamp(), 300.0, "gpu-train-01", 2)
    assert not late.passed and late.measured == 360.0 and "over the limit of 5m" in late.reason
    ok = judge_marked(Marked("taint nvidia.com/gpu.unhealthy:NoSchedule", datetime(2026, 12, 5, 12, 1, tzinfo=timezone.utc),
                             "nodes/gpu-train-01"), T0.timestamp(), 300.0, "gpu-train-01", 2)
    assert ok.passed and ok.measured == 60.0


def test_a_site_that_never_cordons_fails_not_remediated():
    never = judge_remediated(None, T0.timestamp(), 600.0, "gpu-train-01")
    assert not never.passed and not never.never_reached and "remediation: site" in never.reason
    done = judge_remediated(Marked("spec.unschedulable=true", datetime(2026, 12, 5, 12, 2, tzinfo=timezone.utc),
                                   "nodes/gpu-train-01"), T0.timestamp(), 600.0, "gpu-train-01")
    assert done.passed and done.measured == 120.0


def test_the_scheduled_run_may_exec_in_the_dcgm_namespace_only_when_the_site_runs_the_gpu_fault(tmp_path):
    from drills.schedule.cronjob import ScheduleOptions, render

    def roles(extra: str) -> dict:
        path = tmp_path / "p.yaml"
        path.write_text("cluster: {mode: in-cluster}\nsafety: {allow: {nodes: [gpu-*], namespaces: [ai-platform]}}\n"
                        + extra)
        return {d["metadata"]["namespace"]: d["rules"] for d in render(ScheduleOptions(profile=str(path), image="i"))
                if d["kind"] == "Role"}

    assert "gpu-operator" not in roles("")
    assert roles("faults: {gpu_fault: {}}\n")["gpu-operator"] == [
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]
    assert "gpu-operator" not in roles("faults: {gpu_fault: {}, node_modes: [cordon-drain]}\n")


def test_the_mark_is_timed_by_the_nodes_own_stamp_not_by_when_the_drill_looked():
    """Under a busy machine the drill reads the exporter first and looks at the node minutes (of a 600x clock) after
    the device plugin marked it: the mark's time is the condition's lastTransitionTime (or the taint's timeAdded),
    not the observation — which alone failed a healthy twin "marked 6–11 min after the XID". A stamp older than
    the window (a mark from before the fault) or later than the observation is not used; allocatable alone has no
    time, so only the observation is known."""
    from drills.measure.gpu_chain import marked_since
    from drills.profile.gpu_fault import GpuFault

    cfg = GpuFault()
    node = {**NODE, "status": {**NODE["status"], "allocatable": {"nvidia.com/gpu": "7"}, "conditions": [
        {"type": "GPUHealthy", "status": "False", "lastTransitionTime": "2026-12-05T12:01:10Z"}]},
            "spec": {"taints": [{"key": "nvidia.com/gpu.unhealthy", "effect": "NoSchedule",
                                 "timeAdded": "2026-12-05T12:01:12Z"}]}}
    observed = datetime(2026, 12, 5, 12, 9, tzinfo=timezone.utc)  # looked 8 minutes later
    at, what = marked_since(node, cfg, observed, T0.timestamp() - 300)
    assert at == datetime(2026, 12, 5, 12, 1, 10, tzinfo=timezone.utc)
    assert what == "condition GPUHealthy=False lastTransitionTime"
    verdict = judge_marked(Marked("allocatable nvidia.com/gpu 7 of 8", at, "nodes/gpu-train-01"), T0.timestamp(),
                           300, "gpu-train-01", 5)
    assert verdict.passed and verdict.measured == 70
    assert marked_since(node, cfg, observed, T0.timestamp() + 600) is None  # both stamps older than the window
    assert marked_since(node, cfg, datetime(2026, 12, 5, 12, 1, tzinfo=timezone.utc), 0) is None  # after the look
    plain = {**NODE, "status": {**NODE["status"], "allocatable": {"nvidia.com/gpu": "7"}}}
    assert marked_since(plain, cfg, observed, 0) is None


def test_a_node_already_cordoned_before_the_xid_proves_no_remediation():
    """The class of 'a mark already there before the XID' (wave 8) for the site's remediation: a node cordoned before
    the fault is no cordon by the site's remediation after it — inconclusive, naming how it was."""
    from datetime import datetime, timezone

    from drills.measure.gpu_chain import Marked, NodeMarks
    from drills.verdicts.gpu_chain import judge_remediated

    before = NodeMarks(8, 8, (), "nodes/gpu-train-01 @ resourceVersion 7, before the fault", "spec.unschedulable=true")
    seen = Marked("spec.unschedulable=true", datetime(2026, 1, 1, tzinfo=timezone.utc), "nodes/gpu-train-01, observed")
    verdict = judge_remediated(seen, seen.at.timestamp(), 300.0, "gpu-train-01", before)
    assert verdict.inconclusive and "already out of scheduling before the XID (spec.unschedulable=true" in verdict.reason
    fresh = NodeMarks(8, 8, (), "nodes/gpu-train-01 @ resourceVersion 7, before the fault")
    assert judge_remediated(seen, seen.at.timestamp(), 300.0, "gpu-train-01", fresh).passed
