"""Defaulting makes objects complete: the real kubernetes client (37) deserialises every kind, and
the defaults are the ones kube-apiserver, its admission plugins and Volcano's webhook would set."""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes.client import ApiClient

from drills.twin.api.defaults import apply_defaults
from drills.twin.api.resources import by_kind

NOW = "2026-01-02T03:04:05Z"


def defaulted(obj: dict) -> dict:
    rt = by_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {}).update(uid="u-1", creationTimestamp=NOW, resourceVersion="7")
    return apply_defaults(rt, obj, NOW)


class _Response:
    def __init__(self, data: dict):
        self.data = json.dumps(data)


def parse(obj: dict, klass: str):
    """Through the client's own deserialiser, as `read_namespaced_pod` etc. would."""
    return ApiClient().deserialize(json.dumps(obj), klass, "application/json")


def test_pod_gets_server_defaults_and_admission_tolerations():
    pod = defaulted({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ai-platform"},
                     "spec": {"containers": [{"name": "c", "image": "nginx",
                                              "ports": [{"containerPort": 80}],
                                              "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["terminationGracePeriodSeconds"], spec["dnsPolicy"], spec["schedulerName"]) == \
        ("Always", 30, "ClusterFirst", "default-scheduler")
    keys = {(t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]}
    assert keys == {("node.kubernetes.io/not-ready", "NoExecute", 300), ("node.kubernetes.io/unreachable", "NoExecute", 300)}
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "Always"  # untagged image
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}  # requests default to limits
    assert c["ports"][0]["protocol"] == "TCP"
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    v1 = parse(pod, "V1Pod")
    assert v1.spec.containers[0].name == "c" and v1.status.phase == "Pending"
    assert v1.spec.tolerations[0].toleration_seconds == 300


def test_pod_keeps_given_values_and_existing_tolerations():
    pod = defaulted({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                              "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                               "effect": "NoExecute", "tolerationSeconds": 30}],
                              "containers": [{"name": "c", "image": "trainer:2.4", "resources": {}}]}})
    assert pod["spec"]["schedulerName"] == "volcano" and pod["spec"]["restartPolicy"] == "Never"
    not_ready = [t for t in pod["spec"]["tolerations"] if t["key"] == "node.kubernetes.io/not-ready"]
    assert [t["tolerationSeconds"] for t in not_ready] == [30]
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["status"]["qosClass"] == "BestEffort"
    assert defaulted(pod) == pod  # idempotent


def test_pod_status_with_partial_container_status_parses():
    pod = defaulted({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "x:1", "resources": {"requests": {"cpu": "1"}}}]},
                     "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                                "containerStatuses": [{"name": "c", "state": {"running": {"startedAt": NOW}}}]}})
    assert pod["status"]["qosClass"] == "Burstable"
    v1 = parse(pod, "V1Pod")
    assert v1.status.container_statuses[0].image == "x:1" and v1.status.container_statuses[0].restart_count == 0
    assert v1.status.conditions[0].type == "Ready"


def test_bare_node_becomes_complete_and_ready():
    node = defaulted({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "8"}}})
    status = node["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False", "Ready": "True"}
    assert all(c["lastHeartbeatTime"] == NOW for c in status["conditions"])
    assert status["allocatable"]["nvidia.com/gpu"] == "8"
    assert {a["type"] for a in status["addresses"]} == {"InternalIP", "Hostname"}
    v1 = parse(node, "V1Node")
    assert v1.status.node_info.kubelet_version.startswith("v1.32")
    assert v1.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert v1.status.allocatable["nvidia.com/gpu"] == "8"


def test_node_keeps_a_notready_condition():
    node = defaulted({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert [c["status"] for c in ready] == ["Unknown"]


def test_deployment_and_replicaset_defaults():
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    dep = defaulted({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
                     "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template}})
    spec = dep["spec"]
    assert (spec["replicas"], spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (1, 10, 600)
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert "tolerations" not in spec["template"]["spec"]  # admission applies to pods, not templates
    assert parse(dep, "V1Deployment").spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    rs = defaulted({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "namespace": "ns"},
                    "spec": {"template": template}})
    assert "selector" not in rs["spec"] and rs["status"] == {"replicas": 0}  # apps/v1: required, never defaulted
    recreate = defaulted({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                          "spec": {"strategy": {"type": "Recreate"}, "template": template}})
    assert recreate["spec"]["strategy"] == {"type": "Recreate"}


def test_service_endpoints_and_pdb():
    svc = defaulted({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
                     "spec": {"selector": {"app": "a"}, "ports": [{"port": 8000}]}})
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["clusterIP"].startswith("10.") and spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ports"][0] == {"port": 8000, "protocol": "TCP", "targetPort": 8000}
    assert defaulted(svc)["spec"]["clusterIP"] == spec["clusterIP"]
    assert parse(svc, "V1Service").spec.ports[0].port == 8000
    ep = defaulted({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "s", "namespace": "ns"},
                    "subsets": [{"addresses": [{"ip": "10.128.0.5"}], "ports": [{"port": 8000}]}]})
    assert parse(ep, "V1Endpoints").subsets[0].ports[0].protocol == "TCP"
    pdb = defaulted({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p", "namespace": "ns"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}})
    v1 = parse(pdb, "V1PodDisruptionBudget")
    assert (v1.status.current_healthy, v1.status.desired_healthy, v1.status.disruptions_allowed,
            v1.status.expected_pods) == (0, 0, 0, 0)
    assert v1.spec.min_available == 1


def test_event_lease_priorityclass_namespace():
    ev = defaulted({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ai-platform"},
                    "reason": "Pulled", "involvedObject": {"kind": "Pod", "name": "p"}})
    assert ev["firstTimestamp"] == NOW and ev["count"] == 1 and ev["involvedObject"]["namespace"] == "ai-platform"
    assert parse(ev, "CoreV1Event").involved_object.name == "p"
    lease = defaulted({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "n1", "namespace": "kube-node-lease"},
                       "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}})
    assert lease["spec"]["renewTime"] == "2026-01-02T03:04:05.000000Z"
    assert parse(lease, "V1Lease").spec.holder_identity == "n1"
    pc = defaulted({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"},
                    "value": 1000})
    assert parse(pc, "V1PriorityClass").preemption_policy == "PreemptLowerPriority"
    ns = defaulted({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai-platform"}})
    assert ns["status"]["phase"] == "Active" and ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "ai-platform"
    assert parse(ns, "V1Namespace").spec.finalizers == ["kubernetes"]


def test_daemonset_and_batch_job_parse():
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    ds = defaulted({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "namespace": "kube-system"},
                    "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": copy.deepcopy(template)}})
    assert parse(ds, "V1DaemonSet").status.number_ready == 0
    job_template = copy.deepcopy(template)
    job_template["spec"]["restartPolicy"] = "Never"
    job = defaulted({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
                     "spec": {"template": job_template}})
    assert job["spec"]["selector"] == {"matchLabels": {"app": "a"}} and job["spec"]["backoffLimit"] == 6
    assert parse(job, "V1Job").spec.completions == 1


def test_volcano_job_queue_and_podgroup_defaults():
    job = defaulted({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
                     "spec": {"tasks": [{"replicas": 2, "template": {}}, {"name": "ps", "template": {}}]}})
    spec = job["spec"]
    assert (spec["schedulerName"], spec["queue"], spec["maxRetry"], spec["minAvailable"]) == ("volcano", "default", 3, 3)
    assert [t["name"] for t in spec["tasks"]] == ["default0", "ps"] and spec["tasks"][0]["minAvailable"] == 2
    assert job["status"]["state"]["phase"] == "Pending" and job["status"]["retryCount"] == 0
    given = defaulted({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
                       "spec": {"minAvailable": 1, "maxRetry": 5, "queue": "training", "tasks": [{"replicas": 2}]}})
    assert (given["spec"]["minAvailable"], given["spec"]["maxRetry"], given["spec"]["queue"]) == (1, 5, "training")
    queue = defaulted({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}})
    assert queue["spec"] == {"weight": 1, "reclaimable": True} and queue["status"] == {"state": "Open"}
    pg = defaulted({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg"}})
    assert pg["spec"]["minMember"] == 1 and pg["status"]["phase"] == "Pending"


@pytest.mark.parametrize("junk", [{"spec": "x"}, {"spec": {"containers": "x"}}, {"status": 3}])
def test_malformed_objects_do_not_crash_defaulting(junk):
    for kind, api in (("Pod", "v1"), ("Node", "v1"), ("Deployment", "apps/v1"), ("Service", "v1")):
        obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, **copy.deepcopy(junk)}
        apply_defaults(by_kind(api, kind), obj, NOW)  # validation, not defaulting, rejects these
