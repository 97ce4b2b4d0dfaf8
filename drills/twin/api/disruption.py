"""PodDisruptionBudget arithmetic, as the eviction subresource and the disruption controller do it.

Computed on demand from the pods in the store (the twin has no lag between a pod's readiness
and its budget), so an eviction is refused with 429 exactly when the real one would be.
"""

from __future__ import annotations

import logging
import math

from drills.twin.api import status as st
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store
from drills.twin.controllers.podutil import expected_pods

__all__ = ["check_eviction", "pdb_status", "matching_pdbs", "EVICTION_REFUSED"]

log = logging.getLogger(__name__)

EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
_PODS = by_path("", "v1", "pods")
_PDBS = by_path("policy", "v1", "poddisruptionbudgets")


def check_eviction(store: Store, pod: dict) -> None:
    """Raise 429 TooManyRequests when evicting `pod` would break its PodDisruptionBudget."""
    if _can_ignore_pdb(pod):
        return
    pdbs = matching_pdbs(store, pod)
    if not pdbs:
        return
    if len(pdbs) > 1:
        raise st.ApiError(500, "InternalError",
                          "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
    pdb = pdbs[0]
    status = pdb_status(store, pdb)
    name = pdb["metadata"]["name"]
    desired, healthy = status["desiredHealthy"], status["currentHealthy"]
    cause = [{"reason": "DisruptionBudget",
              "message": f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"}]
    if not _ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        if policy == "AlwaysAllow" or healthy >= desired:
            return
        raise st.too_many_requests(EVICTION_REFUSED, cause)
    if status["disruptionsAllowed"] <= 0:
        raise st.too_many_requests(EVICTION_REFUSED, cause)


def matching_pdbs(store: Store, pod: dict) -> list[dict]:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    pdbs, _ = store.list(_PDBS, meta.get("namespace"))
    return [p for p in pdbs if _selects((p.get("spec") or {}).get("selector"), labels)]


def pdb_status(store: Store, pdb: dict) -> dict:
    """The status the disruption controller would write: expected/current/desired healthy, disruptions allowed."""
    spec = pdb.get("spec") or {}
    ns = pdb["metadata"].get("namespace")
    selector = spec.get("selector")
    pods, _ = store.list(_PODS, ns, lambda p: _selects(selector, p["metadata"].get("labels") or {}))
    pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    healthy = sum(1 for p in pods if _ready(p))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if isinstance(min_available, int):
        expected, desired = len(pods), min_available
    elif min_available is not None:
        expected = _expected_count(store, pods)
        desired = math.ceil(_percent(min_available) * expected / 100)
    elif max_unavailable is not None:
        expected = _expected_count(store, pods)
        unavailable = max_unavailable if isinstance(max_unavailable, int) else math.ceil(
            _percent(max_unavailable) * expected / 100)
        desired = max(expected - unavailable, 0)
    else:
        expected, desired = len(pods), 0
    return {"expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": desired,
            "disruptionsAllowed": max(healthy - desired, 0), "observedGeneration": pdb["metadata"].get("generation", 1)}


def _can_ignore_pdb(pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Succeeded", "Failed", "Pending")


def _ready(pod: dict) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _selects(selector: dict | None, labels: dict) -> bool:
    """A LabelSelector (matchLabels + matchExpressions); null selects nothing, {} selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _percent(value) -> float:
    text = str(value).strip()
    return float(text[:-1]) if text.endswith("%") else float(text)


def _expected_count(store: Store, pods: list[dict]) -> int:
    """Sum of the scale of each pod's controller (pods without one count for themselves), like the real one."""
    def scale_of(ref: dict, pod: dict) -> int:
        owner = _owner(store, ref, pod["metadata"].get("namespace"))
        return _scale_of(owner) if owner else 1

    return expected_pods(pods, scale_of)


def _owner(store: Store, ref: dict, ns: str | None) -> dict | None:
    group, _, version = ref.get("apiVersion", "").rpartition("/")
    rt = by_path(group, version, ref.get("kind", "").lower() + "s")
    return store.find(rt, ns, ref.get("name", "")) if rt else None


def _scale_of(owner: dict) -> int:
    spec = owner.get("spec") or {}
    if "replicas" in spec:
        return int(spec["replicas"] or 0)
    tasks = spec.get("tasks")
    if tasks:
        return sum(int(t.get("replicas", 1)) for t in tasks)
    return 1
