"""What kube-state-metrics (v2.x) serves on `:8080/metrics`: the series the platform's alert rules read, computed
from the API objects at scrape time, as kube-state-metrics computes them from its informers' caches.

Names, types and labels from kube-state-metrics' docs (kubernetes/kube-state-metrics docs/pod-metrics.md,
node-metrics.md, deployment-metrics.md; v2 puts `uid` on every pod series):
- nodes: `kube_node_info`, `kube_node_spec_unschedulable{node}`, `kube_node_spec_taint{node,key,value,effect}`,
  `kube_node_status_condition{node,condition,status=true|false|unknown}` (one series per status, 1 for the
  current one), `kube_node_status_capacity` / `kube_node_status_allocatable{node,resource,unit}` (resource names
  sanitised: `nvidia.com/gpu` → `nvidia_com_gpu`);
- pods: `kube_pod_info{namespace,pod,uid,host_ip,pod_ip,node,created_by_kind,created_by_name,priority_class,
  host_network}`, `kube_pod_status_phase{…,phase}`, `kube_pod_status_ready{…,condition}`,
  `kube_pod_container_status_restarts_total{…,container}` (a counter), `kube_pod_container_status_ready`;
- deployments: `kube_deployment_spec_replicas`, `kube_deployment_status_replicas`,
  `kube_deployment_status_replicas_available`, `kube_deployment_status_replicas_unavailable`{namespace,deployment}.
"""

from __future__ import annotations

import re
from typing import Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["KubeStateCollector", "Objects"]

Objects = Callable[[str], list[dict]]  # kind ("nodes", "pods", "deployments") → the objects now

_POD = ("namespace", "pod", "uid")
_STATUSES = ("true", "false", "unknown")
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class KubeStateCollector(Collector):
    def __init__(self, objects: Objects):
        self.objects = objects

    def collect(self):
        yield from _nodes(self.objects("nodes"))
        yield from _pods(self.objects("pods"))
        yield from _deployments(self.objects("deployments"))


def _nodes(nodes: list[dict]):
    info = GaugeMetricFamily("kube_node_info", "Information about a cluster node.",
                             labels=["node", "kernel_version", "os_image", "container_runtime_version",
                                     "kubelet_version", "provider_id", "internal_ip"])
    unsched = GaugeMetricFamily("kube_node_spec_unschedulable", "Whether a node can schedule new pods.", labels=["node"])
    taint = GaugeMetricFamily("kube_node_spec_taint", "The taint of a cluster node.",
                              labels=["node", "key", "value", "effect"])
    cond = GaugeMetricFamily("kube_node_status_condition", "The condition of a cluster node.",
                             labels=["node", "condition", "status"])
    cap = GaugeMetricFamily("kube_node_status_capacity", "The capacity for different resources of a node.",
                            labels=["node", "resource", "unit"])
    alloc = GaugeMetricFamily("kube_node_status_allocatable",
                              "The allocatable for different resources of a node that are available for scheduling.",
                              labels=["node", "resource", "unit"])
    for n in nodes:
        name, spec, status = n["metadata"]["name"], n.get("spec") or {}, n.get("status") or {}
        ni = status.get("nodeInfo") or {}
        ip = next((a.get("address", "") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), "")
        info.add_metric([name, ni.get("kernelVersion", ""), ni.get("osImage", ""), ni.get("containerRuntimeVersion", ""),
                         ni.get("kubeletVersion", ""), spec.get("providerID", ""), ip], 1)
        unsched.add_metric([name], 1 if spec.get("unschedulable") else 0)
        for t in spec.get("taints") or []:
            taint.add_metric([name, t.get("key", ""), t.get("value", ""), t.get("effect", "")], 1)
        for c in status.get("conditions") or []:
            for s in _STATUSES:
                cond.add_metric([name, c.get("type", ""), s], 1 if (c.get("status") or "").lower() == s else 0)
        for family, amounts in ((cap, status.get("capacity") or {}), (alloc, status.get("allocatable") or {})):
            for resource, qty in amounts.items():
                value, unit = _quantity(resource, str(qty))
                family.add_metric([name, _sanitise(resource), unit], value)
    return [info, unsched, taint, cond, cap, alloc]


def _pods(pods: list[dict]):
    info = GaugeMetricFamily("kube_pod_info", "Information about pod.",
                             labels=[*_POD, "host_ip", "pod_ip", "node", "created_by_kind", "created_by_name",
                                     "priority_class", "host_network"])
    phase = GaugeMetricFamily("kube_pod_status_phase", "The pods current phase.", labels=[*_POD, "phase"])
    ready = GaugeMetricFamily("kube_pod_status_ready", "Describes whether the pod is ready to serve requests.",
                              labels=[*_POD, "condition"])
    restarts = CounterMetricFamily("kube_pod_container_status_restarts",
                                   "The number of container restarts per container.", labels=[*_POD, "container"])
    c_ready = GaugeMetricFamily("kube_pod_container_status_ready",
                                "Describes whether the containers readiness check succeeded.", labels=[*_POD, "container"])
    for p in pods:
        meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        key = [meta.get("namespace", ""), meta["name"], meta.get("uid", "")]
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
        info.add_metric([*key, status.get("hostIP", ""), status.get("podIP", ""), spec.get("nodeName", ""),
                         owner.get("kind", ""), owner.get("name", ""), spec.get("priorityClassName", ""),
                         "true" if spec.get("hostNetwork") else "false"], 1)
        current = status.get("phase") or "Pending"
        for ph in _PHASES:
            phase.add_metric([*key, ph], 1 if ph == current else 0)
        rc = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if rc is not None:
            for s in _STATUSES:
                ready.add_metric([*key, s], 1 if (rc.get("status") or "").lower() == s else 0)
        for cs in status.get("containerStatuses") or []:
            restarts.add_metric([*key, cs.get("name", "")], int(cs.get("restartCount") or 0))
            c_ready.add_metric([*key, cs.get("name", "")], 1 if cs.get("ready") else 0)
    return [info, phase, ready, restarts, c_ready]


def _deployments(deps: list[dict]):
    names = {
        "kube_deployment_spec_replicas": ("Number of desired pods for a deployment.", lambda s, st: s.get("replicas", 1)),
        "kube_deployment_status_replicas": ("The number of replicas per deployment.", lambda s, st: st.get("replicas", 0)),
        "kube_deployment_status_replicas_available": ("The number of available replicas per deployment.",
                                                      lambda s, st: st.get("availableReplicas", 0)),
        "kube_deployment_status_replicas_unavailable": ("The number of unavailable replicas per deployment.",
                                                        lambda s, st: st.get("unavailableReplicas", 0)),
        "kube_deployment_status_replicas_updated": ("The number of updated replicas per deployment.",
                                                    lambda s, st: st.get("updatedReplicas", 0)),
    }
    out = []
    for name, (help_, value) in names.items():
        fam = GaugeMetricFamily(name, help_, labels=["namespace", "deployment"])
        for d in deps:
            fam.add_metric([d["metadata"].get("namespace", ""), d["metadata"]["name"]],
                           value(d.get("spec") or {}, d.get("status") or {}) or 0)
        out.append(fam)
    return out


_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3}
_QTY = re.compile(r"^([0-9.]+)([A-Za-z]*)$")


def _quantity(resource: str, qty: str) -> tuple[float, str]:
    """(value, unit) as kube-state-metrics prints them: cpu in cores, memory-like in bytes, the rest integers."""
    m = _QTY.match(qty)
    value = float(m.group(1)) * _SUFFIX.get(m.group(2), 1) if m else 0.0
    if resource == "cpu":
        return value, "core"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return value, "byte"
    return value, "integer"


def _sanitise(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)
