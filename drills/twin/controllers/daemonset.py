"""DaemonSet controller: one pod per eligible node, like kube-controller-manager's.

A node is eligible when the pod template's nodeSelector / required node affinity match it and its
NoSchedule/NoExecute taints are tolerated — counting the tolerations the real controller adds to
every daemon pod (not-ready, unreachable, disk/memory/pid pressure, unschedulable, and
network-unavailable for hostNetwork pods), so a cordoned node keeps its daemons. A daemon already on a node
stays there through a NoSchedule taint it does not tolerate (the real controller's shouldContinueRunning: only
an untolerated NoExecute taint, or a selector that no longer matches, removes it), so a GPU health taint does
not take the node's DCGM and exporter pods away. Pods are created
with a required node affinity on `metadata.name` (the scheduler binds them, as since Kubernetes
1.12) and the labels `controller-revision-hash` / `pod-template-generation`; a pod on a node that is
gone, or no longer eligible (as above), is deleted. Status carries the counts `kubectl get ds` prints.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Hashable

from drills.twin.api.resources import by_kind
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.controllers.events import record_event
from drills.twin.controllers.daemontally import DaemonTally
from drills.twin.controllers.nodeutil import matches_node_selector, untolerated
from drills.twin.controllers.podutil import pod_from_template

__all__ = ["DaemonSetController", "Placement", "daemon_tolerations", "eligible"]

log = logging.getLogger(__name__)

_BURST = 500  # the real controller's burstReplicas: creates in flight at once

PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")
DAEMONSETS = by_kind("apps/v1", "DaemonSet")

_AUTO_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def daemon_tolerations(pod_spec: dict) -> list[dict]:
    """The template's tolerations plus those the DaemonSet controller adds (util.AddOrUpdateDaemonPodTolerations)."""
    out = list(pod_spec.get("tolerations") or [])
    wanted = list(_AUTO_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in wanted:
        if not any(t.get("key") == key and t.get("effect") == effect for t in out):
            out.append({"key": key, "operator": "Exists", "effect": effect})
    return out


def eligible(ds: dict, node: dict, running: bool = False) -> bool:
    """Should this DaemonSet run a pod on this node (selector, affinity, taints)? `running`: may a pod already
    there keep running (only NoExecute taints count then)?"""
    return _fits(_probe(ds), node, running)


def _probe(ds: dict) -> dict:
    """The daemon pod as placement sees it: the template's spec with the tolerations the controller adds."""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return {"spec": {**spec, "tolerations": daemon_tolerations(spec)}}


def _fits(probe: dict, node: dict, running: bool) -> bool:
    if not matches_node_selector(probe, node):
        return False
    effects = ("NoExecute",) if running else ("NoSchedule", "NoExecute")
    return untolerated((node.get("spec") or {}).get("taints") or [], probe["spec"]["tolerations"], effects) is None


@dataclass
class Placement:
    """Where one template generation of a DaemonSet belongs: the nodes it should run on (`wanted`) and those
    where a daemon already there may keep running (`keep`, a superset: only NoExecute taints count). Computed
    over every node once per generation, then kept current per node event, so a reconcile (one per daemon pod
    event: thousands while a fleet starts) costs set operations, not a walk over every node."""

    sig: tuple
    probe: dict
    wanted: set[str]
    keep: set[str]

    @classmethod
    def of(cls, ds: dict, nodes: list[dict]) -> "Placement":
        probe = _probe(ds)
        wanted, keep = set(), set()
        for node in nodes:
            cls._sort(probe, node, wanted, keep)
        return cls(_signature(ds), probe, wanted, keep)

    def node_changed(self, node: dict | None, name: str) -> None:
        self.wanted.discard(name)
        self.keep.discard(name)
        if node is not None:
            self._sort(self.probe, node, self.wanted, self.keep)

    @staticmethod
    def _sort(probe: dict, node: dict, wanted: set[str], keep: set[str]) -> None:
        if _fits(probe, node, running=True):
            keep.add(node["metadata"]["name"])
            if _fits(probe, node, running=False):
                wanted.add(node["metadata"]["name"])


class DaemonSetController(Controller):
    name = "daemonset"

    def setup(self) -> None:
        inf = self.ctx.informers
        self.pods, self.nodes, self.sets = inf.informer(PODS), inf.informer(NODES), inf.informer(DAEMONSETS)
        self.tally = DaemonTally()  # each DaemonSet's pods by node, and its status counts, kept per pod event
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        self.sets.add_handler(self._on_set)
        self._creating: dict[tuple, set[str]] = {}  # DaemonSet key → nodes with a create in flight
        self._placed: dict[tuple, Placement] = {}  # DaemonSet key → where its template generation belongs
        self._revisions: dict[tuple, str] = {}  # (uid, generation) → its template's hash, hashed once

    def _on_set(self, etype: str, ds: dict, old: dict | None) -> None:
        key = (ds["metadata"]["namespace"], ds["metadata"]["name"])
        if etype == "DELETED":
            self._placed.pop(key, None)
            self._revisions = {sig: rev for sig, rev in self._revisions.items() if sig[0] != ds["metadata"].get("uid")}
        else:
            self.enqueue(key)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        if old is not None and etype == "MODIFIED" and _placement(old) == _placement(node):
            return  # heartbeats do not change where daemons belong
        name = node["metadata"]["name"]
        for key, placed in list(self._placed.items()):
            ds = self.sets.get(*key)
            if ds is None or _signature(ds) != placed.sig:
                del self._placed[key]  # recomputed over every node by the next reconcile
            else:
                placed.node_changed(None if etype == "DELETED" else node, name)
        for ds in self.sets.items():
            self.enqueue((ds["metadata"]["namespace"], ds["metadata"]["name"]))

    def _placement(self, key: tuple, ds: dict) -> Placement:
        """Where `ds` belongs (cached per template generation, kept current by node events)."""
        placed = self._placed.get(key)
        if placed is None or placed.sig != _signature(ds):
            placed = self._placed[key] = Placement.of(ds, self.nodes.items())
        return placed

    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        ref = self.tally.update(etype, pod)
        if ref is not None:
            self.enqueue((pod["metadata"]["namespace"], ref["name"]))

    async def reconcile(self, key: Hashable) -> None:
        ns, name = key
        ds = self.sets.get(ns, name)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return
        daemons = self.tally.of(ds["metadata"]["uid"])
        placed = self._placement(key, ds)
        wanted = set(placed.wanted)
        have = daemons.nodes()
        status = self._status(ds, daemons, wanted)
        keep = have & placed.keep
        extra = list(daemons.extra(wanted | keep))
        creating = self._creating.setdefault(key, set())
        missing = sorted(wanted - have - creating)
        batch, done = 1, 0
        while done < len(missing):  # slowStartBatch: 1, 2, 4 … concurrent creates; a failure ends the burst
            chunk = missing[done:done + batch]
            done += len(chunk)
            creating.update(chunk)
            created = await asyncio.gather(*(self._create(ds, key, node_name) for node_name in chunk))
            if not all(created):
                break
            batch = min(batch * 2, _BURST)
        creating.intersection_update(wanted - have)
        for pod_name, uid in extra:
            await self.ctx.client.delete(PODS, ns, pod_name, uid=uid)
            await record_event(self.ctx.client, ds, "SuccessfulDelete", f"Deleted pod: {pod_name}",
                               component="daemonset-controller", clock=self.ctx.clock)
        await self._write_status(ds, status)

    async def _create(self, ds: dict, key: tuple, node_name: str) -> bool:
        try:
            created = await self.ctx.client.create(PODS, self._pod(ds, node_name))
        except ApiError as err:
            self._creating.get(key, set()).discard(node_name)
            await record_event(self.ctx.client, ds, "FailedCreate", f"Error creating: {err.message}", "Warning",
                               "daemonset-controller", clock=self.ctx.clock)
            return False
        await record_event(self.ctx.client, ds, "SuccessfulCreate", f'Created pod: {created["metadata"]["name"]}',
                           component="daemonset-controller", clock=self.ctx.clock)
        return True

    def _pod(self, ds: dict, node_name: str) -> dict:
        template = (ds.get("spec") or {}).get("template") or {}
        generation = str(ds["metadata"].get("generation", 1))
        pod = pod_from_template(template, ds, extra_labels={"controller-revision-hash": self._revision(ds),
                                                            "pod-template-generation": generation})
        spec = pod["spec"]
        spec["tolerations"] = daemon_tolerations(spec)
        affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
        return pod

    def _status(self, ds: dict, daemons, wanted: set[str]) -> dict:
        min_ready = float((ds.get("spec") or {}).get("minReadySeconds") or 0)
        counts = daemons.counts(wanted, self._revision(ds), min_ready, self.ctx.clock.timestamp())
        return {**counts, "observedGeneration": ds["metadata"].get("generation", 1)}

    def _revision(self, ds: dict) -> str:
        """The template's hash (the controller-revision-hash label), once per template generation."""
        sig = _signature(ds)
        revision = self._revisions.get(sig)
        if revision is None:
            revision = self._revisions[sig] = _revision((ds.get("spec") or {}).get("template") or {})
        return revision

    async def _write_status(self, ds: dict, status: dict) -> None:
        min_ready = float((ds.get("spec") or {}).get("minReadySeconds") or 0)
        unavailable = status["desiredNumberScheduled"] - status["numberAvailable"]
        if unavailable > 0:
            status["numberUnavailable"] = unavailable
        cur = ds.get("status") or {}
        if any(cur.get(k) != v for k, v in status.items()) or ("numberUnavailable" in cur and unavailable <= 0):
            await self._put_status(ds, status)
        if min_ready > 0 and status["numberReady"] > status["numberAvailable"]:
            self.enqueue_after((ds["metadata"]["namespace"], ds["metadata"]["name"]), min_ready / 2)

    async def _put_status(self, ds: dict, status: dict) -> None:
        """PUT the status; on a conflict (the cache trails our own last write) read the DaemonSet afresh and
        try once more, as the real controller's storeDaemonSetStatus does (StatusUpdateRetries = 1)."""
        ns, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        try:
            await self.ctx.client.replace(DAEMONSETS, ns, name, {**ds, "status": status}, sub="status")
        except ApiError as err:
            fresh = await self.ctx.client.get(DAEMONSETS, ns, name) if err.status == 409 else None
            if fresh is None or fresh["metadata"].get("uid") != ds["metadata"].get("uid") \
                    or fresh["metadata"].get("generation") != ds["metadata"].get("generation"):
                raise
            await self.ctx.client.replace(DAEMONSETS, ns, name, {**fresh, "status": status}, sub="status")


def _signature(ds: dict) -> tuple:
    """What decides where a DaemonSet runs changes only with its template, and so with its generation."""
    return ds["metadata"].get("uid"), ds["metadata"].get("generation")


def _placement(node: dict) -> tuple:
    return (json.dumps((node["metadata"].get("labels") or {}), sort_keys=True),
            json.dumps((node.get("spec") or {}).get("taints") or [], sort_keys=True))


def _revision(template: dict) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
