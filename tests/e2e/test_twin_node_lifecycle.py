"""Node lifecycle in the twin, checked on twin-time timestamps: a stopped kubelet → NotReady after the
grace period (50 s) → unreachable taints → its pods evicted after tolerationSeconds (300 s by
default); heartbeats; cordon taints; GPU health through the device plugin (and without it)."""

from __future__ import annotations

import shutil

import pytest
import requests
from kubernetes import client

from twin_core_helpers import NS, condition, core_of, fault, first_event, gpu_pod, kubectl, ts, wait_for

NODE = "gpu-train-03"  # free on the minimal profile (the seeded job holds 01 and 02)
UNREACHABLE = "node.kubernetes.io/unreachable"


def _taints(core, node: str) -> dict:
    return {(t.key, t.effect): t for t in core.read_node(node).spec.taints or []}


def _bound_running(core, name: str):
    pod = core.read_namespaced_pod(name, NS)
    return pod if pod.status.phase == "Running" else None


def _gone(core, name: str) -> bool:
    return name not in [p.metadata.name for p in core.list_namespaced_pod(NS).items]


def _evicted(core, name: str) -> bool:
    """Deleted by the taint manager: with no kubelet to finish it the pod stays Terminating, as on a real cluster."""
    return any(p.metadata.name == name and p.metadata.deletion_timestamp for p in core.list_namespaced_pod(NS).items)


def test_stopped_kubelet_goes_not_ready_and_its_pods_are_evicted(twin_factory):
    handle = twin_factory(scale=60)  # twin timings to ±10 s: at 600× a busy CPU's 20 ms stall breaks that
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("default-tol", gpus=4, node=NODE))
    short = gpu_pod("short-tol", gpus=2, node=NODE)
    short["spec"]["tolerations"].append({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                         "tolerationSeconds": 30})
    core.create_namespaced_pod(NS, short)
    forever = gpu_pod("forever", gpus=1, node=NODE)
    forever["spec"]["tolerations"].append({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"})
    core.create_namespaced_pod(NS, forever)
    for name in ("default-tol", "short-tol", "forever"):
        wait_for(lambda: _bound_running(core, name), f"{name} running")

    stopped = ts(fault(handle, f"nodes/{NODE}/kubelet", {"action": "stop"})["at"])
    ready = wait_for(lambda: (c := condition(core.read_node(NODE), "Ready")).status == "Unknown" and c, "NotReady")
    assert (ready.reason, ready.message) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert 48 <= ts(ready.last_transition_time) - stopped <= 90  # node_monitor_grace_period 50 s (+ host lag)
    assert ts(ready.last_heartbeat_time) == stopped
    if shutil.which("kubectl"):
        assert "NotReady" in kubectl(handle, "get", "node", NODE).stdout
    taints = wait_for(lambda: (t := _taints(core, NODE)) and (UNREACHABLE, "NoExecute") in t and t, "taints")
    assert (UNREACHABLE, "NoSchedule") in taints
    tainted = ts(taints[(UNREACHABLE, "NoExecute")].time_added)
    assert condition(core.read_namespaced_pod("default-tol", NS), "Ready").status == "False"

    wait_for(lambda: _evicted(core, "short-tol"), "the 30 s pod evicted", deadline_s=20)
    wait_for(lambda: _evicted(core, "default-tol"), "the 300 s pod evicted", deadline_s=20)
    short_evicted = ts(first_event(core, "short-tol", "TaintManagerEviction").first_timestamp)
    default_evicted = first_event(core, "default-tol", "TaintManagerEviction")
    assert default_evicted.message == f"Marking for deletion Pod {NS}/default-tol"
    assert 28 <= short_evicted - tainted <= 60
    assert 298 <= ts(default_evicted.first_timestamp) - tainted <= 340  # default tolerationSeconds 300
    assert not _gone(core, "forever") and not _evicted(core, "forever")
    assert first_event(core, NODE, "NodeNotReady", namespace="default").message == \
        f"Node {NODE} status is now: NodeNotReady"

    fault(handle, f"nodes/{NODE}/kubelet", {"action": "start"})
    wait_for(lambda: condition(core.read_node(NODE), "Ready").status == "True", "Ready again")
    wait_for(lambda: not [k for k in _taints(core, NODE) if k[0] == UNREACHABLE], "the taints to go")
    wait_for(lambda: condition(core.read_namespaced_pod("forever", NS), "Ready").status == "True", "forever Ready")
    # the kubelet is back: it finishes the pods the taint manager deleted while it was away
    wait_for(lambda: _gone(core, "short-tol") and _gone(core, "default-tol"), "the evicted pods to go")


def test_kubelet_back_within_the_grace_period_keeps_the_node_ready(twin_factory):
    handle = twin_factory(scale=60)
    core = core_of(handle)
    fault(handle, f"nodes/{NODE}/kubelet", {"action": "stop"})
    assert fault(handle, f"nodes/{NODE}/kubelet", {"action": "start"})["kubelet"] == "running"
    # a cold pull (90 s) on another node is the clock: when it is Running, the grace period is long over
    core.create_namespaced_pod(NS, gpu_pod("probe", gpus=1, node="gpu-train-04", image="registry.local/cold/x:1"))
    pod = wait_for(lambda: _bound_running(core, "probe"), "probe running")
    assert ts(pod.status.container_statuses[0].state.running.started_at) - ts(pod.status.start_time) >= 75
    assert condition(core.read_node(NODE), "Ready").status == "True"
    assert first_event(core, NODE, "NodeNotReady", namespace="default") is None


def test_nodes_heartbeat_through_their_leases(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    coordination = client.CoordinationV1Api(core.api_client)
    start = ts(requests.get(f"{handle.url}/twin/v1/clock", timeout=5).json()["nowIso"])
    renewed = wait_for(lambda: [lease for lease in coordination.list_namespaced_lease("kube-node-lease").items
                                if lease.spec.renew_time and ts(lease.spec.renew_time) > start], "a lease renewal")
    assert renewed[0].spec.holder_identity == renewed[0].metadata.name
    beat = wait_for(lambda: [n for n in core.list_node().items
                             if ts(condition(n, "Ready").last_heartbeat_time) > start], "a Ready heartbeat")
    assert condition(beat[0], "Ready").status == "True"


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_cordon_taints_the_node_and_uncordon_clears_it(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    kubectl(handle, "cordon", NODE)
    wait_for(lambda: ("node.kubernetes.io/unschedulable", "NoSchedule") in _taints(core, NODE), "the cordon taint")
    assert "SchedulingDisabled" in kubectl(handle, "get", "node", NODE).stdout
    kubectl(handle, "uncordon", NODE)
    wait_for(lambda: ("node.kubernetes.io/unschedulable", "NoSchedule") not in _taints(core, NODE), "taint gone")
    assert ("nvidia.com/gpu", "NoSchedule") in _taints(core, NODE)  # the pool's own taint stays


def test_unhealthy_gpu_drops_allocatable_and_taints_the_node(twin_factory):
    handle = twin_factory(scale=300)
    core = core_of(handle)
    fault(handle, f"nodes/{NODE}/gpu", {"state": "unhealthy", "xid": 79, "count": 1})
    node = wait_for(lambda: (n := core.read_node(NODE)).status.allocatable["nvidia.com/gpu"] == "7" and n,
                    "allocatable to drop")
    assert node.status.capacity["nvidia.com/gpu"] == "8"
    cond = condition(node, "GPUHealthy")
    assert (cond.status, cond.reason) == ("False", "XidCriticalError")
    assert "Xid 79 (GPU has fallen off the bus)" in cond.message
    wait_for(lambda: ("nvidia.com/gpu.unhealthy", "NoSchedule") in _taints(core, NODE), "the unhealthy taint")
    event = first_event(core, NODE, "GPUUnhealthy", namespace="default")
    assert event.type == "Warning" and event.source.component == "nvidia-device-plugin"
    core.create_namespaced_pod(NS, gpu_pod("avoid", gpus=8, node=NODE))
    failed = wait_for(lambda: first_event(core, "avoid", "FailedScheduling"), "FailedScheduling")
    assert "untolerated taint {nvidia.com/gpu.unhealthy: xid}" in failed.message

    fault(handle, f"nodes/{NODE}/gpu", {"state": "healthy"})
    wait_for(lambda: core.read_node(NODE).status.allocatable["nvidia.com/gpu"] == "8", "allocatable restored")
    wait_for(lambda: ("nvidia.com/gpu.unhealthy", "NoSchedule") not in _taints(core, NODE), "taint removed")
    assert condition(core.read_node(NODE), "GPUHealthy").status == "True"
    wait_for(lambda: core.read_namespaced_pod("avoid", NS).spec.node_name == NODE, "the pod placed there again")


def test_no_gpu_health_check_defect_keeps_the_broken_gpu_schedulable(twin_factory):
    handle = twin_factory(defects=["no-gpu-health-check"], scale=300)
    core = core_of(handle)
    fault(handle, f"nodes/{NODE}/gpu", {"state": "unhealthy", "xid": 48})
    wait_for(lambda: (core.read_node(NODE).metadata.annotations or {}).get("twin.gpu-drills.io/gpu-health")
             == "unhealthy", "the fault recorded")
    core.create_namespaced_pod(NS, gpu_pod("lands-on-broken", gpus=8, node=NODE))
    wait_for(lambda: core.read_namespaced_pod("lands-on-broken", NS).spec.node_name == NODE, "the pod bound")
    node = core.read_node(NODE)
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert condition(node, "GPUHealthy") is None
    assert ("nvidia.com/gpu.unhealthy", "NoSchedule") not in _taints(core, NODE)
