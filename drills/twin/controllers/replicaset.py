"""ReplicaSet controller: keep `spec.replicas` active pods from the template and report status. The
ReplicationController's (core/v1, a plain-map selector) is the same controller on its own kind.

Like kube-controller-manager's: pods get `generateName` names (new name and uid every time), a
controller ownerReference, and creations/deletions are tracked as *expectations* so a lagging
informer never makes the controller create twice. Scale-down deletes the least useful pods first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from drills.core.clock import to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.podutil import (OwnerIndex, controller_ref, is_active, is_available, is_ready,
                                            is_terminating, pod_from_template, ready_since, set_condition)

__all__ = ["ReplicaSetController", "ReplicationControllerController", "replicaset_status"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
REPLICASETS = by_kind("apps/v1", "ReplicaSet")
REPLICATION_CONTROLLERS = by_kind("v1", "ReplicationController")
_EXPECTATION_TTL_S = 5.0  # wall seconds: a lost watch event must not freeze a ReplicaSet
_BURST = 50


@dataclass
class _Expect:
    adds: int = 0
    deletes: set = field(default_factory=set)
    deadline: float = 0.0

    def satisfied(self) -> bool:
        return (self.adds <= 0 and not self.deletes) or time.monotonic() > self.deadline


class ReplicaSetController(Controller):
    name = "replicaset"
    resource = REPLICASETS
    component = "replicaset-controller"

    def setup(self) -> None:
        self.pods = self.ctx.informers.informer(PODS)
        self.rsets = self.ctx.informers.informer(self.resource)
        self.index = OwnerIndex()
        self.expect: dict[str, _Expect] = {}
        self.pods.add_handler(self._on_pod)
        self.rsets.add_handler(self._on_rs)

    def _on_rs(self, etype: str, obj: dict, old: dict | None) -> None:
        if etype == "DELETED":
            self.expect.pop(obj["metadata"].get("uid", ""), None)
            return
        self.enqueue((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_pod(self, etype: str, obj: dict, old: dict | None) -> None:
        uid = self.index.update(etype, obj)
        if old is not None and old is not obj:
            prev = controller_ref(old)
            if prev and prev.get("uid") != uid and prev.get("kind") == self.resource.kind:
                self.enqueue((old["metadata"]["namespace"], prev["name"]))
        if not uid:
            return
        ref = next(r for r in obj["metadata"]["ownerReferences"] if r.get("controller"))
        if ref.get("kind") != self.resource.kind:
            return
        exp = self.expect.get(uid)
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if exp is not None:
            if etype == "ADDED" and not is_terminating(obj):
                exp.adds -= 1
            if etype == "DELETED" or is_terminating(obj):
                exp.deletes.discard(key)
        self.enqueue((obj["metadata"]["namespace"], ref["name"]))

    async def reconcile(self, key) -> None:
        namespace, name = key
        rs = self.rsets.get(namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        uid = rs["metadata"]["uid"]
        pods = [p for p in (self.pods.get(*k) for k in self.index.keys(uid)) if p is not None]
        active = [p for p in pods if is_active(p)]
        want = int(rs["spec"].get("replicas", 1) or 0)
        exp = self.expect.get(uid)
        failure = None
        if exp is None or exp.satisfied():
            failure = await self._manage(rs, active, want)
        await self._write_status(rs, pods, active, failure)

    async def _manage(self, rs: dict, active: list[dict], want: int) -> str | None:
        uid = rs["metadata"]["uid"]
        diff = want - len(active)
        if diff > 0:
            count = min(diff, _BURST)
            self.expect[uid] = _Expect(adds=count, deadline=time.monotonic() + _EXPECTATION_TTL_S)
            for _ in range(count):
                pod = pod_from_template(rs["spec"].get("template") or {}, rs)
                try:
                    created = await self.ctx.client.create(PODS, pod)
                except ApiError as err:
                    self.expect[uid].adds -= 1
                    await record_event(self.ctx.client, rs, "FailedCreate", f"Error creating: {err.message}",
                                       "Warning", self.component, clock=self.ctx.clock)
                    return f"{err.reason}: {err.message}"
                await record_event(self.ctx.client, rs, "SuccessfulCreate",
                                   f'Created pod: {created["metadata"]["name"]}', component=self.component,
                                   clock=self.ctx.clock)
            if diff > count:
                self.enqueue_after((rs["metadata"]["namespace"], rs["metadata"]["name"]), 0)
        elif diff < 0:
            victims = sorted(active, key=_deletion_rank)[: -diff]
            keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in victims}
            self.expect[uid] = _Expect(deletes=set(keys), deadline=time.monotonic() + _EXPECTATION_TTL_S)
            for pod in victims:
                meta = pod["metadata"]
                try:
                    await self.ctx.client.delete(PODS, meta["namespace"], meta["name"])
                except ApiError as err:
                    self.expect[uid].deletes.discard((meta["namespace"], meta["name"]))
                    return f"{err.reason}: {err.message}"
                await record_event(self.ctx.client, rs, "SuccessfulDelete", f'Deleted pod: {meta["name"]}',
                                   component=self.component, clock=self.ctx.clock)
        return None

    async def _write_status(self, rs: dict, pods: list[dict], active: list[dict], failure: str | None) -> None:
        status = replicaset_status(rs, active, self.ctx.clock.timestamp(), to_iso(self.ctx.clock.now()), failure)
        cur = rs.get("status") or {}
        if any(cur.get(k) != v for k, v in status.items()):
            await self.ctx.client.patch(self.resource, rs["metadata"]["namespace"], rs["metadata"]["name"],
                                        {"status": status}, sub="status")
        min_ready = float(rs["spec"].get("minReadySeconds") or 0)
        if min_ready > 0 and status["readyReplicas"] > status["availableReplicas"]:
            self.enqueue_after((rs["metadata"]["namespace"], rs["metadata"]["name"]), min_ready / 2)


class ReplicationControllerController(ReplicaSetController):
    name = "replication-controller"
    resource = REPLICATION_CONTROLLERS
    component = "replication-controller"


def replicaset_status(rs: dict, active: list[dict], now: float, now_iso: str, failure: str | None = None) -> dict:
    """The status the real controller computes from the ReplicaSet's active pods."""
    spec = rs.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = float(spec.get("minReadySeconds") or 0)
    labelled = sum(1 for p in active
                   if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in template_labels.items()))
    conditions = [c for c in (rs.get("status") or {}).get("conditions") or () if c.get("type") != "ReplicaFailure"]
    if failure:
        conditions = set_condition(conditions, {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                                                "message": failure}, now_iso)
    status = {
        "replicas": len(active),
        "fullyLabeledReplicas": labelled,
        "readyReplicas": sum(1 for p in active if is_ready(p)),
        "availableReplicas": sum(1 for p in active if is_available(p, min_ready, now)),
        "observedGeneration": rs["metadata"].get("generation", 1),
    }
    if conditions or (rs.get("status") or {}).get("conditions"):
        status["conditions"] = conditions
    return status


def _deletion_rank(pod: dict) -> tuple:
    """Sort key: pods worth least come first (kube's controller.ActivePods ordering)."""
    status = pod.get("status") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase", "Pending"), 0)
    since = ready_since(pod)
    restarts = sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or ())
    created = pod["metadata"].get("creationTimestamp", "")
    return (1 if pod.get("spec", {}).get("nodeName") else 0, phase_rank, 1 if since is not None else 0,
            -(since or 0.0), -restarts, _neg(created))


def _neg(text: str) -> tuple:
    """Newer first: invert an ISO timestamp's ordering."""
    return tuple(-ord(ch) for ch in text)
