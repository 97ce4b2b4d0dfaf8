"""Pod facts the workload controllers share: activity, readiness, controller references, pods from
templates, and an index of pods by their controller's uid (so no controller scans every pod)."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Callable, Iterable

from drills.core.clock import parse_iso

__all__ = ["is_active", "is_terminating", "is_ready", "ready_since", "is_available", "controller_ref", "expected_pods",
           "owner_ref", "pod_from_template", "OwnerIndex", "condition", "set_condition"]


def is_terminating(pod: dict) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def is_active(pod: dict) -> bool:
    """Counts toward a controller's replicas: not terminating and not finished (as in kube's FilterActivePods)."""
    phase = (pod.get("status") or {}).get("phase")
    return not is_terminating(pod) and phase not in ("Succeeded", "Failed")


def is_ready(pod: dict) -> bool:
    cond = condition(pod, "Ready")
    return bool(cond) and cond.get("status") == "True"


def ready_since(pod: dict) -> float | None:
    """Twin timestamp the pod became Ready, or None if it is not Ready."""
    cond = condition(pod, "Ready")
    if not cond or cond.get("status") != "True":
        return None
    when = cond.get("lastTransitionTime")
    return parse_iso(when).timestamp() if when else 0.0


def is_available(pod: dict, min_ready_seconds: float, now: float) -> bool:
    since = ready_since(pod)
    return since is not None and (min_ready_seconds <= 0 or now - since >= min_ready_seconds)


def controller_ref(obj: dict) -> dict | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def expected_pods(pods: Iterable[dict], scale_of: Callable[[dict, dict], int]) -> int:
    """How many pods their controllers want, as the disruption controller counts (expectedPods): each
    controller's `scale_of(ref, pod)` once, and one for each pod without a controller."""
    total, seen = 0, set()
    for pod in pods:
        ref = controller_ref(pod)
        if ref is None:
            total += 1
            continue
        if ref.get("uid") in seen:
            continue
        seen.add(ref.get("uid"))
        total += scale_of(ref, pod)
    return total


def owner_ref(owner: dict) -> dict:
    """The controller ownerReference a dependent of `owner` carries (metav1.NewControllerRef)."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod_from_template(template: dict, owner: dict, *, name: str | None = None, generate_name: str | None = None,
                      extra_labels: dict | None = None, extra_annotations: dict | None = None) -> dict:
    """A Pod built from a PodTemplateSpec, owned by `owner` (kube's GetPodFromTemplate)."""
    template = copy.deepcopy(template or {})
    tmeta = template.get("metadata") or {}
    meta: dict = {"namespace": owner["metadata"].get("namespace"),
                  "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
                  "ownerReferences": [owner_ref(owner)]}
    annotations = {**(tmeta.get("annotations") or {}), **(extra_annotations or {})}
    if annotations:
        meta["annotations"] = annotations
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name or f'{owner["metadata"]["name"]}-'
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


def condition(obj: dict, ctype: str) -> dict | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return cond
    return None


def set_condition(conditions: list[dict], new: dict, now: str, *, update_time: bool = False) -> list[dict]:
    """Conditions with `new` merged in: lastTransitionTime moves only when the status changes."""
    out, found = [], False
    for cond in conditions or ():
        if cond.get("type") != new["type"]:
            out.append(cond)
            continue
        found = True
        merged = dict(cond, **new)
        if cond.get("status") != new.get("status"):
            merged["lastTransitionTime"] = now
        else:
            merged["lastTransitionTime"] = cond.get("lastTransitionTime", now)
        if update_time and (cond.get("status"), cond.get("reason"), cond.get("message")) != (
                new.get("status"), new.get("reason"), new.get("message")):
            merged["lastUpdateTime"] = now
        elif update_time:
            merged["lastUpdateTime"] = cond.get("lastUpdateTime", now)
        out.append(merged)
    if not found:
        fresh = dict(new, lastTransitionTime=now)
        if update_time:
            fresh["lastUpdateTime"] = now
        out.append(fresh)
    return out


class OwnerIndex:
    """Keys of objects by their controller owner's uid, kept current from informer events."""

    def __init__(self) -> None:
        self._by_owner: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._owner_of: dict[tuple[str, str], str] = {}

    def update(self, etype: str, obj: dict) -> str | None:
        """Record the event; returns the controller owner uid (None when it has none)."""
        meta = obj.get("metadata", {})
        key = (meta.get("namespace", "") or "", meta.get("name", ""))
        prev = self._owner_of.pop(key, None)
        if prev is not None:
            self._by_owner[prev].discard(key)
            if not self._by_owner[prev]:
                del self._by_owner[prev]
        ref = controller_ref(obj)
        uid = ref.get("uid") if ref else None
        if etype != "DELETED" and uid:
            self._by_owner[uid].add(key)
            self._owner_of[key] = uid
        return uid

    def keys(self, owner_uid: str) -> Iterable[tuple[str, str]]:
        return tuple(self._by_owner.get(owner_uid, ()))
