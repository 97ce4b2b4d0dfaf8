"""The twin's scheduler as kubectl and the kubernetes client see it: GPU pods land on GPU nodes and
go Ready, unschedulable pods say why like kube-scheduler does, cordoned nodes take nothing new,
Volcano gangs wait until the whole group fits, and priority preempts unless the defect forbids it."""

from __future__ import annotations

import shutil

import pytest
from kubernetes import client

from twin_core_helpers import NS, condition, core_of, events, first_event, gpu_pod, kubectl, wait_for

FREE_TRAINING_NODES = ("gpu-train-03", "gpu-train-04")  # the seeded fine-tuning job holds 01 and 02


def _node_of(core, name: str) -> str | None:
    return core.read_namespaced_pod(name, NS).spec.node_name


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_gpu_pod_is_scheduled_on_a_gpu_node_and_becomes_ready(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("gpu-job", gpus=4))
    kubectl(handle, "wait", "--for=condition=Ready", "pod/gpu-job", "-n", NS, "--timeout=30s")
    pod = core.read_namespaced_pod("gpu-job", NS)
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["gpu-drills.io/role"] == "training"
    assert int(node.status.allocatable["nvidia.com/gpu"]) >= 4
    assert pod.status.phase == "Running" and pod.status.pod_ip and pod.status.host_ip
    scheduled = first_event(core, "gpu-job", "Scheduled")
    assert scheduled.message == f"Successfully assigned {NS}/gpu-job to {pod.spec.node_name}"
    assert scheduled.source.component == "default-scheduler"
    assert [e.reason for e in sorted(events(core, "gpu-job"), key=lambda e: e.first_timestamp)][0] == "Scheduled"


def test_failed_scheduling_explains_like_kube_scheduler(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("no-toleration", gpus=1, tolerations=[]))
    core.create_namespaced_pod(NS, gpu_pod("too-big", gpus=16))
    no_tol = wait_for(lambda: first_event(core, "no-toleration", "FailedScheduling"), "FailedScheduling")
    assert no_tol.type == "Warning"
    # the 2 CPU nodes of the system pool pass the taint filter and fail the pod's training nodeSelector (kube-
    # scheduler reports each node's first failing filter: TaintToleration runs before NodeAffinity)
    assert no_tol.message.startswith("0/8 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
                                     "6 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    too_big = wait_for(lambda: first_event(core, "too-big", "FailedScheduling"), "FailedScheduling")
    assert too_big.message.startswith("0/8 nodes are available: 4 Insufficient nvidia.com/gpu, 4 node(s) didn't "
                                      "match Pod's node affinity/selector.")  # equal counts: in text order
    assert "preemption: 0/8 nodes are available" in too_big.message
    cond = condition(core.read_namespaced_pod("too-big", NS), "PodScheduled")
    assert (cond.status, cond.reason) == ("False", "Unschedulable") and "Insufficient nvidia.com/gpu" in cond.message
    assert core.read_namespaced_pod("too-big", NS).spec.node_name is None


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_cordoned_node_gets_no_new_pods(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    for node in FREE_TRAINING_NODES:
        kubectl(handle, "cordon", node)
    taint = wait_for(lambda: [t for t in core.read_node("gpu-train-03").spec.taints or []
                              if t.key == "node.kubernetes.io/unschedulable"], "the unschedulable taint")
    assert taint[0].effect == "NoSchedule"
    core.create_namespaced_pod(NS, gpu_pod("whole-node", gpus=8))
    failed = wait_for(lambda: first_event(core, "whole-node", "FailedScheduling"), "FailedScheduling")
    assert "2 node(s) were unschedulable" in failed.message
    assert _node_of(core, "whole-node") is None
    kubectl(handle, "uncordon", "gpu-train-04")
    node = wait_for(lambda: _node_of(core, "whole-node"), "the pod to be bound after uncordon")
    assert node == "gpu-train-04"
    wait_for(lambda: not [t for t in core.read_node("gpu-train-04").spec.taints or []
                          if t.key == "node.kubernetes.io/unschedulable"], "the taint to go")


def _gang(core, group: str, members: int, min_member: int, gpus: int = 8) -> None:
    custom = client.CustomObjectsApi(core.api_client)
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": group},
        "spec": {"minMember": min_member, "queue": "training"}})
    for i in range(members):
        pod = gpu_pod(f"{group}-{i}", gpus=gpus, scheduler="volcano",
                      annotations={"scheduling.k8s.io/group-name": group})
        core.create_namespaced_pod(NS, pod)


def test_gang_waits_until_the_whole_group_fits(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    _gang(core, "too-wide", members=3, min_member=3)  # 3 whole nodes, 2 are free
    gang = wait_for(lambda: [e for e in events(core, "too-wide-0", "FailedScheduling")
                             if "tasks in gang unschedulable" in e.message], "the gang's FailedScheduling")
    msg = gang[0].message
    assert msg.startswith("1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
                          "Pending: 1 Unschedulable, 2 Schedulable.")
    assert "Insufficient nvidia.com/gpu" in msg
    assert events(core, "too-wide-0", "FailedScheduling")[0].source.component == "volcano"
    assert [_node_of(core, f"too-wide-{i}") for i in range(3)] == [None, None, None]

    _gang(core, "fits", members=2, min_member=2)  # both remaining nodes at once
    nodes = wait_for(lambda: all(_node_of(core, f"fits-{i}") for i in range(2)) and
                     sorted(_node_of(core, f"fits-{i}") for i in range(2)), "the gang to be bound")
    assert nodes == list(FREE_TRAINING_NODES)
    assert [_node_of(core, f"too-wide-{i}") for i in range(3)] == [None, None, None]


def test_gang_holds_its_first_pods_until_min_member_exist(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    _gang(core, "late", members=1, min_member=2, gpus=1)
    waiting = wait_for(lambda: first_event(core, "late-0", "FailedScheduling"), "the gang to wait").message
    assert "pod group is not ready, 1 Pending, 2 minAvailable" in waiting
    assert _node_of(core, "late-0") is None
    core.create_namespaced_pod(NS, gpu_pod("late-1", gpus=1, scheduler="volcano",
                                           annotations={"scheduling.k8s.io/group-name": "late"}))
    wait_for(lambda: _node_of(core, "late-0") and _node_of(core, "late-1"), "both members bound")


def test_inference_priority_preempts_training(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    victim_node = "gpu-train-01"
    victim = wait_for(lambda: [p for p in core.list_namespaced_pod(NS).items
                               if p.spec.node_name == victim_node and p.status.phase == "Running"],
                      "a training worker on gpu-train-01")[0].metadata.name
    core.create_namespaced_pod(NS, gpu_pod("urgent", gpus=8, node=victim_node, priority_class="inference-high"))
    preempted = wait_for(lambda: first_event(core, victim, "Preempted"), "the Preempted event")
    assert preempted.message.startswith("Preempted by pod ") and preempted.message.endswith(f"on node {victim_node}")
    assert wait_for(lambda: _node_of(core, "urgent"), "the preemptor to be bound") == victim_node


def test_no_preemption_defect_leaves_the_pod_pending(twin_factory):
    handle = twin_factory(defects=["no-preemption"], scale=300)
    core = core_of(handle)
    wait_for(lambda: [p for p in core.list_namespaced_pod(NS).items
                      if p.spec.node_name == "gpu-train-01" and p.status.phase == "Running"], "the training worker")
    core.create_namespaced_pod(NS, gpu_pod("urgent", gpus=8, node="gpu-train-01", priority_class="inference-high"))
    failed = wait_for(lambda: first_event(core, "urgent", "FailedScheduling"), "FailedScheduling")
    assert "preemption: not eligible due to preemptionPolicy=Never." in failed.message
    assert _node_of(core, "urgent") is None
    assert not [e for e in core.list_namespaced_event(NS).items if e.reason == "Preempted"]


def test_replicas_placed_in_one_cycle_spread_over_their_nodes(twin_factory):
    """The seeded inference Deployment's two replicas come in one scheduling cycle: the first must count on its
    node (kube-scheduler assumes a placed pod before its bind is seen) or the soft spread sees no sibling and
    the bin-packing score puts the second beside it — both on gpu-infer-01, gpu-infer-02 idle."""
    handle = twin_factory(scale=300)
    core = core_of(handle)
    nodes = wait_for(lambda: (lambda n: len(n) == 2 and all(n) and n)(
        [p.spec.node_name for p in core.list_namespaced_pod(NS, label_selector="app=llama-7b-infer").items]),
        "both inference replicas bound")
    assert sorted(nodes) == ["gpu-infer-01", "gpu-infer-02"], nodes
