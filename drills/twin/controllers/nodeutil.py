"""Node and pod facts the cluster-core controllers (scheduler, kubelet, node lifecycle) share:
resource quantities and requests, taints and tolerations, node selectors, and the twin's fault
annotations (what the `/twin/v1/nodes/...` and `/twin/v1/.../pods/.../exit` endpoints write).

Pure functions on plain dicts, so they are cheap enough to run per node per pod on 1,024 nodes.
"""

from __future__ import annotations

import logging
import random
import re
from functools import lru_cache

from drills.core.clock import parse_iso

__all__ = [
    "KUBELET_ANNOTATION", "KUBELET_STOPPED_AT", "GPU_HEALTH_ANNOTATION", "GPU_XID_ANNOTATION",
    "GPU_UNHEALTHY_COUNT", "GPU_UNHEALTHY_AT", "EXIT_ANNOTATION", "STARTUP_ANNOTATION",
    "STOP_ANNOTATION", "GROUP_ANNOTATION", "DCGM_FIELDS_ANNOTATION", "DCGM_FI_DEV_XID_ERRORS", "dcgm_fields",
    "dcgm_critical_xids",
    "GPU", "NOT_READY_TAINT", "UNREACHABLE_TAINT", "UNSCHEDULABLE_TAINT",
    "parse_quantity", "pod_requests", "tolerates", "toleration_seconds", "untolerated", "matches_node_selector",
    "kubelet_stopped", "stopped_at", "condition", "is_terminal", "node_ip", "pod_ip", "gpu_unhealthy",
    "stop_outcome", "container_statuses", "readiness_delay", "startup_delay", "pre_stop_seconds",
]

log = logging.getLogger(__name__)

_P = "twin.gpu-drills.io/"
KUBELET_ANNOTATION = _P + "kubelet"            # "stopped" while the node's kubelet is down
KUBELET_STOPPED_AT = _P + "kubelet-stopped-at"  # twin RFC 3339: the kubelet's last heartbeat
GPU_HEALTH_ANNOTATION = _P + "gpu-health"       # "unhealthy" while a GPU of the node is broken
GPU_XID_ANNOTATION = _P + "gpu-xid"             # the XID the driver reported, e.g. "79"
GPU_UNHEALTHY_COUNT = _P + "gpu-unhealthy"      # how many of the node's GPUs are broken
GPU_UNHEALTHY_AT = _P + "gpu-unhealthy-at"      # twin RFC 3339
EXIT_ANNOTATION = _P + "exit"                   # JSON {"code", "reason", "message", "container"}: make it exit
STARTUP_ANNOTATION = _P + "startup-s"           # readiness delay in twin seconds (model load)
STOP_ANNOTATION = _P + "stop-s"                 # twin seconds the process takes to exit on SIGTERM
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# DCGM's field cache on the node as nv-hostengine holds it: JSON {"<gpu id>": {"<field id>": value}}, the values
# `dcgmi test --inject` put there (drills/twin/workloads/dcgmi.py); a field never injected has no entry
DCGM_FIELDS_ANNOTATION = _P + "dcgm-fields"
DCGM_FI_DEV_XID_ERRORS = 230  # NVIDIA/DCGM dcgmlib/dcgm_fields.h: DCGM_FI_DEV_XID_ERROR 230 (the last XID seen)
# XIDs the NVIDIA device plugin ignores as application errors (k8s-device-plugin internal/rm/health.go)
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
GPU = "nvidia.com/gpu"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


@lru_cache(maxsize=4096)
def parse_quantity(value: str | int | float | None) -> float:
    """A Kubernetes quantity (`1500m`, `64Gi`, `8`) as a float in base units; 0 for None or garbage."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    m = _QUANTITY.match(str(value).strip())
    if not m:
        log.debug("unparseable quantity %r", value)
        return 0.0
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def pod_requests(pod: dict) -> dict[str, float]:
    """Effective requests: the sum over containers (requests, else limits), max with any init container."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for name, qty in _container_requests(c).items():
            total[name] = total.get(name, 0.0) + qty
    for c in spec.get("initContainers") or []:
        for name, qty in _container_requests(c).items():
            total[name] = max(total.get(name, 0.0), qty)
    total["pods"] = 1.0
    return total


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    return any(_tolerates_one(t, taint) for t in tolerations or [])


def toleration_seconds(tolerations: list[dict], taint: dict) -> float | None:
    """How long a pod may stay under a NoExecute `taint`: None = forever, 0 = not tolerated (evict now)."""
    matching = [t for t in tolerations or [] if _tolerates_one(t, taint)]
    if not matching:
        return 0.0
    limits = [t.get("tolerationSeconds") for t in matching]
    if any(s is None for s in limits):
        return None
    return float(max(0, min(int(s) for s in limits)))


def untolerated(taints: list[dict], tolerations: list[dict], effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
                ) -> dict | None:
    """The first taint with one of `effects` the pod does not tolerate, or None."""
    for taint in taints or []:
        if taint.get("effect") in effects and not tolerates(tolerations, taint):
            return taint
    return None


def matches_node_selector(pod: dict, node: dict) -> bool:
    """nodeSelector and requiredDuringScheduling node affinity (In/NotIn/Exists/DoesNotExist/Gt/Lt)."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, want in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != want:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    name = (node.get("metadata") or {}).get("name")
    return any(_term_matches(term, labels, name) for term in terms)


def kubelet_stopped(node: dict) -> bool:
    return ((node.get("metadata") or {}).get("annotations") or {}).get(KUBELET_ANNOTATION) == "stopped"


def stopped_at(node: dict) -> float | None:
    """Twin epoch of the stopped kubelet's last heartbeat (None when it runs or the time is unknown)."""
    if not kubelet_stopped(node):
        return None
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(KUBELET_STOPPED_AT)
    try:
        return parse_iso(text).timestamp() if text else None
    except ValueError:
        return None


def gpu_unhealthy(node: dict) -> int:
    """How many of the node's GPUs the fault registry marks broken (0 when healthy)."""
    ann = (node.get("metadata") or {}).get("annotations") or {}
    if ann.get(GPU_HEALTH_ANNOTATION) != "unhealthy":
        return 0
    try:
        return max(1, int(ann.get(GPU_UNHEALTHY_COUNT) or 1))
    except ValueError:
        return 1


def dcgm_fields(node: dict) -> dict[int, dict[int, int]]:
    """DCGM's injected field values on the node: {gpu id: {field id: value}} (empty when none or unreadable)."""
    import json

    text = ((node.get("metadata") or {}).get("annotations") or {}).get(DCGM_FIELDS_ANNOTATION)
    try:
        raw = json.loads(text) if text else {}
        return {int(g): {int(f): int(v) for f, v in fields.items()} for g, fields in raw.items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def dcgm_critical_xids(node: dict) -> dict[int, int]:
    """{gpu id: XID} of the node's GPUs whose last XID in DCGM's cache is critical (not an application error)."""
    return {gpu: fields[DCGM_FI_DEV_XID_ERRORS] for gpu, fields in sorted(dcgm_fields(node).items())
            if fields.get(DCGM_FI_DEV_XID_ERRORS, 0) > 0 and fields[DCGM_FI_DEV_XID_ERRORS] not in APPLICATION_XIDS}


def condition(obj: dict, ctype: str) -> dict | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def node_ip(node: dict) -> str:
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address", "")
    return "10.0.0.1"


def pod_ip(node: dict, pod: dict) -> str:
    """A stable address inside the node's podCIDR (a /24), derived from the pod's uid."""
    cidr = (node.get("spec") or {}).get("podCIDR") or "10.128.0.0/24"
    base = cidr.split("/")[0].rsplit(".", 1)[0]
    uid = (pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name", "")
    return f"{base}.{2 + sum(uid.encode()) % 250}"


# -- helpers ------------------------------------------------------------------------------------
def _container_requests(container: dict) -> dict[str, float]:
    res = container.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {name: parse_quantity(qty) for name, qty in merged.items()}


def _tolerates_one(tol: dict, taint: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    key = tol.get("key")
    if key and key != taint.get("key"):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    if not key:  # an empty key with Equal matches nothing
        return False
    return (tol.get("value") or "") == (taint.get("value") or "")


def _term_matches(term: dict, labels: dict, name: str | None) -> bool:
    for expr in term.get("matchExpressions") or []:
        if not _expr_matches(expr, labels.get(expr.get("key", ""))):
            return False
    for expr in term.get("matchFields") or []:
        if expr.get("key") == "metadata.name" and not _expr_matches(expr, name):
            return False
    return bool(term.get("matchExpressions") or term.get("matchFields"))


def _expr_matches(expr: dict, value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def stop_outcome(stop_s: float, left_s: float) -> dict:
    """How a deleted pod's containers end: exiting on SIGTERM within the grace period (0, Completed), else
    killed when it runs out (SIGKILL: 137, Error)."""
    return {"exitCode": 0, "reason": "Completed"} if stop_s <= left_s else {"exitCode": 137, "reason": "Error"}


def container_statuses(pod: dict) -> list[dict]:
    """The pod's containerStatuses, and a not-yet-created one for each container that has none."""
    have = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    return [have.get(c.get("name")) or {"name": c.get("name"), "image": c.get("image", ""), "imageID": "",
                                        "ready": False, "restartCount": 0, "started": False, "state": {}}
            for c in (pod.get("spec") or {}).get("containers") or []]


def readiness_delay(pod: dict, timings) -> float:
    """Twin seconds from a container start to Ready. With a readiness probe: when the process answers it
    (`startup_delay`: an inference replica's model load). Without one the kubelet reports Ready as soon as the
    container runs (kube: "If a container does not provide a readiness probe, the default state is Success"),
    whatever the process is doing: the profile's `pod_startup`, ± jitter."""
    first = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    if STARTUP_ANNOTATION in (pod["metadata"].get("annotations") or {}) and not first.get("readinessProbe"):
        return _jittered(pod, float(getattr(timings, "pod_startup", 2.0)), timings)
    return startup_delay(pod, timings)


def startup_delay(pod: dict, timings) -> float:
    """Twin seconds from a container start until its process serves: the pod's startup annotation (an inference
    replica's model load) or the profile's `pod_startup`, ± the profile's jitter. Drawn per container start (seeded
    by the pod's uid and restart count), so the kubelet that sets Ready, the replica's own vLLM log
    (drills.twin.workloads.serving) and the gateway that routes to it agree on when it comes."""
    ann = pod["metadata"].get("annotations") or {}
    try:
        base = float(ann[STARTUP_ANNOTATION])
    except (KeyError, ValueError):
        base = float(getattr(timings, "pod_startup", 2.0))
    return _jittered(pod, base, timings)


def _jittered(pod: dict, base: float, timings) -> float:
    jitter = float(getattr(timings, "jitter", 0.0) or 0.0)
    if not jitter:
        return base
    restarts = sum(int(s.get("restartCount") or 0) for s in container_statuses(pod))
    draw = random.Random(f"{pod['metadata'].get('uid', '')}/{restarts}").uniform(-jitter, jitter)
    return max(0.0, base * (1 + draw))


def pre_stop_seconds(pod: dict) -> float:
    """Twin seconds the first container's preStop hook holds SIGTERM back: the `sleep` action
    (`lifecycle.preStop.sleep.seconds`, KEP-3960) or an exec of `sleep N`; 0 without a hook."""
    first = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    hook = ((first.get("lifecycle") or {}).get("preStop") or {})
    try:
        if "sleep" in hook:
            return max(0.0, float((hook["sleep"] or {}).get("seconds") or 0))
        command = ((hook.get("exec") or {}).get("command") or [])
        if len(command) == 2 and command[0] in ("sleep", "/bin/sleep"):
            return max(0.0, float(command[1]))
    except (TypeError, ValueError):
        return 0.0
    return 0.0
