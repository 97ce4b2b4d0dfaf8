"""Pure parts of the twin's cluster core: quantities, requests, tolerations, filters in kube-scheduler's
order, the FailedScheduling message, and when NoExecute taints evict a pod."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from drills.twin.controllers.nodelifecycle import effective_tolerations, eviction_time
from drills.twin.controllers.nodeutil import (
    matches_node_selector, parse_quantity, pod_requests, pre_stop_seconds, readiness_delay, startup_delay, toleration_seconds,
)
from drills.twin.controllers.schedfit import (
    NodeState, failure_message, filter_node, may_preempt, preemption_message, queue_of, within_budgets,
)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _node(name="n1", gpus="8", taints=(), labels=None, unschedulable=False) -> dict:
    return {"metadata": {"name": name, "labels": labels or {"role": "training"}},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "191500m", "memory": "2088960Mi", "pods": "110", "nvidia.com/gpu": gpus}}}


def _pod(gpus="8", tolerations=None, selector=None, cpu=None) -> dict:
    limits = {"nvidia.com/gpu": gpus, **({"cpu": cpu} if cpu else {})}
    return {"metadata": {"name": "p"}, "spec": {"nodeSelector": selector or {}, "tolerations": tolerations or [],
                                                 "containers": [{"name": "c", "resources": {"limits": limits}}]}}


@pytest.mark.parametrize("text, value", [("1500m", 1.5), ("8", 8.0), ("64Gi", 64 * 2 ** 30), ("1k", 1000.0),
                                         ("2e3", 2000.0), (None, 0.0), ("bogus", 0.0)])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


def test_requests_default_to_limits_and_init_containers_take_the_max():
    pod = _pod(gpus="4", cpu="2")
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "16"}}}]
    assert pod_requests(pod) == {"nvidia.com/gpu": 4.0, "cpu": 16.0, "pods": 1.0}


def test_toleration_seconds():
    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    assert toleration_seconds([], taint) == 0.0
    assert toleration_seconds([{"operator": "Exists"}], taint) is None
    assert toleration_seconds([{"key": taint["key"], "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 30}], taint) == 30.0
    assert toleration_seconds([{"key": taint["key"], "operator": "Equal", "value": "x"}], taint) == 0.0


def test_filters_report_the_first_failing_plugin_per_node():
    free = NodeState.of(_node(taints=[GPU_TAINT]), {"nvidia.com/gpu": 4.0})
    tolerated = _pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert filter_node(_pod(), free) == ["node(s) had untolerated taint {nvidia.com/gpu: present}"]
    assert filter_node(tolerated, free) == ["Insufficient nvidia.com/gpu"]
    assert filter_node(_pod(gpus="4", tolerations=tolerated["spec"]["tolerations"]), free) == []
    cordoned = NodeState.of(_node(taints=[GPU_TAINT], unschedulable=True), {})
    assert filter_node(_pod(), cordoned) == ["node(s) were unschedulable"]
    other = NodeState.of(_node(labels={"role": "inference"}), {})
    assert filter_node(_pod(selector={"role": "training"}), other) == ["node(s) didn't match Pod's node affinity/selector"]


def test_node_affinity_expressions():
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}]}}}}}
    assert matches_node_selector(pod, {"metadata": {"labels": {"gpus": "8"}}})
    assert not matches_node_selector(pod, {"metadata": {"labels": {"gpus": "2"}}})


def test_failure_message_reads_like_kube_scheduler():
    reasons = Counter({"node(s) had untolerated taint {nvidia.com/gpu: present}": 4, "Insufficient nvidia.com/gpu": 2})
    assert failure_message(6, reasons) == ("0/6 nodes are available: 2 Insufficient nvidia.com/gpu, "
                                           "4 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    assert preemption_message(6, 2, 4) == ("preemption: 0/6 nodes are available: 2 No preemption victims found for "
                                           "incoming pod, 4 Preemption is not helpful for scheduling.")


def test_default_tolerations_evict_after_300_seconds_unless_the_pod_says_otherwise():
    taints = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]
    added = 1767225600.0
    assert eviction_time(_pod(), taints, 300, now=added) == added + 300
    short = _pod(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                               "tolerationSeconds": 30}])
    assert eviction_time(short, taints, 300, now=added) == added + 30
    forever = _pod(tolerations=[{"operator": "Exists"}])
    assert eviction_time(forever, taints, 300, now=added) is None
    assert eviction_time(_pod(), [{"key": "other", "effect": "NoExecute"}], 300, now=added) == added  # at once
    assert len(effective_tolerations(_pod(), 300)) == 2


def test_a_pods_readiness_delay_is_drawn_once_per_container_start():
    """The kubelet (when Ready comes) and the replica's vLLM log (what it prints before) read the same draw."""
    timings = SimpleNamespace(pod_startup=2.0, jitter=0.1)
    replica = {"metadata": {"uid": "u-1", "annotations": {"twin.gpu-drills.io/startup-s": "60"}},
               "spec": {"containers": [{"name": "vllm", "readinessProbe": {"httpGet": {"path": "/health"}}}]},
               "status": {"containerStatuses": [{"name": "vllm", "restartCount": 0}]}}
    first = readiness_delay(replica, timings)
    assert 54 <= first <= 66 and readiness_delay(replica, timings) == first
    assert startup_delay(replica, timings) == first  # the gateway's "the server listens" is the same draw
    replica["status"]["containerStatuses"][0]["restartCount"] = 1
    assert readiness_delay(replica, timings) != first  # a restart loads the model again: a new draw
    draws = {readiness_delay({"metadata": {"uid": f"u-{i}"}}, timings) for i in range(50)}
    assert len(draws) == 50 and all(1.8 <= d <= 2.2 for d in draws)  # no annotation: the profile's pod startup
    assert readiness_delay(replica, SimpleNamespace(pod_startup=2.0, jitter=0.0)) == 60.0


def test_a_pod_without_a_readiness_probe_is_ready_at_container_start_whatever_its_server_does():
    """kube: no readiness probe, the default state is Success — Ready after pod_startup, not after the model load
    (defect no-readiness-probe); the server still listens only once its model is loaded."""
    timings = SimpleNamespace(pod_startup=2.0, jitter=0.1)
    replica = {"metadata": {"uid": "u-1", "annotations": {"twin.gpu-drills.io/startup-s": "60"}},
               "spec": {"containers": [{"name": "vllm"}]},
               "status": {"containerStatuses": [{"name": "vllm", "restartCount": 0}]}}
    assert 1.8 <= readiness_delay(replica, timings) <= 2.2
    assert 54 <= startup_delay(replica, timings) <= 66


def test_volcano_preempts_within_a_queue_by_priority_and_reclaims_only_from_reclaimable_queues():
    def pod(queue, scheduler="volcano"):
        return {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": queue}},
                "spec": {"schedulerName": scheduler}}

    job_pod = {"metadata": {"labels": {"volcano.sh/queue-name": "training"}}, "spec": {"schedulerName": "volcano"}}
    reclaimable = {"training": True, "default": True, "inference": False}.get
    assert queue_of(job_pod) == "training" and queue_of({"metadata": {}}) == "default"
    assert may_preempt(job_pod, 1000, pod("training"), 0, reclaimable)  # preempt: same queue, lower priority
    assert not may_preempt(job_pod, 1000, pod("training"), 100000, reclaimable)  # a higher priority protects
    assert not may_preempt(job_pod, 1000, pod("inference"), 0, reclaimable)  # another queue, not reclaimable
    assert may_preempt(job_pod, 1000, pod("default"), 100000, reclaimable)  # reclaim: priority does not guard it
    assert may_preempt(pod("x", "default-scheduler"), 1000, pod("inference"), 0, reclaimable)  # kube-scheduler


def test_volcano_never_takes_a_victim_below_its_disruption_budget():
    replica = {"metadata": {"namespace": "ai", "labels": {"app": "llm"}}}
    budgets = [["ai", {"matchLabels": {"app": "llm"}}, 1]]
    assert within_budgets(replica, budgets) and not within_budgets(replica, budgets)  # one allowed, then none
    assert within_budgets({"metadata": {"namespace": "ai", "labels": {"app": "batch"}}}, budgets)  # not selected
    assert within_budgets(replica, None)  # kube-scheduler: best effort, not modelled as a filter


def test_a_prestop_sleep_is_read_from_the_sleep_action_or_an_exec_of_sleep():
    def pod(lifecycle):
        return {"spec": {"containers": [{"name": "vllm", **({"lifecycle": lifecycle} if lifecycle else {})}]}}

    assert pre_stop_seconds(pod({"preStop": {"sleep": {"seconds": 40}}})) == 40
    assert pre_stop_seconds(pod({"preStop": {"exec": {"command": ["sleep", "15"]}}})) == 15
    assert pre_stop_seconds(pod({"preStop": {"exec": {"command": ["/bin/sh", "-c", "nginx -s quit"]}}})) == 0
    assert pre_stop_seconds(pod(None)) == 0
