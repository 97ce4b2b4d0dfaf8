"""Kind-specific defaulting, like the real API server's (and Volcano's admission webhook), so every
served object is complete: kubernetes client 37 validates what it deserialises and rejects objects
that lack required fields (nodeInfo, condition types, container status fields, …).

Plain defaults are data (`_FILL`: missing keys are filled, existing values kept, recursively);
what depends on other fields (tolerations, QoS, clusterIP, minAvailable, conditions) is code.
Defaulting is idempotent: the server runs it on every create and every main-resource update.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import logging
from typing import Callable

from drills.twin.api.defaults_pod import default_pod, default_pod_template
from drills.twin.api.resources import ResourceType

__all__ = ["apply_defaults", "NODE_CONDITIONS", "KUBELET_VERSION"]

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.32.4"
SERVICE_CIDR = "10.96.0.0/12"

# type → (status, reason, message) as a healthy kubelet reports them.
NODE_CONDITIONS = {
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
}
_NODE_INFO = {
    "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://1.7.22",
    "kernelVersion": "5.15.0-119-generic", "kubeProxyVersion": KUBELET_VERSION, "kubeletVersion": KUBELET_VERSION,
    "machineID": "", "operatingSystem": "linux", "osImage": "Ubuntu 22.04.4 LTS", "systemUUID": "",
}
_ROLLING = {"maxSurge": "25%", "maxUnavailable": "25%"}

# apiVersion/kind → nested defaults filled where missing.
_FILL: dict[str, dict] = {
    "v1/Namespace": {"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}},
    "v1/Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                                       "capacity": {}, "nodeInfo": _NODE_INFO}},
    "v1/Service": {"spec": {"type": "ClusterIP", "sessionAffinity": "None", "ipFamilies": ["IPv4"],
                            "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"},
                   "status": {"loadBalancer": {}}},
    "v1/Secret": {"type": "Opaque"},
    "v1/Event": {"involvedObject": {}, "count": 1, "type": "Normal", "source": {},
                 "reportingComponent": "", "reportingInstance": ""},
    "apps/v1/Deployment": {"spec": {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                                    "strategy": {"type": "RollingUpdate"}}, "status": {}},
    "apps/v1/ReplicaSet": {"spec": {"replicas": 1}, "status": {"replicas": 0}},
    "v1/ReplicationController": {"spec": {"replicas": 1}, "status": {"replicas": 0}},
    "apps/v1/DaemonSet": {"spec": {"revisionHistoryLimit": 10, "updateStrategy": {"type": "RollingUpdate"}},
                          "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                                     "numberMisscheduled": 0, "numberReady": 0}},
    "batch/v1/Job": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6,
                              "completionMode": "NonIndexed", "suspend": False, "podReplacementPolicy": "TerminatingOrFailed"},
                     "status": {}},
    "batch/v1/CronJob": {"spec": {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
                                  "failedJobsHistoryLimit": 1}, "status": {}},
    "policy/v1/PodDisruptionBudget": {"spec": {}, "status": {"currentHealthy": 0, "desiredHealthy": 0,
                                                             "disruptionsAllowed": 0, "expectedPods": 0,
                                                             "observedGeneration": 0}},
    "scheduling.k8s.io/v1/PriorityClass": {"value": 0, "preemptionPolicy": "PreemptLowerPriority"},
    "coordination.k8s.io/v1/Lease": {"spec": {}},
    "batch.volcano.sh/v1alpha1/Job": {"spec": {"schedulerName": "volcano", "queue": "default", "maxRetry": 3}},
    "scheduling.volcano.sh/v1beta1/Queue": {"spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}},
    "scheduling.volcano.sh/v1beta1/PodGroup": {"spec": {"minMember": 1, "queue": "default"},
                                               "status": {"phase": "Pending"}},
}


def apply_defaults(rt: ResourceType, obj: dict, now: str) -> dict:
    """Fill kind-specific defaults in place and return `obj` (`now` is the twin's RFC 3339 time).

    Generic metadata (uid, creationTimestamp, resourceVersion, generation) is the server's job.
    """
    key = f"{rt.api_version}/{rt.kind}"
    if not isinstance(obj, dict):
        return obj
    if key in _FILL:
        _fill(obj, _FILL[key])
    special = _SPECIAL.get(key)
    if special is not None:
        special(obj, now)
    return obj


# -- kind-specific ------------------------------------------------------------------------------
def _namespace(obj: dict, now: str) -> None:
    name = _meta(obj).get("name")
    if name:
        _meta(obj).setdefault("labels", {})["kubernetes.io/metadata.name"] = name


def _node(obj: dict, now: str) -> None:
    meta, status = _meta(obj), _sub(obj, "status")
    name = str(meta.get("name", ""))
    capacity = status.get("capacity")
    if isinstance(capacity, dict):
        capacity.setdefault("pods", "110")
        if not isinstance(status.get("allocatable"), dict):
            status["allocatable"] = dict(capacity)
    info = status.get("nodeInfo")
    if isinstance(info, dict):
        digest = hashlib.sha1(name.encode()).hexdigest()
        for field in ("bootID", "systemUUID"):
            if not info.get(field):
                info[field] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        if not info.get("machineID"):
            info["machineID"] = digest[:32]
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    present = {c.get("type") for c in conditions if isinstance(c, dict)}
    for ctype, (cstatus, reason, message) in NODE_CONDITIONS.items():
        if ctype not in present:
            conditions.append({"type": ctype, "status": cstatus, "reason": reason, "message": message})
    for cond in conditions:
        if isinstance(cond, dict):
            cond.setdefault("status", "Unknown")
            cond.setdefault("lastHeartbeatTime", now)
            cond.setdefault("lastTransitionTime", now)
    if not isinstance(status.get("addresses"), list):
        n = int(hashlib.sha1(name.encode()).hexdigest(), 16)
        status["addresses"] = [{"type": "InternalIP", "address": f"10.1.{n % 250}.{n // 250 % 250 + 1}"},
                               {"type": "Hostname", "address": name}]
    labels = meta.setdefault("labels", {})
    if isinstance(labels, dict) and name:
        for k, v in {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}.items():
            labels.setdefault(k, v)


def _pod(obj: dict, now: str) -> None:
    default_pod(obj, now)


def _workload(obj: dict, now: str) -> None:
    """Deployment / ReplicaSet / DaemonSet / Job: template defaults; a batch Job's selector from its template
    (apps/v1 kinds have none: a missing selector is a 422, as on a real server)."""
    spec = _sub(obj, "spec")
    template = spec.get("template")
    default_pod_template(template)
    if "selector" not in spec and isinstance(template, dict) and obj.get("kind") == "Job":
        labels = (template.get("metadata") or {}).get("labels")
        if isinstance(labels, dict) and labels:
            spec["selector"] = {"matchLabels": dict(labels)}
    strategy = spec.get("strategy") if obj.get("kind") == "Deployment" else spec.get("updateStrategy")
    if isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            defaults = _ROLLING if obj.get("kind") == "Deployment" else {"maxUnavailable": 1, "maxSurge": 0}
            for k, v in defaults.items():
                rolling.setdefault(k, v)


def _replication_controller(obj: dict, now: str) -> None:
    """A ReplicationController's selector (a plain map) and labels default to its template's labels."""
    _workload(obj, now)
    spec = _sub(obj, "spec")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        if not _meta(obj).get("labels"):
            _meta(obj)["labels"] = dict(labels)


def _batch_job(obj: dict, now: str) -> None:
    _workload(obj, now)  # a template without restartPolicy gets Always, which a Job refuses (422), as on a real server


def _service(obj: dict, now: str) -> None:
    spec = _sub(obj, "spec")
    if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
        spec["clusterIP"] = _cluster_ip(f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}")
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])


def _endpoints(obj: dict, now: str) -> None:
    for subset in obj.get("subsets") or []:
        for port in (subset or {}).get("ports") or [] if isinstance(subset, dict) else []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _event(obj: dict, now: str) -> None:
    for key in ("firstTimestamp", "lastTimestamp"):
        if not obj.get(key) and not obj.get("eventTime"):
            obj[key] = now
    involved = obj.get("involvedObject")
    if isinstance(involved, dict) and not involved.get("namespace") and _meta(obj).get("namespace") not in (None, "default"):
        involved.setdefault("namespace", _meta(obj)["namespace"])


def _lease(obj: dict, now: str) -> None:
    spec = _sub(obj, "spec")
    if "holderIdentity" in spec and not spec.get("renewTime"):
        spec["renewTime"] = now.replace("Z", ".000000Z") if "." not in now else now


def _volcano_job(obj: dict, now: str) -> None:
    """Volcano's admission webhook: task names, per-task and job minAvailable; status Pending."""
    spec = _sub(obj, "spec")
    tasks = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    total = 0
    for i, task in enumerate(tasks):
        task.setdefault("name", f"default{i}")
        replicas = task.setdefault("replicas", 1)
        replicas = replicas if isinstance(replicas, int) else 0
        task.setdefault("minAvailable", replicas)
        total += replicas
    spec.setdefault("minAvailable", total)
    if "status" not in obj:
        obj["status"] = {"state": {"phase": "Pending", "lastTransitionTime": now},
                         "minAvailable": spec["minAvailable"], "retryCount": 0}


_SPECIAL: dict[str, Callable[[dict, str], None]] = {
    "v1/Namespace": _namespace,
    "v1/Node": _node,
    "v1/Pod": _pod,
    "v1/Service": _service,
    "v1/Endpoints": _endpoints,
    "v1/Event": _event,
    "apps/v1/Deployment": _workload,
    "apps/v1/ReplicaSet": _workload,
    "v1/ReplicationController": _replication_controller,
    "apps/v1/DaemonSet": _workload,
    "batch/v1/Job": _batch_job,
    "coordination.k8s.io/v1/Lease": _lease,
    "batch.volcano.sh/v1alpha1/Job": _volcano_job,
}


# -- helpers ------------------------------------------------------------------------------------
def _fill(target: dict, defaults: dict) -> None:
    for key, value in defaults.items():
        if key not in target or target[key] is None:
            target[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(target[key], dict):
            _fill(target[key], value)


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def _sub(obj: dict, key: str) -> dict:
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _cluster_ip(seed: str) -> str:
    """A stable address in the service CIDR, clear of .1 (kubernetes) and .10 (DNS)."""
    net = ipaddress.ip_network(SERVICE_CIDR)
    n = int(hashlib.sha1(seed.encode()).hexdigest(), 16) % (net.num_addresses - 256) + 256
    return str(net.network_address + n)
