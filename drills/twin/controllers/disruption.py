"""Disruption controller: PodDisruptionBudget status (expectedPods, currentHealthy, desiredHealthy,
disruptionsAllowed, the DisruptionAllowed condition) so `kubectl get pdb` reads like a real cluster.

Expected pods follow kube's finders: a pod's controller scale (Deployment through its ReplicaSet,
ReplicaSet, Volcano Job replicas); integer minAvailable just counts the selected pods.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.api.selectors import match_label_selector
from drills.twin.controllers.base import Controller
from drills.twin.controllers.podutil import controller_ref, expected_pods, is_ready, set_condition

__all__ = ["DisruptionController", "budget"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
PDBS = by_kind("policy/v1", "PodDisruptionBudget")
REPLICASETS = by_kind("apps/v1", "ReplicaSet")
DEPLOYMENTS = by_kind("apps/v1", "Deployment")
VCJOBS = by_kind("batch.volcano.sh/v1alpha1", "Job")


def budget(spec: dict, pods: list[dict], expected_scale: int) -> dict:
    """(expected, currentHealthy, desired, allowed) for a PDB `spec` over its non-terminal `pods`."""
    healthy = sum(1 for p in pods if is_ready(p))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and _is_int(min_available):
        expected, desired = len(pods), int(min_available)
    elif min_available is not None:
        expected = expected_scale
        desired = math.ceil(_percent(min_available) * expected / 100)
    elif max_unavailable is not None:
        expected = expected_scale
        unavailable = int(max_unavailable) if _is_int(max_unavailable) else math.ceil(
            _percent(max_unavailable) * expected / 100)
        desired = max(expected - unavailable, 0)
    else:
        expected, desired = len(pods), 0
    return {"expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": desired,
            "disruptionsAllowed": max(healthy - desired, 0)}


class DisruptionController(Controller):
    name = "disruption"

    def setup(self) -> None:
        inf = self.ctx.informers
        self.pdbs, self.pods = inf.informer(PDBS), inf.informer(PODS)
        self.rsets, self.deploys, self.vcjobs = inf.informer(REPLICASETS), inf.informer(DEPLOYMENTS), inf.informer(VCJOBS)
        self.by_ns: dict[str, set[str]] = defaultdict(set)
        self.pdbs.add_handler(self._on_pdb)
        self.pods.add_handler(self._on_pod)
        for informer in (self.rsets, self.deploys, self.vcjobs):
            informer.add_handler(self._on_scale)

    def _on_pdb(self, etype: str, obj: dict, old: dict | None) -> None:
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        (self.by_ns[ns].discard if etype == "DELETED" else self.by_ns[ns].add)(name)
        if etype != "DELETED":
            self.enqueue((ns, name))

    def _on_pod(self, etype: str, obj: dict, old: dict | None) -> None:
        ns = obj["metadata"].get("namespace", "")
        labels = [obj["metadata"].get("labels") or {}, ((old or {}).get("metadata") or {}).get("labels") or {}]
        for name in tuple(self.by_ns.get(ns, ())):
            pdb = self.pdbs.get(ns, name)
            selector = ((pdb or {}).get("spec") or {}).get("selector")
            if selector is not None and any(match_label_selector(selector, lab) for lab in labels):
                self.enqueue((ns, name))

    def _on_scale(self, etype: str, obj: dict, old: dict | None) -> None:
        if old is None or (old.get("spec") or {}) != (obj.get("spec") or {}):
            for name in tuple(self.by_ns.get(obj["metadata"].get("namespace", ""), ())):
                self.enqueue((obj["metadata"]["namespace"], name))

    async def reconcile(self, key) -> None:
        ns, name = key
        pdb = self.pdbs.get(ns, name)
        if pdb is None:
            return
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        pods = [p for p in self.pods.in_namespace(ns)
                if selector is not None and match_label_selector(selector, p["metadata"].get("labels") or {})
                and not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        status = budget(spec, pods, self._expected_scale(ns, pods))
        status["observedGeneration"] = pdb["metadata"].get("generation", 1)
        cur = pdb.get("status") or {}
        status["disruptedPods"] = cur.get("disruptedPods") or {}
        allowed = status["disruptionsAllowed"] > 0
        cond = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
                "reason": "SufficientPods" if allowed else "InsufficientPods", "message": "",
                "observedGeneration": status["observedGeneration"]}
        status["conditions"] = set_condition(cur.get("conditions") or [], cond, to_iso(self.ctx.clock.now()))
        if any(cur.get(k) != v for k, v in status.items()):
            await self.ctx.client.patch(PDBS, ns, name, {"status": status}, sub="status")

    def _expected_scale(self, ns: str, pods: list[dict]) -> int:
        return expected_pods(pods, lambda ref, _pod: self._scale_of(ns, ref))

    def _scale_of(self, ns: str, ref: dict) -> int:
        kind = ref.get("kind")
        if kind == "ReplicaSet":
            rs = self.rsets.get(ns, ref["name"])
            if rs is None:
                return 1
            parent = controller_ref(rs)
            if parent and parent.get("kind") == "Deployment":
                dep = self.deploys.get(ns, parent["name"])
                if dep is not None:
                    return int(dep["spec"].get("replicas", 1) or 0)
            return int(rs["spec"].get("replicas", 1) or 0)
        if kind == "Job" and ref.get("apiVersion", "").startswith("batch.volcano.sh/"):
            job = self.vcjobs.get(ns, ref["name"])
            tasks = ((job or {}).get("spec") or {}).get("tasks") or ()
            return sum(int(t.get("replicas", 1) or 0) for t in tasks) or 1
        return 1


def _is_int(value) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def _percent(value) -> float:
    text = str(value).strip()
    return float(text[:-1]) if text.endswith("%") else float(text)
