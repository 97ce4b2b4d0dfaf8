"""DaemonSets on the twin through the real kubectl: the GPU node agents run one pod per GPU node, a
cordoned node keeps its daemons, and `kubectl drain` refuses without `--ignore-daemonsets`."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from drills.twin.launcher import start_twin
from tests.e2e.test_twin_kubectl import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH"),
]

AGENTS = {("gpu-operator", "nvidia-device-plugin-daemonset"), ("gpu-operator", "nvidia-dcgm-exporter"),
          ("gpu-operator", "nvidia-dcgm"), ("nvidia-network-operator", "rdma-shared-dp-ds")}
GPU_NODES = 6  # the minimal profile: 4 training + 2 inference nodes (and 2 CPU nodes of the system pool)


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory) -> Kubectl:
    handle = start_twin(tmp_path_factory.mktemp("twin-ds"), profile="minimal")
    try:
        yield Kubectl(handle, tmp_path_factory.mktemp("kube-cache"))
    finally:
        handle.stop()


def _daemonsets(kubectl: Kubectl) -> dict:
    items = json.loads(kubectl("get", "daemonsets", "-A", "-o", "json"))["items"]
    return {(d["metadata"]["namespace"], d["metadata"]["name"]): d.get("status") or {} for d in items}


def _until(predicate, what: str, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def test_the_gpu_node_agents_run_on_every_gpu_node(kubectl):
    _until(lambda: all(s.get("numberReady") == GPU_NODES for k, s in _daemonsets(kubectl).items() if k in AGENTS)
           and AGENTS <= set(_daemonsets(kubectl)), "every agent Ready on every GPU node")
    status = _daemonsets(kubectl)[("gpu-operator", "nvidia-dcgm-exporter")]
    assert status["desiredNumberScheduled"] == status["currentNumberScheduled"] == GPU_NODES
    assert status["numberMisscheduled"] == 0
    table = kubectl("get", "ds", "-n", "gpu-operator")
    assert "nvidia-dcgm-exporter" in table and "DESIRED" in table
    pods = json.loads(kubectl("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset",
                              "-o", "json"))["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(
        kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "jsonpath={.items[*].metadata.name}").split())
    assert not [p for p in pods if p["spec"]["nodeName"].startswith("cpu-system-")]  # the system pool has no GPU
    tolerated = {(t.get("key"), t.get("effect")) for t in pods[0]["spec"]["tolerations"]}
    assert {("nvidia.com/gpu", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/unschedulable", "NoSchedule")} <= tolerated
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"


def test_a_deleted_daemon_pod_comes_back_on_its_node(kubectl):
    pod = _until(lambda: kubectl("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-dcgm-exporter",
                                 "--field-selector", "spec.nodeName=gpu-train-01", "-o", "name").strip(), "a pod")
    kubectl("delete", "-n", "gpu-operator", pod, "--grace-period=1")
    _until(lambda: (fresh := kubectl("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-dcgm-exporter",
                                     "--field-selector", "spec.nodeName=gpu-train-01", "-o", "name").strip())
           and fresh != pod, "a new daemon pod on gpu-train-01")


def test_drain_refuses_without_ignore_daemonsets_and_keeps_them_with_it(kubectl):
    node = "gpu-infer-02"
    refused = kubectl.run("drain", node, "--timeout=10s", check=False)
    assert refused.returncode != 0
    assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)" in refused.stderr
    assert "gpu-operator/nvidia-dcgm-exporter-" in refused.stderr
    drained = kubectl.run("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=60s")
    assert f"node/{node} drained" in drained.stdout
    assert "Warning: ignoring DaemonSet-managed Pods" in drained.stderr
    time.sleep(0.5)  # 30 twin seconds: a daemon on a cordoned node is not taken away
    on_node = kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}", "-o",
                      "jsonpath={.items[*].metadata.ownerReferences[0].kind}").split()
    assert on_node == ["DaemonSet"] * len(AGENTS)
    kubectl("uncordon", node)


def test_a_new_daemonset_follows_its_node_selector(kubectl):
    kubectl("apply", "-f", "-", input=(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: infer-agent, namespace: default}\nspec:\n"
        "  selector: {matchLabels: {app: infer-agent}}\n  template:\n    metadata: {labels: {app: infer-agent}}\n"
        "    spec:\n      nodeSelector: {gpu-drills.io/role: inference}\n"
        "      tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
        "      containers: [{name: agent, image: busybox}]\n"))
    _until(lambda: _daemonsets(kubectl).get(("default", "infer-agent"), {}).get("numberReady") == 2, "2 ready")
    kubectl("label", "node", "gpu-infer-01", "gpu-drills.io/role=training", "--overwrite")
    _until(lambda: _daemonsets(kubectl)[("default", "infer-agent")].get("desiredNumberScheduled") == 1
           and len(kubectl("get", "pods", "-l", "app=infer-agent", "-o", "name").split()) == 1, "one left")
    kubectl("label", "node", "gpu-infer-01", "gpu-drills.io/role=inference", "--overwrite")
