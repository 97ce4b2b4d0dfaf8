"""meta.k8s.io/v1 Table output for `kubectl get` (pure functions).

Which columns each resource shows is data here (kubectl's pkg/printers/internalversion, plus GPU columns;
Volcano kinds follow their CRDs' additionalPrinterColumns; anything else gets Name + Age); how each cell is
derived lives in `printers.py`. Like the real server, every column is always emitted and kubectl hides
priority-1 columns unless `-o wide`. Ages are computed against `now` (twin time), never the wall clock.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from drills.twin.api import printers as p
from drills.twin.api.printers import human_duration
from drills.twin.api.resources import ResourceType
from drills.twin.api.watchers import Entry

__all__ = ["to_table", "table_body", "wants_table", "human_duration", "Column", "COLUMNS", "columns_for"]

log = logging.getLogger(__name__)

_INCLUDE = ("None", "Metadata", "Object")
_SEP = (",", ":")


@dataclass(frozen=True)
class Column:
    name: str
    cell: p.Cell
    type: str = "string"
    priority: int = 0
    description: str = ""
    format: str = ""

    def definition(self) -> dict:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


def columns_for(rt: ResourceType) -> tuple[Column, ...]:
    return COLUMNS.get((rt.group, rt.plural), (_NAME, _AGE))


def wants_table(accept: str | None) -> bool:
    """True when the Accept header asks for `as=Table` (what kubectl sends for `get`)."""
    return bool(accept) and "as=Table" in accept


def to_table(rt: ResourceType, objs: list[dict], *, resource_version: str = "", now: float | None = None,
             include_object: str = "Metadata") -> dict:
    """A Table with columnDefinitions (priority 1 = `-o wide` only) and one row per object.

    `include_object` is the `includeObject` query parameter: "None" (no object), "Metadata" (a
    PartialObjectMetadata, the default) or "Object" (the whole object). `now` is twin epoch seconds;
    without it every age reads "<unknown>".
    """
    return json.loads(table_body(rt, [Entry(obj) for obj in objs], {"resourceVersion": resource_version}, now=now,
                                 include_object=include_object))


def table_body(rt: ResourceType, entries: list[Entry], list_meta: dict, *, now: float | None = None,
               include_object: str = "Metadata") -> bytes:
    """`to_table` encoded, for stored entries: each row's cells that do not read `now` are kept with the entry's
    version (`Entry.memo`), so listing 1,000 nodes as a Table encodes only their ages again."""
    if include_object not in _INCLUDE:
        include_object = "Metadata"
    columns = columns_for(rt)
    head = json.dumps({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
                       "columnDefinitions": [col.definition() for col in columns]}, separators=_SEP).encode()
    parts = [head[:-1], b',"rows":[']
    for i, entry in enumerate(entries):
        if i:
            parts.append(b",")
        parts.append(_row(rt, columns, entry, now, include_object))
    parts.append(b"]}")
    return b"".join(parts)


class _Now(float):
    """`now` handed to one cell: remembers whether the cell read it. A cell that did not (anything but ages and
    durations) reads the object alone, so its value holds for as long as that version of the object."""

    read = False

    def _reading(name: str):  # noqa: N805 — builds the methods below
        def op(self, *args):
            self.read = True
            return getattr(float, name)(self, *args)
        return op

    for _name in ("__sub__", "__rsub__", "__add__", "__radd__", "__mul__", "__rmul__", "__truediv__",
                  "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__", "__neg__",
                  "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__hash__", "__bool__", "__float__",
                  "__int__", "__round__", "__trunc__", "__format__", "__str__", "__repr__"):
        locals()[_name] = _reading(_name)
    del _name, _reading


def _row(rt: ResourceType, columns: tuple[Column, ...], entry: Entry, now: float | None, include_object: str) -> bytes:
    obj = entry.obj
    key = ("table-row", include_object, now is None)
    memo = entry.memo()
    kept = memo.get(key)
    if kept is None:
        cells: list[bytes | None] = []
        for col in columns:
            probe = None if now is None else _Now(now)
            value = _cell(col, obj, probe)
            cells.append(None if probe is not None and probe.read else _encode(value))
        tail = b""
        conditions = _row_conditions(rt, obj)
        if conditions:
            tail += b',"conditions":' + _encode(conditions)
        if include_object == "Object":
            tail += b',"object":' + entry.raw
        elif include_object == "Metadata":
            tail += b',"object":' + _encode({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                             "metadata": obj.get("metadata", {})})
        kept = memo[key] = (tuple(cells), tail + b"}")
    cells, tail = kept
    encoded = [cell if cell is not None else _encode(_cell(col, obj, now)) for cell, col in zip(cells, columns)]
    return b'{"cells":[' + b",".join(encoded) + b"]" + tail


def _encode(value) -> bytes:
    return json.dumps(value, separators=_SEP).encode()


def _cell(col: Column, obj: dict, now: float | None):
    """One cell; a printer bug shows as "<error>" in that cell instead of failing the whole list."""
    try:
        return col.cell(obj, now)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        log.warning("table column %r failed on %s: %s", col.name, obj.get("metadata", {}).get("name"), err)
        return "<error>"


def _row_conditions(rt: ResourceType, obj: dict) -> list[dict]:
    """Completed pods carry a row condition, as the real printer sets (kubectl may use it to dim rows)."""
    if rt.group or rt.plural != "pods":
        return []
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return []


# -- columns ------------------------------------------------------------------------------------------
_NAME = Column("Name", lambda obj, now: p.get(obj, "metadata.name", ""), format="name",
               description="Name must be unique within a namespace.")
_AGE = Column("Age", p.age, description="CreationTimestamp is a timestamp representing the server time when "
                                       "this object was created.")


def _template_columns(path: str, selector_path: str = "spec.selector") -> tuple[Column, ...]:
    names, images = p.containers(path)
    return (Column("Containers", names, priority=1, description="Names of each container in the template."),
            Column("Images", images, priority=1, description="Images referenced by each container in the template."),
            Column("Selector", lambda obj, now: p.selector(p.get(obj, selector_path)), priority=1,
                   description="Label selector over the pods this object manages."))


_READY = "Number of the pod with ready state"
COLUMNS: dict[tuple[str, str], tuple[Column, ...]] = {
    ("", "nodes"): (
        _NAME,
        Column("Status", p.node_status, description="The status of the node"),
        Column("Roles", p.node_roles, description="The roles of the node"),
        _AGE,
        Column("Version", p.field("status.nodeInfo.kubeletVersion", ""),
               description="Kubelet Version reported by the node."),
        Column("GPU", p.node_gpus, description=f"Allocatable/capacity of {p.GPU_RESOURCE}."),
        Column("GPU-Model", p.gpu_model, description=f"The {p.GPU_PRODUCT_LABEL} label (GPU feature discovery)."),
        Column("Internal-IP", p.node_address("InternalIP"), priority=1, description="The node's InternalIP address."),
        Column("External-IP", p.node_address("ExternalIP"), priority=1, description="The node's ExternalIP address."),
        Column("OS-Image", p.unknown_if_empty("status.nodeInfo.osImage"), priority=1, description="OS Image."),
        Column("Kernel-Version", p.unknown_if_empty("status.nodeInfo.kernelVersion"), priority=1,
               description="Kernel Version."),
        Column("Container-Runtime", p.unknown_if_empty("status.nodeInfo.containerRuntimeVersion"), priority=1,
               description="ContainerRuntime Version."),
    ),
    ("", "pods"): (
        _NAME,
        Column("Ready", lambda obj, now: f"{p.pod_summary(obj, now)[0]}/{len(p.get(obj, 'spec.containers', []))}",
               description="The aggregate readiness state of this pod for accepting traffic."),
        Column("Status", lambda obj, now: p.pod_summary(obj, now)[1],
               description="The aggregate status of the containers in this pod."),
        Column("Restarts", lambda obj, now: p.pod_summary(obj, now)[2],
               description="The number of times the containers in this pod have been restarted and when the last "
                           "container in this pod has restarted."),
        _AGE,
        Column("IP", p.pod_ip, priority=1, description="IP address allocated to the pod."),
        Column("Node", p.or_none("spec.nodeName"), priority=1, description="The node the pod is bound to."),
        Column("Nominated Node", p.or_none("status.nominatedNodeName"), priority=1,
               description="The node the scheduler nominated for this pod while preempting."),
        Column("Readiness Gates", p.readiness_gates, priority=1, description="Readiness gates that are True."),
    ),
    ("apps", "deployments"): (
        _NAME,
        Column("Ready", lambda obj, now: f"{p.get(obj, 'status.readyReplicas', 0)}/{p.get(obj, 'spec.replicas', 0)}",
               description=_READY),
        Column("Up-to-date", p.as_int("status.updatedReplicas"), description="Total number of updated pods."),
        Column("Available", p.as_int("status.availableReplicas"), description="Total number of available pods."),
        _AGE, *_template_columns("spec.template.spec.containers")),
    ("apps", "replicasets"): (
        _NAME,
        Column("Desired", p.as_int("spec.replicas"), type="integer", description="The number of desired pods."),
        Column("Current", p.as_int("status.replicas"), type="integer", description="The observed number of pods."),
        Column("Ready", p.as_int("status.readyReplicas"), type="integer", description="The number of ready pods."),
        _AGE, *_template_columns("spec.template.spec.containers")),
    ("", "replicationcontrollers"): (  # a plain-map selector (labels.FormatLabels)
        _NAME,
        Column("Desired", p.as_int("spec.replicas"), type="integer", description="The number of desired pods."),
        Column("Current", p.as_int("status.replicas"), type="integer", description="The observed number of pods."),
        Column("Ready", p.as_int("status.readyReplicas"), type="integer", description="The number of ready pods."),
        _AGE, *_template_columns("spec.template.spec.containers")[:2],
        Column("Selector", lambda obj, now: p.selector({"matchLabels": p.get(obj, "spec.selector")}), priority=1,
               description="Label selector over the pods this object manages.")),
    ("apps", "daemonsets"): (
        _NAME,
        Column("Desired", p.as_int("status.desiredNumberScheduled"), type="integer", description="Nodes to run it."),
        Column("Current", p.as_int("status.currentNumberScheduled"), type="integer", description="Nodes running it."),
        Column("Ready", p.as_int("status.numberReady"), type="integer", description="Nodes with a ready pod."),
        Column("Up-to-date", p.as_int("status.updatedNumberScheduled"), type="integer", description="Nodes updated."),
        Column("Available", p.as_int("status.numberAvailable"), type="integer", description="Nodes available."),
        Column("Node Selector", lambda obj, now: p.labels(p.get(obj, "spec.template.spec.nodeSelector")),
               description="NodeSelector of the pod template."),
        _AGE, *_template_columns("spec.template.spec.containers")),
    ("batch", "jobs"): (
        _NAME,
        Column("Status", p.job_status, description="Status of the job."),
        Column("Completions", p.job_completions, description="The number of pods which reached phase Succeeded."),
        Column("Duration", p.job_duration, description="Time required to complete the job."),
        _AGE, *_template_columns("spec.template.spec.containers")),
    ("", "services"): (
        _NAME,
        Column("Type", p.field("spec.type", "ClusterIP"), description="How the Service is exposed."),
        Column("Cluster-IP", p.service_cluster_ip, description="The IP address of the service."),
        Column("External-IP", p.service_external_ip, description="External IPs of the service."),
        Column("Port(s)", p.service_ports, description="The ports that are exposed by this service."),
        _AGE,
        Column("Selector", lambda obj, now: p.labels(p.get(obj, "spec.selector")), priority=1,
               description="Route service traffic to pods with label keys and values matching this selector."),
    ),
    ("", "endpoints"): (_NAME, Column("Endpoints", p.endpoints, description="The set of all endpoints."), _AGE),
    ("policy", "poddisruptionbudgets"): (
        _NAME,
        Column("Min Available", p.int_or_percent("spec.minAvailable"),
               description="The minimum number of pods that must be available."),
        Column("Max Unavailable", p.int_or_percent("spec.maxUnavailable"),
               description="The maximum number of pods that may be unavailable."),
        Column("Allowed Disruptions", p.as_int("status.disruptionsAllowed"), type="integer",
               description="Calculated number of pods that may be disrupted at this time."),
        _AGE),
    ("", "events"): (
        Column("Last Seen", lambda obj, now: p.event_times(obj, now)[0], description="Time of the last occurrence."),
        Column("Type", p.field("type", ""), description="Type of this event (Normal, Warning)."),
        Column("Reason", p.field("reason", ""), description="Why the action was taken."),
        Column("Object", p.event_object, description="The object that this event is about."),
        Column("Subobject", p.field("involvedObject.fieldPath", ""), priority=1, description="Part of the object."),
        Column("Source", p.event_source, priority=1, description="The component reporting this event."),
        Column("Message", lambda obj, now: (obj.get("message") or "").strip(), description="A human-readable text."),
        Column("First Seen", lambda obj, now: p.event_times(obj, now)[1], priority=1,
               description="The time of the first occurrence."),
        Column("Count", lambda obj, now: p.event_times(obj, now)[2], priority=1,
               description="The number of times this event has occurred."),
        Column("Name", _NAME.cell, priority=1, format="name", description=_NAME.description),
    ),
    ("", "namespaces"): (_NAME, Column("Status", p.field("status.phase", ""), description="The namespace phase"), _AGE),
    ("", "configmaps"): (_NAME, Column("Data", p.count("data", "binaryData"), type="integer",
                                       description="Number of data entries."), _AGE),
    ("", "secrets"): (_NAME, Column("Type", p.field("type", ""), description="The secret type."),
                      Column("Data", p.count("data"), type="integer", description="Number of data entries."), _AGE),
    ("scheduling.k8s.io", "priorityclasses"): (
        _NAME,
        Column("Value", p.as_int("value"), type="integer", description="The priority of pods using this class."),
        Column("Global-Default", lambda obj, now: bool(obj.get("globalDefault")), type="boolean",
               description="Whether this is the default priority for pods without a priorityClassName."),
        _AGE),
    ("coordination.k8s.io", "leases"): (
        _NAME, Column("Holder", p.field("spec.holderIdentity", ""), description="The holder of the lease."), _AGE),
    # Volcano CRDs: their additionalPrinterColumns (dates are rendered as ages, as for any CRD).
    ("batch.volcano.sh", "jobs"): (
        _NAME,
        Column("STATUS", p.field("status.state.phase")),
        Column("minAvailable", lambda obj, now: p.get(obj, "status.minAvailable", p.get(obj, "spec.minAvailable")),
               type="integer"),
        Column("RUNNINGS", p.field("status.running"), type="integer"),
        Column("AGE", p.age, type="date"),
        Column("QUEUE", p.field("spec.queue")),
        Column("RETRIES", p.field("status.retryCount"), type="integer", priority=1),
        Column("FAILED", p.field("status.failed"), type="integer", priority=1),
    ),
    ("scheduling.volcano.sh", "podgroups"): (
        _NAME,
        Column("STATUS", p.field("status.phase")),
        Column("minMember", p.field("spec.minMember"), type="integer"),
        Column("RUNNINGS", p.field("status.running"), type="integer"),
        Column("AGE", p.age, type="date"),
        Column("QUEUE", p.field("spec.queue")),
    ),
    ("scheduling.volcano.sh", "queues"): (
        _NAME,
        Column("STATE", p.field("status.state")),
        Column("WEIGHT", p.field("spec.weight"), type="integer"),
        Column("RUNNING", p.field("status.running"), type="integer"),
        Column("PENDING", p.field("status.pending"), type="integer"),
        Column("AGE", p.age, type="date"),
        Column("PARENT", p.field("spec.parent"), priority=1),
    ),
}
