"""The serving side under a training burst, measured from the objects: which serving pods were evicted or preempted
(by uid, with the reason the pod's own DisruptionTarget condition or deletion gives), how few replicas were available
at once, and where the burst's jobs ended up (running, or waiting in their queue).

`NeighbourWatch.watch` follows the workload's pods from the burst on for `hold_s` cluster seconds: a pod of before
the burst that is deleted, or marked DisruptionTarget (the scheduler's preemption, the Eviction API, Volcano's
reclaim all mark it), is a disruption. The burst's jobs are read at the end (their Volcano phase and their pods'
nodes). It only measures; drills/verdicts/neighbour.py judges.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from drills.core.clock import parse_iso
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, obj_get
from drills.measure.serving import to_wall
from drills.measure.serving_startup import ready_now

__all__ = ["NeighbourWatch", "NeighbourOutcome", "Disruption", "BurstJob"]

log = logging.getLogger(__name__)

VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")


@dataclass(frozen=True)
class Disruption:
    pod: str
    uid: str
    reason: str  # the DisruptionTarget condition's reason (PreemptionByScheduler, EvictionByEvictionAPI, …) or "Deleted"
    message: str
    after_s: float  # cluster seconds after the burst

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BurstJob:
    name: str
    phase: str  # the Volcano Job's status.state.phase ("" when it has none yet)
    nodes: tuple[str, ...]  # where its pods run
    # its pods the scheduler could not place (PodScheduled=False, Unschedulable): pod → the scheduler's message
    unschedulable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"phase": self.phase, "nodes": list(self.nodes), "unschedulable": dict(self.unschedulable)}


@dataclass(frozen=True)
class NeighbourOutcome:
    desired: int
    before: dict[str, str]  # serving pod name → uid at the burst
    disrupted: tuple[Disruption, ...]
    min_available: int
    jobs: tuple[BurstJob, ...]
    queue: str
    wall: dict[str, float] = field(default_factory=dict)  # injected, end
    source: str = ""
    serving_nodes: tuple[str, ...] = ()  # where the serving pods of before the burst ran when it was submitted
    # serving nodes the scheduler could not place a burst pod on whatever their GPUs (cordoned, a NoSchedule taint the
    # burst does not tolerate): node → why, read after the hold
    closed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"desired": self.desired, "pods_before": dict(self.before),
                "disrupted": [d.to_dict() for d in self.disrupted], "min_available": self.min_available,
                "burst_jobs": {j.name: j.to_dict() for j in self.jobs}, "queue": self.queue,
                "serving_nodes": list(self.serving_nodes), "closed_serving_nodes": dict(self.closed),
                "source": self.source}


class NeighbourWatch:
    def __init__(self, cluster: Cluster, namespace: str, selector: str) -> None:
        self.cluster, self.ns, self.selector = cluster, namespace, selector

    def watch(self, burst: dict, before: dict[str, str], desired: int, hold_s: float,
              on_wait=None) -> NeighbourOutcome:
        """From the burst (`burst`: drills.faults.burst's record) for `hold_s` cluster seconds."""
        clock = self.cluster.clock
        inj_ts = parse_iso(burst["injected_at"]).timestamp()
        uids = set(before.values())
        pods: dict[str, dict] = {}
        disrupted: dict[str, Disruption] = {}
        for pod in self._list_pods():
            pods[pod["metadata"]["uid"]] = pod
        serving_nodes = tuple(sorted({n for uid, p in pods.items() if uid in uids
                                      if (n := obj_get(p, "spec", "nodeName"))}))
        low = sum(1 for p in pods.values() if ready_now(p))

        def take(event) -> None:
            nonlocal low
            if event is None:
                return
            if event.type == "ERROR":
                raise CheckFailed(f"watching the serving pods failed: {event.obj}")
            pod, uid = event.obj, event.obj["metadata"]["uid"]
            if event.type == "DELETED":
                pods.pop(uid, None)
            else:
                pods[uid] = pod
            if uid in uids and uid not in disrupted:
                cond = next((c for c in obj_get(pod, "status", "conditions", default=None) or []
                             if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)
                if cond is not None or event.type == "DELETED" or obj_get(pod, "metadata", "deletionTimestamp"):
                    disrupted[uid] = Disruption(pod["metadata"]["name"], uid, (cond or {}).get("reason") or "Deleted",
                                                (cond or {}).get("message") or "", round(clock.timestamp() - inj_ts, 1))
            low = min(low, sum(1 for p in pods.values() if ready_now(p)))

        deadline = inj_ts + hold_s
        with EventMerger(clock) as merger:
            merger.watch("pods", self.cluster.core.list_namespaced_pod, self.ns, label_selector=self.selector)
            for event in merger.events(deadline, tick_wall_s=0.05):
                take(event)
                if event is None and on_wait:
                    on_wait("held", clock.timestamp() - inj_ts)
            for event in merger.catch_up():
                take(event)
        jobs, tolerations = self._jobs(burst)
        # only when a burst pod was left without GPUs does it matter whether the serving nodes could have taken it
        waiting = any(j.unschedulable for j in jobs)
        closed = {n: why for n in serving_nodes if waiting and tolerations is not None
                  and (why := self._closed(n, tolerations))}
        return NeighbourOutcome(
            desired=desired, before=dict(before), disrupted=tuple(disrupted.values()), min_available=low, jobs=jobs,
            queue=burst.get("queue", ""), wall={"injected": to_wall(clock, inj_ts), "end": time.time()},
            source=f"pods -l {self.selector} in {self.ns} (nodes, DisruptionTarget conditions, deletions), "
                   f"jobs.batch.volcano.sh -l {burst['selector']} (status.state.phase) and their pods (nodes, "
                   f"PodScheduled conditions): watched {hold_s:.0f}s from the burst", serving_nodes=serving_nodes,
            closed=closed)

    def _closed(self, node: str, tolerations: list[dict]) -> str | None:
        """Why a burst pod could not have been placed on `node` whatever its GPUs: cordoned, or a NoSchedule /
        NoExecute taint none of the burst's tolerations matches; None when the node was a candidate (or unread)."""
        try:
            obj = json.loads(self.cluster.core.read_node(node, _preload_content=False).data)
        except Exception:  # noqa: BLE001 — unread: not claimed closed (the effect judge then says what it saw)
            return None
        if obj_get(obj, "spec", "unschedulable", default=False):
            return "cordoned (spec.unschedulable)"
        for taint in obj_get(obj, "spec", "taints", default=None) or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
                return f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} not tolerated"
        return None

    def _list_pods(self) -> list[dict]:
        return json.loads(self.cluster.core.list_namespaced_pod(self.ns, label_selector=self.selector,
                                                                _preload_content=False).data).get("items", [])

    def _jobs(self, burst: dict) -> tuple[tuple[BurstJob, ...], list[dict] | None]:
        """The burst's jobs as they stand, and its pods' tolerations (None: no burst pod read)."""
        ns, sel = burst["namespace"], burst["selector"]
        data = json.loads(self.cluster.custom.list_namespaced_custom_object(
            *VOLCANO[:2], ns, VOLCANO[2], label_selector=sel, _preload_content=False).data)
        pods = json.loads(self.cluster.core.list_namespaced_pod(ns, label_selector=sel, _preload_content=False).data)
        nodes: dict[str, list[str]] = {}
        unplaced: dict[str, dict[str, str]] = {}
        for pod in pods.get("items", []):
            job = (pod["metadata"].get("labels") or {}).get("volcano.sh/job-name", "")
            if obj_get(pod, "spec", "nodeName"):
                nodes.setdefault(job, []).append(pod["spec"]["nodeName"])
            elif (cond := _unschedulable(pod)) is not None:
                unplaced.setdefault(job, {})[pod["metadata"]["name"]] = cond.get("message") or ""
        tolerations = next((obj_get(p, "spec", "tolerations", default=None) or [] for p in pods.get("items", [])), None)
        return tuple(BurstJob(j["metadata"]["name"], obj_get(j, "status", "state", "phase", default="") or "",
                              tuple(sorted(nodes.get(j["metadata"]["name"], ()))),
                              unplaced.get(j["metadata"]["name"], {}))
                     for j in sorted(data.get("items", []), key=lambda j: j["metadata"]["name"])), tolerations


def _unschedulable(pod: dict) -> dict | None:
    """The pod's PodScheduled=False/Unschedulable condition (kube-scheduler's and Volcano's answer to a pod no node
    can take as things stand), else None."""
    return next((c for c in obj_get(pod, "status", "conditions", default=None) or []
                 if c.get("type") == "PodScheduled" and c.get("status") == "False"
                 and c.get("reason") == "Unschedulable"), None)


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' toleration match: the key (empty with Exists: every key), the value for Equal, the effect."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", "")
