"""The node lifecycle controller (kube-controller-manager's, plus its taint-eviction half).

- A node whose kubelet stopped heartbeating (`twin.gpu-drills.io/kubelet: stopped`, last heartbeat
  `…/kubelet-stopped-at`) goes `Ready=Unknown` ("Kubelet stopped posting node status.") after
  `node_monitor_grace_period`, gets `node.kubernetes.io/unreachable` NoSchedule + NoExecute taints
  (a kubelet-posted `Ready=False` gets `not-ready` ones), a `NodeNotReady` event, and its pods are
  marked not Ready. When the kubelet posts Ready again the taints go.
- A cordoned node (`spec.unschedulable`) carries `node.kubernetes.io/unschedulable:NoSchedule`.
- Taint-based eviction: a pod on a node with a NoExecute taint it does not tolerate is deleted at
  once; one that tolerates it for `tolerationSeconds` is deleted that long after the taint's
  `timeAdded`. Pods lacking tolerations for not-ready/unreachable get the API server's default
  (`default_toleration_seconds`, 300 s), as the DefaultTolerationSeconds admission plugin adds.
  Evictions write a `DisruptionTarget` condition and a `TaintManagerEviction` event, then delete.
"""

from __future__ import annotations

import logging
from typing import Hashable

from drills.core.clock import parse_iso, to_iso
from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import key_of
from drills.twin.controllers.events import record_event
from drills.twin.controllers.nodeutil import (
    KUBELET_STOPPED_AT, NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT, condition, is_terminal,
    kubelet_stopped, stopped_at, toleration_seconds,
)

__all__ = ["NodeLifecycle", "effective_tolerations", "eviction_time"]

log = logging.getLogger(__name__)

PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")
_CONDITION_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)


def effective_tolerations(pod: dict, default_seconds: int) -> list[dict]:
    """The pod's tolerations plus the DefaultTolerationSeconds ones it lacks."""
    tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
    for key in _CONDITION_TAINTS:
        taint = {"key": key, "effect": "NoExecute"}
        if toleration_seconds(tolerations, taint) == 0.0:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": default_seconds})
    return tolerations


def eviction_time(pod: dict, taints: list[dict], default_seconds: int, now: float) -> float | None:
    """Twin epoch at which NoExecute `taints` evict `pod` (None: never)."""
    tolerations = effective_tolerations(pod, default_seconds)
    due = None
    for taint in taints:
        if taint.get("effect") != "NoExecute":
            continue
        seconds = toleration_seconds(tolerations, taint)
        if seconds is None:
            continue
        added = taint.get("timeAdded")
        try:
            start = parse_iso(added).timestamp() if added else now
        except ValueError:
            start = now
        when = start + seconds
        due = when if due is None else min(due, when)
    return due


class NodeLifecycle(Controller):
    name = "node-lifecycle"

    def setup(self) -> None:
        self.pods, self.nodes = self.ctx.informers.informer(PODS), self.ctx.informers.informer(NODES)
        timings = getattr(self.ctx.profile, "timings", None)
        self.grace = float(getattr(timings, "node_monitor_grace_period", 50.0))
        self.default_toleration = int(getattr(timings, "default_toleration_seconds", 300))
        self._sig: dict[str, tuple] = {}
        self._by_node: dict[str, set] = {}
        self._tainted: set[str] = set()  # nodes with NoExecute taints
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)

    async def reconcile(self, key: Hashable) -> None:
        kind, *rest = key
        if kind == "node":
            node = self.nodes.get("", rest[0])
            if node is not None:
                await self._node(node)
        elif kind == "pod":
            pod = self.pods.get(*rest)
            if pod is not None:
                await self._pod(pod)

    # -- handlers -------------------------------------------------------------------------------
    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._sig.pop(name, None)
            self._tainted.discard(name)
            return
        spec = node.get("spec") or {}
        sig = (kubelet_stopped(node), (node["metadata"].get("annotations") or {}).get(KUBELET_STOPPED_AT),
               (condition(node, "Ready") or {}).get("status"), bool(spec.get("unschedulable")), repr(spec.get("taints")))
        if self._sig.get(name) == sig:
            return
        self._sig[name] = sig
        self.enqueue(("node", name))
        if any(t.get("effect") == "NoExecute" for t in spec.get("taints") or []):
            self._tainted.add(name)
            for key in self._by_node.get(name, ()):
                self.enqueue(("pod", *key))
        else:
            self._tainted.discard(name)

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        key = key_of(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        prev = ((old or {}).get("spec") or {}).get("nodeName")
        if prev and prev != node or etype == "DELETED":
            self._by_node.get(prev or node or "", set()).discard(key)
        if etype == "DELETED" or not node:
            return
        self._by_node.setdefault(node, set()).add(key)
        if node in self._tainted and not prev:
            self.enqueue(("pod", *key))

    # -- nodes ----------------------------------------------------------------------------------
    async def _node(self, node: dict) -> None:
        name, now = node["metadata"]["name"], self.ctx.clock.timestamp()
        ready = condition(node, "Ready") or {}
        last = stopped_at(node)
        if kubelet_stopped(node) and ready.get("status") == "True":
            last = now if last is None else last
            if now < last + self.grace:
                self.enqueue_after(("node", name), last + self.grace - now)
            else:
                await self._mark_unknown(node, last)
                return  # the status change comes back through the informer
        await self._sync_taints(node)

    async def _mark_unknown(self, node: dict, last_heartbeat: float) -> None:
        name, now = node["metadata"]["name"], to_iso(self.ctx.clock.now())
        message = "Kubelet stopped posting node status."
        await self.ctx.client.patch(NODES, None, name, {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": message,
             "lastHeartbeatTime": to_iso(last_heartbeat), "lastTransitionTime": now}]}}, sub="status", kind="strategic")
        log.info("node %s: NotReady (kubelet silent since %s)", name, to_iso(last_heartbeat))
        await record_event(self.ctx.client, node, "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                           component="node-controller", clock=self.ctx.clock)
        for key in list(self._by_node.get(name, ())):
            pod = self.pods.get(*key)
            if pod is None or is_terminal(pod):
                continue
            await self.ctx.client.patch(PODS, key[0], key[1], {"status": {"conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": now}]}}, sub="status", kind="strategic")
            await record_event(self.ctx.client, pod, "NodeNotReady", "Node is not ready", type="Warning",
                               component="node-controller", clock=self.ctx.clock)

    async def _sync_taints(self, node: dict) -> None:
        spec, now = node.get("spec") or {}, to_iso(self.ctx.clock.now())
        taints = list(spec.get("taints") or [])
        status = (condition(node, "Ready") or {}).get("status", "True")
        want: dict[tuple[str, str], dict] = {}
        if status in ("False", "Unknown"):
            key = NOT_READY_TAINT if status == "False" else UNREACHABLE_TAINT
            want[(key, "NoSchedule")] = {"key": key, "effect": "NoSchedule"}
            want[(key, "NoExecute")] = {"key": key, "effect": "NoExecute", "timeAdded": now}
        if spec.get("unschedulable"):
            want[(UNSCHEDULABLE_TAINT, "NoSchedule")] = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule",
                                                         "timeAdded": now}
        managed = {*_CONDITION_TAINTS, UNSCHEDULABLE_TAINT}
        kept = [t for t in taints if t.get("key") not in managed or (t.get("key"), t.get("effect")) in want]
        present = {(t.get("key"), t.get("effect")) for t in kept}
        new = kept + [t for k, t in want.items() if k not in present]
        if new == taints:
            return
        await self.ctx.client.patch(NODES, None, node["metadata"]["name"], {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": new}},
            kind="merge")

    # -- pods -----------------------------------------------------------------------------------
    async def _pod(self, pod: dict) -> None:
        node = self.nodes.get("", (pod.get("spec") or {}).get("nodeName") or "")
        if node is None or is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        now = self.ctx.clock.timestamp()
        due = eviction_time(pod, (node.get("spec") or {}).get("taints") or [], self.default_toleration, now)
        if due is None:
            return
        if now < due:
            self.enqueue_after(("pod", *key_of(pod)), due - now)
            return
        ns, name = key_of(pod)
        log.info("taint eviction: %s/%s from %s", ns, name, node["metadata"]["name"])
        uid = pod["metadata"].get("uid")
        await self.ctx.client.patch(PODS, ns, name, {"metadata": {"uid": uid}, "status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
             "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": to_iso(now)}]}},
            sub="status", kind="strategic")
        await record_event(self.ctx.client, pod, "TaintManagerEviction", f"Marking for deletion Pod {ns}/{name}",
                           component="taint-eviction-controller", clock=self.ctx.clock)
        await self.ctx.client.delete(PODS, ns, name, uid=uid)
