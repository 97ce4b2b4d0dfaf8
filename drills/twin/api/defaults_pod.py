"""Pod and pod-template defaulting, as kube-apiserver's SetDefaults_* and its admission plugins
(DefaultTolerationSeconds, ServiceAccount, Priority) leave a pod, so real tooling finds what it
expects (restartPolicy, dnsPolicy, tolerations for not-ready/unreachable, imagePullPolicy, QoS).

Defensive by design: defaulting runs before validation, so malformed parts are skipped, not fatal.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["default_pod", "default_pod_spec", "default_pod_template", "qos_class", "DEFAULT_TOLERATION_SECONDS"]

log = logging.getLogger(__name__)

DEFAULT_TOLERATION_SECONDS = 300  # DefaultTolerationSeconds admission plugin
_NOEXECUTE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

_POD_SPEC = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "securityContext": {},
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "enableServiceLinks": True,
}
_CONTAINER = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}
_PROBE = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_SYSTEM_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def default_pod(obj: dict, now: str) -> dict:
    """A whole Pod: spec defaults, admission tolerations, status phase and QoS class."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    default_pod_spec(spec, admission=True)
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", qos_class(spec))
        for cs in _dicts(status.get("containerStatuses")) + _dicts(status.get("initContainerStatuses")):
            _default_container_status(cs, spec)
        for cond in _dicts(status.get("conditions")):
            cond.setdefault("status", "Unknown")
            cond.setdefault("lastTransitionTime", now)
    return obj


def default_pod_template(template: Any) -> None:
    """`spec.template` of a workload: pod-spec defaults without admission (those apply to pods)."""
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        spec = template.get("spec")
        if isinstance(spec, dict):
            default_pod_spec(spec, admission=False)


def default_pod_spec(spec: dict, admission: bool = False) -> dict:
    for key, value in _POD_SPEC.items():
        if key not in spec:
            spec[key] = dict(value) if isinstance(value, dict) else value
    for c in _dicts(spec.get("containers")) + _dicts(spec.get("initContainers")):
        _default_container(c)
    if admission:
        _default_tolerations(spec)
        _default_priority(spec)
    return spec


def qos_class(spec: dict) -> str:
    """Guaranteed when every container's cpu and memory limits equal requests; BestEffort when none set."""
    containers = _dicts(spec.get("containers")) + _dicts(spec.get("initContainers"))
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or str(req.get(r, lim[r])) != str(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# -- helpers ------------------------------------------------------------------------------------
def _default_container(c: dict) -> None:
    for key, value in _CONTAINER.items():
        if key not in c:
            c[key] = dict(value) if isinstance(value, dict) else value
    if "imagePullPolicy" not in c:
        image = str(c.get("image") or "")
        tag = image.rsplit("/", 1)[-1]
        c["imagePullPolicy"] = "Always" if "@" not in tag and (":" not in tag or tag.endswith(":latest")) else "IfNotPresent"
    res = c.get("resources")
    if isinstance(res, dict) and isinstance(res.get("limits"), dict):
        requests = res.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, qty in res["limits"].items():
                requests.setdefault(name, qty)  # requests default to limits
    for port in _dicts(c.get("ports")):
        port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(key)
        if isinstance(probe, dict):
            for k, v in _PROBE.items():
                probe.setdefault(k, v)
            if isinstance(probe.get("httpGet"), dict):
                probe["httpGet"].setdefault("scheme", "HTTP")
                probe["httpGet"].setdefault("path", "/")


def _default_container_status(cs: dict, spec: dict) -> None:
    image = next((c.get("image") for c in _dicts(spec.get("containers")) if c.get("name") == cs.get("name")), "")
    cs.setdefault("image", image or "")
    cs.setdefault("imageID", "")
    cs.setdefault("ready", False)
    cs.setdefault("restartCount", 0)


def _default_tolerations(spec: dict) -> None:
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = spec["tolerations"] = []
    if not isinstance(tolerations, list):
        return
    for key in _NOEXECUTE_TAINTS:
        if not any(_tolerates(t, key) for t in _dicts(tolerations)):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    for t in _dicts(tolerations):
        if t.get("key") and "operator" not in t:
            t["operator"] = "Equal"


def _tolerates(t: dict, key: str) -> bool:
    if t.get("effect") not in (None, "", "NoExecute"):
        return False
    return t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists")


def _default_priority(spec: dict) -> None:
    """Priority admission: a pod without a class gets 0; system classes are known statically.

    Other classes are resolved by whoever knows the PriorityClass objects (the server's admission).
    """
    name = spec.get("priorityClassName")
    if not name or name in _SYSTEM_PRIORITY:
        spec.setdefault("priority", _SYSTEM_PRIORITY.get(name, 0))
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _dicts(items: Any) -> list[dict]:
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
