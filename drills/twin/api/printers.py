"""How each Table cell is derived, after kubectl's pkg/printers/internalversion (pure functions).

Every cell function takes (object, now) where `now` is twin epoch seconds (None: ages read "<unknown>").
Which columns a resource shows is data in `tables.py`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable

__all__ = [
    "Cell", "GPU_RESOURCE", "GPU_PRODUCT_LABEL", "human_duration", "get", "since", "age", "labels", "selector",
    "containers", "field", "as_int", "or_none", "unknown_if_empty", "int_or_percent", "count",
    "node_status", "node_roles", "node_address", "node_gpus", "gpu_model", "pod_summary", "pod_ip", "readiness_gates",
    "job_status", "job_completions", "job_duration", "service_cluster_ip", "service_external_ip", "service_ports",
    "endpoints", "event_times", "event_object", "event_source",
]

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"

Cell = Callable[[dict, "float | None"], Any]


def human_duration(seconds: float) -> str:
    """apimachinery duration.HumanDuration: `5s`, `3m12s`, `45m`, `5h3m`, `2d4h`, `30d`, `2y10d`."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        return f"{minutes}m{secs % 60}s" if secs % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


# -- small readers -------------------------------------------------------------------------------------
def get(obj: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
        if obj is None:
            return default
    return obj


def since(timestamp: str | None, now: float | None) -> str:
    if not timestamp or now is None:
        return "<unknown>"
    return human_duration(now - _epoch(timestamp))


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def age(obj: dict, now: float | None) -> str:
    return since(get(obj, "metadata.creationTimestamp"), now)


def labels(mapping: dict | None) -> str:
    """labels.FormatLabels: `k=v,k2=v2` sorted, or `<none>`."""
    return ",".join(f"{k}={v}" for k, v in sorted((mapping or {}).items())) or "<none>"


def selector(sel: dict | None) -> str:
    """metav1.FormatLabelSelector: requirements sorted by key, or `<none>`."""
    reqs = [(k, f"{k}={v}") for k, v in ((sel or {}).get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin"}
    for expr in (sel or {}).get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator")
        if op in ops:
            reqs.append((key, f"{key} {ops[op]} ({','.join(sorted(expr.get('values') or []))})"))
        elif op in ("Exists", "DoesNotExist"):
            reqs.append((key, key if op == "Exists" else f"!{key}"))
    return ",".join(text for _, text in sorted(reqs)) or "<none>"


def containers(path: str) -> tuple[Cell, Cell]:
    """layoutContainerCells: container names and images, comma-joined."""
    def names(obj: dict, now: float | None) -> str:
        return ",".join(c.get("name", "") for c in get(obj, path, []))

    def images(obj: dict, now: float | None) -> str:
        return ",".join(c.get("image", "") for c in get(obj, path, []))
    return names, images


def field(path: str, default: Any = None) -> Cell:
    return lambda obj, now: get(obj, path, default)


def as_int(path: str) -> Cell:
    return lambda obj, now: int(get(obj, path, 0))


def or_none(path: str) -> Cell:
    return lambda obj, now: get(obj, path) or "<none>"


# -- nodes -----------------------------------------------------------------------------------------------
def node_status(obj: dict, now: float | None) -> str:
    ready = next((c for c in get(obj, "status.conditions", []) if c.get("type") == "Ready"), None)
    status = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    if get(obj, "spec.unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(obj: dict, now: float | None) -> str:
    roles = set()
    for key, value in (get(obj, "metadata.labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]:
            roles.add(key.split("/", 1)[1])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def node_address(kind: str) -> Cell:
    return lambda obj, now: next((a.get("address") for a in get(obj, "status.addresses", [])
                                  if a.get("type") == kind), "<none>")


def node_gpus(obj: dict, now: float | None) -> str:
    capacity = get(obj, "status.capacity", {}).get(GPU_RESOURCE)
    if capacity is None:
        return "<none>"
    return f"{get(obj, 'status.allocatable', {}).get(GPU_RESOURCE, capacity)}/{capacity}"


def gpu_model(obj: dict, now: float | None) -> str:
    return (get(obj, "metadata.labels") or {}).get(GPU_PRODUCT_LABEL) or "<none>"


def unknown_if_empty(path: str) -> Cell:
    return lambda obj, now: get(obj, path) or "<unknown>"


# -- pods ------------------------------------------------------------------------------------------------
def pod_summary(pod: dict, now: float | None) -> tuple[int, str, str]:
    """printPod: (ready containers, status reason, restarts) exactly as kubectl derives them."""
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    reason = status.get("reason") or status.get("phase") or ""
    restarts, ready, last_restart = 0, 0, None
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount", 0))
        last_restart = _later(last_restart, get(cs, "lastState.terminated.finishedAt"))
        terminated, waiting = get(cs, "state.terminated"), get(cs, "state.waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if terminated is not None:
            reason = "Init:" + (terminated.get("reason") or _exit(terminated))
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    if not initializing:
        restarts, has_running = 0, False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount", 0))
            last_restart = _later(last_restart, get(cs, "lastState.terminated.finishedAt"))
            waiting, terminated = get(cs, "state.waiting"), get(cs, "state.terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = _exit(terminated)
            elif cs.get("ready") and get(cs, "state.running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in status.get("conditions") or [])
            reason = "Running" if ready_cond else "NotReady"
    if get(pod, "metadata.deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    shown = str(restarts) if last_restart is None else f"{restarts} ({since(last_restart, now)} ago)"
    return ready, reason, shown


def _exit(terminated: dict) -> str:
    return f"Signal:{terminated['signal']}" if terminated.get("signal") else f"ExitCode:{terminated.get('exitCode', 0)}"


def _later(current: str | None, candidate: str | None) -> str | None:
    if not candidate:
        return current
    return candidate if current is None or _epoch(candidate) > _epoch(current) else current


def pod_ip(obj: dict, now: float | None) -> str:
    ips = get(obj, "status.podIPs") or []
    return (ips[0].get("ip") if ips else get(obj, "status.podIP")) or "<none>"


def readiness_gates(obj: dict, now: float | None) -> str:
    gates = get(obj, "spec.readinessGates") or []
    if not gates:
        return "<none>"
    conditions = {c.get("type"): c.get("status") for c in get(obj, "status.conditions", [])}
    return f"{sum(conditions.get(g.get('conditionType')) == 'True' for g in gates)}/{len(gates)}"


# -- workloads, services, events -------------------------------------------------------------------------
def job_status(obj: dict, now: float | None) -> str:
    true = {c.get("type") for c in get(obj, "status.conditions", []) if c.get("status") == "True"}
    if "Complete" in true:
        return "Complete"
    if "Failed" in true:
        return "Failed"
    if get(obj, "metadata.deletionTimestamp"):
        return "Terminating"
    return "Suspended" if "Suspended" in true else "FailureTarget" if "FailureTarget" in true else "Running"


def job_completions(obj: dict, now: float | None) -> str:
    succeeded, completions = get(obj, "status.succeeded", 0), get(obj, "spec.completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = get(obj, "spec.parallelism", 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(obj: dict, now: float | None) -> str:
    start, end = get(obj, "status.startTime"), get(obj, "status.completionTime")
    if not start:
        return ""
    if end:
        return human_duration(_epoch(end) - _epoch(start))
    return since(start, now)


def service_cluster_ip(obj: dict, now: float | None) -> str:
    ips = get(obj, "spec.clusterIPs") or []
    return (ips[0] if ips else get(obj, "spec.clusterIP")) or "<none>"


def service_external_ip(obj: dict, now: float | None) -> str:
    kind, external = get(obj, "spec.type", "ClusterIP"), get(obj, "spec.externalIPs") or []
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        lb = sorted({i.get("ip") or i.get("hostname") for i in get(obj, "status.loadBalancer.ingress", [])} - {None})
        return ",".join(lb + external) or "<pending>"
    if kind == "ExternalName":
        return get(obj, "spec.externalName", "")
    return "<unknown>"


def service_ports(obj: dict, now: float | None) -> str:
    pieces = []
    for port in get(obj, "spec.ports", []):
        node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
        pieces.append(f"{port.get('port')}{node_port}/{port.get('protocol', 'TCP')}")
    return ",".join(pieces) or "<none>"


def endpoints(obj: dict, now: float | None) -> str:
    subsets = obj.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        for port in subset.get("ports") or [None]:
            shown += [ip if port is None else f"{ip}:{port.get('port')}" for ip in addresses]
    return ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")


def int_or_percent(path: str) -> Cell:
    return lambda obj, now: "N/A" if get(obj, path) is None else str(get(obj, path))


def event_times(obj: dict, now: float | None) -> tuple[str, str, int]:
    first = since(obj.get("firstTimestamp") or obj.get("eventTime"), now)
    last = since(obj["lastTimestamp"], now) if obj.get("lastTimestamp") else first
    times = obj.get("count") or 1
    if obj.get("series"):
        last, times = since(get(obj, "series.lastObservedTime"), now), get(obj, "series.count", times)
    return last, first, int(times)


def event_object(obj: dict, now: float | None) -> str:
    kind, name = get(obj, "involvedObject.kind", "").lower(), get(obj, "involvedObject.name", "")
    return f"{kind}/{name}" if name else kind


def event_source(obj: dict, now: float | None) -> str:
    component = get(obj, "source.component") or obj.get("reportingComponent") or ""
    instance = get(obj, "source.host") or obj.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def count(*paths: str) -> Cell:
    return lambda obj, now: sum(len(get(obj, p) or {}) for p in paths)


