"""What the platform did with a GPU fault DCGM reports, link by link (the seed's drill 1, issue 34).

DCGM records the fault (drills/faults/gpu_xid.py) → the node's exporter reports it (`exporter_view`: a
dcgm-exporter pod Running and Ready on that very node, and — where its `/metrics` can be read through the API
server's pod proxy — `DCGM_FI_DEV_XID_ERRORS` of that GPU) → an alert fires (the detection steps' part:
`Then the monitoring raises NvidiaXidError …`; this module leaves it to them) → the GPU is marked unhealthy
(`wait_marked`: allocatable `nvidia.com/gpu` below capacity, or a health agent's taint or condition) → the node is
cordoned (`wait_cordoned`, when the site remediates; else the drill drains it through the guard) → the job is
rescheduled and resumes (the training monitor's checks). Each function measures; drills/verdicts/gpu_chain.py
judges.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime

from drills.core.clock import parse_iso
from drills.core.kube import Cluster, obj_get, wait_for
from drills.core.watch import retry_at
from drills.faults.dcgm import pod_on_node
from drills.faults.readback import wait_until_clock
from drills.profile.gpu_fault import GpuFault

__all__ = ["ExporterView", "Marked", "NodeMarks", "read_marks", "Owners", "Series", "exporter_owners", "exporter_view", "wait_marked",
           "marked_since", "wait_cordoned", "exported_value", "exported_series"]

log = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"
METRIC_PORT = 9400  # dcgm-exporter's default listen port (DCGM_EXPORTER_LISTEN=":9400")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_METRIC = {230: "DCGM_FI_DEV_XID_ERRORS", 311: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}


@dataclass(frozen=True)
class ExporterView:
    """The node's exporter as read: its pod (None: none scheduled there), Ready, and the GPU's metric if read."""

    node: str
    pod: str | None
    ready: bool
    value: float | None  # the metric's value for the GPU (None: not read — `problem` says why)
    source: str
    problem: str | None = None
    # who uses the GPU, from the series' dcgm-exporter pod-resources labels (DCGM_EXPORTER_KUBERNETES): "ns/pod",
    # None when its series names no pod; `mapped` says whether the exporter names pods at all (False: not observable)
    owner: str | None = None
    mapped: bool = False


@dataclass(frozen=True)
class Marked:
    """How the GPU was marked unhealthy, when, and where it was read."""

    how: str  # "allocatable nvidia.com/gpu 7 of 8", "taint nvidia.com/gpu.unhealthy", "condition GPUHealthy=False"
    at: datetime
    source: str


@dataclass(frozen=True)
class Owners:
    """Who used each GPU of a node just before the fault, as the node's exporter labels its series (pod-resources):
    GPU index → "ns/pod" (None: no pod); `source` the exporter read and when; `problem` why none was read."""

    by_gpu: dict[int, str | None]
    source: str
    problem: str | None = None


def exporter_owners(cluster: Cluster, cfg: GpuFault, node: str, field: int, deadline_ts: float) -> Owners:
    """The GPUs' owners on `node` from its exporter's /metrics, read before the fault: afterwards a site's remediation
    may already have drained the node (its series then name no pod) before the exporter reports the XID. An exporter
    scheduled there but not answering yet, or naming no pod yet (a freshly started one, before the pod-resources
    mapping saw the job's workers), or not yet created there, is read again every RETRY_S cluster seconds until the
    deadline; one never scheduled there costs that wait, and the chain's first link then fails on it."""
    source = f"pods -n {cfg.exporter_namespace} -l {cfg.exporter_selector} on {node}"
    while True:
        pod = pod_on_node(cluster, cfg.exporter_namespace, cfg.exporter_selector, node)
        if pod is None:  # not yet created on a fresh twin's node, or never there: waited for until the deadline
            if cluster.clock.timestamp() >= deadline_ts:
                return Owners({}, source, f"no {cfg.exporter_selector} pod is scheduled on {node}")
            wait_until_clock(cluster.clock, retry_at(cluster.clock, deadline_ts))
            continue
        name = pod["metadata"]["name"]
        read_at = cluster.clock.iso(cluster.clock.now())
        found = _series_of(cluster, cfg.exporter_namespace, name, _METRIC[field])
        if (not isinstance(found, str) and any(_owner(labels) for labels, _ in found)) or \
                cluster.clock.timestamp() >= deadline_ts:
            break
        wait_until_clock(cluster.clock, retry_at(cluster.clock, deadline_ts))
    source = f"{cfg.exporter_namespace}/{name} before the fault @ {read_at}"
    if isinstance(found, str):
        return Owners({}, source, found)
    if not found:
        return Owners({}, source, f"its /metrics has no {_METRIC[field]} series")
    return Owners({int(labels["gpu"]): _owner(labels) for labels, _ in found if labels.get("gpu", "").isdigit()}, source)


def exporter_view(cluster: Cluster, cfg: GpuFault, node: str, gpu: int, field: int, value: int,
                  deadline_ts: float, owners: Owners | None = None) -> ExporterView:
    """The exporter pod on `node` (by label and spec.nodeName) and, if its metrics can be read, the GPU's value:
    read again (every RETRY_S cluster seconds) until it shows `value` or the deadline passes — an exporter reports
    what DCGM had at its last collection, not at once. Who uses the GPU: the owner `owners` (read before the fault)
    names for it, else the one these reads name."""
    pod = pod_on_node(cluster, cfg.exporter_namespace, cfg.exporter_selector, node)
    source = f"pods -n {cfg.exporter_namespace} -l {cfg.exporter_selector} on {node}"
    if pod is None:
        return ExporterView(node, None, False, None, source, f"no {cfg.exporter_selector} pod is scheduled on {node}")
    name = pod["metadata"]["name"]
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in obj_get(pod, "status", "conditions", default=None) or [])
    series = exported_series(cluster, cfg.exporter_namespace, name, gpu, field)
    while series.value is not None and series.value != value and cluster.clock.timestamp() < deadline_ts:
        wait_until_clock(cluster.clock, retry_at(cluster.clock, deadline_ts))
        series = exported_series(cluster, cfg.exporter_namespace, name, gpu, field)
    source = f"{cfg.exporter_namespace}/{name} @ resourceVersion {obj_get(pod, 'metadata', 'resourceVersion')}"
    before = owners.by_gpu.get(gpu) if owners is not None and owners.problem is None else None
    if before is not None:  # named before the fault: the read that a drain cannot have emptied
        return ExporterView(node, name, ready, series.value, f"{source}; owner: {owners.source}", series.problem,
                            before, True)
    return ExporterView(node, name, ready, series.value, source, series.problem, series.owner, series.mapped)


@dataclass(frozen=True)
class Series:
    """One GPU's series of a field as the exporter served it: value, the pod using the GPU, whether any series of
    the field names a pod (the exporter's pod mapping is on), or why it was not read."""

    value: float | None
    owner: str | None = None
    mapped: bool = False
    problem: str | None = None


def exported_series(cluster: Cluster, namespace: str, pod: str, gpu: int, field: int) -> Series:
    """The exporter's series of `field` for GPU `gpu` from its /metrics through the API server's pod proxy, with
    the owner its pod-resources labels name (`namespace`/`pod`, dcgm-exporter's DCGM_EXPORTER_KUBERNETES)."""
    metric = _METRIC[field]
    labelled = _series_of(cluster, namespace, pod, metric)
    if isinstance(labelled, str):
        return Series(None, problem=labelled)
    mapped = any(labels.get("pod") for labels, _ in labelled)
    for labels, value in labelled:
        if labels.get("gpu") == str(gpu):
            owner = _owner(labels)
            try:
                return Series(float(value), owner, mapped)
            except ValueError:
                return Series(None, owner, mapped, f"{metric} for gpu {gpu} is not a number: {value!r}")
    return Series(None, None, mapped, f"its /metrics has no {metric} series for gpu {gpu}")


def _series_of(cluster: Cluster, namespace: str, pod: str, metric: str) -> list[tuple[dict, str]] | str:
    """Every series of `metric` on the exporter's /metrics (through the API server's pod proxy) as (labels, value),
    or why it was not read."""
    from kubernetes.client.exceptions import ApiException

    try:
        text = cluster.core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:{METRIC_PORT}", namespace, "metrics")
    except (ApiException, OSError, ValueError) as err:
        why = getattr(err, "status", "") or err
        return f"its /metrics was not read through the pod proxy ({why})"
    found = re.findall(rf'^{metric}\{{([^}}]*)\}}\s+(\S+)', str(text), re.M)
    return [(dict(_LABEL.findall(labels)), value) for labels, value in found]


def _owner(labels: dict) -> str | None:
    return f"{labels.get('namespace', '')}/{labels['pod']}" if labels.get("pod") else None


def exported_value(cluster: Cluster, namespace: str, pod: str, gpu: int, field: int) -> tuple[float | None, str | None]:
    """The exporter's value of `field` for GPU `gpu`: (value, None), or (None, why it was not read). The hook the
    twin's exporters (and a site's) answer."""
    series = exported_series(cluster, namespace, pod, gpu, field)
    return series.value, series.problem


@dataclass(frozen=True)
class NodeMarks:
    """What the node showed of unhealthy GPUs before the fault: its allocatable GPUs, the health taints and
    conditions on it. A mark counts for the fault only when it is new against this (issue 30, class 1: a GPU already
    missing before the XID is not the XID's mark)."""

    allocatable: int | None
    capacity: int | None
    marks: tuple[str, ...]  # "taint nvidia.com/gpu.unhealthy:NoSchedule", "condition GPUHealthy=False"
    source: str
    cordoned: str | None = None  # already out of scheduling before the fault: no cordon after it is the site's

    def sentence(self) -> str:
        shown = list(self.marks)
        if self.capacity and self.allocatable is not None and self.allocatable < self.capacity:
            shown.insert(0, f"allocatable {GPU} {self.allocatable} of {self.capacity}")
        return ", ".join(shown)


def read_marks(cluster: Cluster, cfg: GpuFault, node: str) -> NodeMarks:
    """The node's GPU-health marks now (read-only), before the fault is injected."""
    obj = json.loads(cluster.core.read_node(node, _preload_content=False).data)
    return NodeMarks(_gpus(obj_get(obj, "status", "allocatable", GPU)), _gpus(obj_get(obj, "status", "capacity", GPU)),
                     tuple(_health_marks(obj, cfg)),
                     f"nodes/{node} @ resourceVersion {obj_get(obj, 'metadata', 'resourceVersion')}, before the fault",
                     cordon_of(obj))


def _health_marks(obj: dict, cfg: GpuFault) -> list[str]:
    conditions = [tuple(c.split("=", 1)) for c in cfg.unhealthy_conditions if "=" in c]
    out = [f"taint {t['key']}:{t.get('effect')}" for t in obj_get(obj, "spec", "taints", default=None) or []
           if t.get("key") in cfg.unhealthy_taints]
    out += [f"condition {c['type']}={c['status']}" for c in obj_get(obj, "status", "conditions", default=None) or []
            if (c.get("type"), c.get("status")) in conditions]
    return out


def wait_marked(cluster: Cluster, cfg: GpuFault, node: str, deadline_ts: float,
                not_before_ts: float | None = None, before: NodeMarks | None = None) -> Marked | None:
    """Until the deadline (cluster time): the node showing the GPU unhealthy, else None. When it was marked is what
    the node itself says (`marked_since`: a condition's or taint's own time, not before `not_before_ts`) where it
    says it — the drill may look long after the mark (it reads the exporter first, slower on a busy machine) — else
    the moment it was observed. `before`: the node's marks before the fault; only a mark new against it counts
    (allocatable below what it was, a taint or condition it did not have)."""

    def marked(obj: dict) -> str | None:
        capacity = _gpus(obj_get(obj, "status", "capacity", GPU))
        allocatable = _gpus(obj_get(obj, "status", "allocatable", GPU))
        floor = capacity if before is None or before.allocatable is None else min(capacity or 0, before.allocatable)
        if capacity and allocatable is not None and allocatable < floor:
            return f"allocatable {GPU} {allocatable} of {capacity}"
        return next((m for m in _health_marks(obj, cfg) if before is None or m not in before.marks), None)

    found = wait_for(cluster, cluster.core.list_node, marked, deadline_ts, field_selector=f"metadata.name={node}")
    if found is None:
        return None
    obj, observed = found
    where = f"nodes/{node} @ resourceVersion {obj_get(obj, 'metadata', 'resourceVersion')}"
    stamped = marked_since(obj, cfg, observed, not_before_ts) if not_before_ts is not None else None
    if stamped is None:
        return Marked(marked(obj), observed, f"{where}, observed")
    return Marked(marked(obj), stamped[0], f"{where}: {stamped[1]}")


def marked_since(node: dict, cfg: GpuFault, observed: datetime, not_before_ts: float) -> tuple[datetime, str] | None:
    """When the node itself says the GPU was marked: the earliest `lastTransitionTime` of a matching unhealthy
    condition or `timeAdded` of a matching taint, at or before `observed` and not older than `not_before_ts` (a mark
    left from before the fault is not this one's) — with what it was read from. None when the node says nothing
    (allocatable alone carries no time): then only the moment it was observed is known."""
    conditions = {tuple(c.split("=", 1)) for c in cfg.unhealthy_conditions if "=" in c}
    stamps = []
    for cond in obj_get(node, "status", "conditions", default=None) or []:
        if (cond.get("type"), cond.get("status")) in conditions and cond.get("lastTransitionTime"):
            stamps.append((cond["lastTransitionTime"], f"condition {cond['type']}={cond['status']} lastTransitionTime"))
    for taint in obj_get(node, "spec", "taints", default=None) or []:
        if taint.get("key") in cfg.unhealthy_taints and taint.get("timeAdded"):
            stamps.append((taint["timeAdded"], f"taint {taint['key']} timeAdded"))
    found = []
    for text, what in stamps:
        try:
            at = parse_iso(text)
        except ValueError:
            continue
        if not_before_ts <= at.timestamp() <= observed.timestamp():
            found.append((at, what))
    return min(found, key=lambda f: f[0]) if found else None


def cordon_of(obj: dict) -> str | None:
    """How the node is out of scheduling (spec.unschedulable, a NoExecute taint), None when it is not."""
    if obj_get(obj, "spec", "unschedulable", default=False):
        return "spec.unschedulable=true"
    taint = next((t for t in obj_get(obj, "spec", "taints", default=None) or [] if t.get("effect") == "NoExecute"), None)
    return f"taint {taint['key']}:NoExecute" if taint else None


def wait_cordoned(cluster: Cluster, node: str, deadline_ts: float) -> Marked | None:
    """Until the deadline: the first moment the node is cordoned (spec.unschedulable) or NoExecute-tainted."""
    return _wait_node(cluster, node, cordon_of, deadline_ts)


def _wait_node(cluster: Cluster, node: str, how, deadline_ts: float) -> Marked | None:
    found = wait_for(cluster, cluster.core.list_node, how, deadline_ts, field_selector=f"metadata.name={node}")
    if found is None:
        return None
    obj, at = found
    return Marked(how(obj), at, f"nodes/{node} @ resourceVersion {obj_get(obj, 'metadata', 'resourceVersion')}")


def _gpus(value) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None
