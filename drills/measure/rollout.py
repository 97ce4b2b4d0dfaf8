"""A rolling restart of the serving Deployment, measured from the objects: when it completed, how many replicas
were available at its worst moment, and which pods serve at its end.

`rollout_status(deployment)` is the condition `kubectl rollout status` waits for (its DeploymentStatusViewer:
the controller observed the change, every replica updated and available, no old replica left; a
`ProgressDeadlineExceeded` condition is a stalled rollout). `RolloutWatch.watch` follows the workload's pods,
its Deployment and its Service's Endpoints from the restart until the rollout completes (or the deadline):

- available: pods Ready and not terminating, recounted at every pod event; its minimum over the rollout is what
  the strategy let go at once (maxUnavailable), read from the pods, not from the strategy's promise;
- completed: the first moment the Deployment's own status says the rollout is done;
- after: the pods at the end (name, uid, Ready, in the Endpoints, answers served since their Ready) and the pods
  of before the restart still there, by uid: "every replica replaced" is a claim about uids, not names.

It only measures; drills/verdicts/rollout.py judges.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable

from drills.core.clock import parse_iso
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, obj_get
from drills.load.bucket_stats import served_by, window
from drills.load.buckets import Bucket
from drills.measure.replicas import endpoint_pods
from drills.measure.serving import to_wall
from drills.measure.serving_startup import cond_time, ready_now

__all__ = ["rollout_status", "RolloutWatch", "RolloutOutcome", "RolloutLoad", "NewPod", "rollout_load", "load_window"]

log = logging.getLogger(__name__)


def rollout_status(dep: dict | None) -> tuple[bool, bool, str]:
    """(complete, stalled, kubectl's sentence) for a Deployment object (kubectl rollout status' viewer)."""
    if not dep:
        return False, False, "deployment not found"
    name = obj_get(dep, "metadata", "name")
    status = dep.get("status") or {}
    generation = int(obj_get(dep, "metadata", "generation", default=0) or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return False, False, "Waiting for deployment spec update to be observed..."
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return False, True, f'deployment "{name}" exceeded its progress deadline'
    want = int(obj_get(dep, "spec", "replicas", default=1) or 0)
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if updated < want:
        return False, False, (f'Waiting for deployment "{name}" rollout to finish: {updated} out of {want} new '
                              "replicas have been updated...")
    if total > updated:
        return False, False, (f'Waiting for deployment "{name}" rollout to finish: {total - updated} old replicas '
                              "are pending termination...")
    if available < updated:
        return False, False, (f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} updated '
                              "replicas are available...")
    return True, False, f'deployment "{name}" successfully rolled out'


@dataclass(frozen=True)
class RolloutLoad:
    """The load's figures over the rollout (rates 0..1, latencies ms; None where nothing completed)."""

    requests: int
    failures: int
    error_rate: float | None
    baseline_p99_ms: float | None
    p99_ms: float | None
    errors: dict[str, int] = field(default_factory=dict)  # most frequent errors in the window
    window: str = "during the rollout"
    baseline_answers: int = 0  # answers the baseline p99 is taken over
    answers: int = 0  # answers the window's p99 is taken over

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def rollout_load(buckets: list[Bucket], outcome: "RolloutOutcome", clock, baseline_s: float) -> RolloutLoad:
    """The load over the rollout — from the restart to its completion (else to the end of the watch) — and its
    p99 baseline before the restart."""
    label = "during the rollout" if "completed" in outcome.wall else "from the restart on (the rollout never completed)"
    return load_window(buckets, outcome.wall["injected"], outcome.wall.get("completed", outcome.wall["end"]), clock,
                       baseline_s, label)


def load_window(buckets: list[Bucket], inj: float, end: float, clock, baseline_s: float, label: str) -> RolloutLoad:
    """The load between two wall moments (a fault and the end of its window) and its p99 baseline: every request
    before the fault (the load ran its `baseline_s` before it), stopping a bucket short of the fault's."""
    cut = (math.floor(inj / buckets[0].w) - 1) * buckets[0].w if buckets else inj
    base = window(buckets, None, cut)
    during = window(buckets, inj, end)
    errors: dict[str, int] = {}
    for b in buckets:
        if inj <= b.t < end:
            for message, n in b.errors.items():
                errors[message] = errors.get(message, 0) + n
    return RolloutLoad(requests=during.requests, failures=during.failures,
                       error_rate=_num(during.failure_rate) if during.requests else None,
                       baseline_p99_ms=_num(base.p99_ms) if base.requests else None,
                       p99_ms=_num(during.p99_ms) if during.requests else None,
                       errors=dict(sorted(errors.items(), key=lambda kv: -kv[1])[:3]), window=label,
                       baseline_answers=base.latencies, answers=during.latencies)


@dataclass(frozen=True)
class NewPod:
    """A pod serving at the end of the rollout."""

    pod: str
    uid: str
    ready: bool
    in_endpoints: bool
    served: int | None  # answers it gave since it became Ready (None: the endpoint names no replica)

    @property
    def counts(self) -> bool:
        return self.ready and self.in_endpoints and (self.served is None or self.served > 0)

    def to_dict(self) -> dict:
        return {"uid": self.uid, "ready": self.ready, "in_endpoints": self.in_endpoints, "served": self.served}


@dataclass(frozen=True)
class RolloutOutcome:
    """The rollout as observed; cluster seconds since the restart, wall anchors for the load's buckets."""

    desired: int
    before: dict[str, str]  # pod name → uid when the restart was made
    after: tuple[NewPod, ...]
    left: tuple[str, ...]  # pods of before (by uid) still present at the end
    completed_s: float | None  # restart → the Deployment's status said complete (None: never)
    stalled: bool
    status: str  # kubectl's sentence at the end
    min_available: int | None  # fewest pods Ready and not terminating at once during the rollout
    min_available_s: float | None  # when that minimum was first reached
    wall: dict[str, float] = field(default_factory=dict)  # injected, completed, end: epoch wall seconds
    source: str = ""

    @property
    def most_unavailable(self) -> int | None:
        return None if self.min_available is None else max(0, self.desired - self.min_available)

    def to_dict(self) -> dict:
        return {"desired": self.desired, "pods_before": dict(self.before),
                "pods_after": {p.pod: p.to_dict() for p in self.after}, "left": list(self.left),
                "completed_s": self.completed_s, "stalled": self.stalled, "status": self.status,
                "min_available": self.min_available, "min_available_s": self.min_available_s,
                "most_unavailable": self.most_unavailable, "source": self.source}


class RolloutWatch:
    """Follows one Deployment's rolling restart: its pods (label selector), itself and its Service's Endpoints."""

    def __init__(self, cluster: Cluster, namespace: str, deployment: str, selector: str, service: str) -> None:
        self.cluster, self.ns, self.deployment, self.selector, self.service = \
            cluster, namespace, deployment, selector, service

    def watch(self, record: dict, desired: int, buckets: Callable[[], list[Bucket]], *, deadline_ts: float,
              on_phase: Callable[[str, object], None] | None = None,
              on_wait: Callable[[str, float], None] | None = None) -> RolloutOutcome:
        """From the restart (`record`: drills.faults.rollout's) until the rollout completed and every new pod
        served, or `deadline_ts` (cluster time)."""
        clock = self.cluster.clock
        inj_ts = parse_iso(record["injected_at"]).timestamp()
        before = dict(zip(record["pods"], record["uids"]))
        pods: dict[str, dict] = {}
        listed: set[str] = set()
        dep: dict | None = None
        completed: float | None = None
        stalled, sentence = False, "not observed"
        low: tuple[int, float] | None = None

        def take(event) -> None:
            nonlocal dep, listed, completed, stalled, sentence, low
            if event is None:
                return
            if event.type == "ERROR":
                raise CheckFailed(f"watching the inference Deployment's rollout failed: {event.obj}")
            if event.source == "deployment" and event.type != "DELETED":
                dep = event.obj
                done, stalled, sentence = rollout_status(dep)
                if done and completed is None:
                    completed = clock.timestamp()
                    if on_phase:
                        on_phase("recovered", clock.now())
            elif event.source == "endpoints":
                listed = set() if event.type == "DELETED" else endpoint_pods(event.obj)
            elif event.source == "pods":
                uid = event.obj["metadata"]["uid"]
                if event.type == "DELETED":
                    pods.pop(uid, None)
                else:
                    pods[uid] = event.obj
                available = sum(1 for p in pods.values() if _available(p))
                if low is None or available < low[0]:
                    low = (available, clock.timestamp())

        # one complete snapshot first: counting from a partly delivered list (the new pod before the old ones)
        # would read replicas down that never were
        for pod in json.loads(self.cluster.core.list_namespaced_pod(self.ns, label_selector=self.selector,
                                                                    _preload_content=False).data).get("items", []):
            pods[pod["metadata"]["uid"]] = pod
        low = (sum(1 for p in pods.values() if _available(p)), clock.timestamp())
        with EventMerger(clock) as merger:
            merger.watch("pods", self.cluster.core.list_namespaced_pod, self.ns, label_selector=self.selector)
            merger.watch("deployment", self.cluster.apps.list_namespaced_deployment, self.ns,
                         field_selector=f"metadata.name={self.deployment}")
            merger.watch("endpoints", self.cluster.core.list_namespaced_endpoints, self.ns,
                         field_selector=f"metadata.name={self.service}")
            for event in merger.events(deadline_ts, tick_wall_s=0.05):
                take(event)
                if completed is not None and self._all_serve(pods, before, listed, desired):
                    break
                if event is None and on_wait:
                    on_wait("recovered", clock.timestamp() - inj_ts)
            for event in merger.catch_up():
                take(event)
        fresh = sorted((p for p in pods.values() if p["metadata"]["uid"] not in before.values()
                        and not obj_get(p, "metadata", "deletionTimestamp")), key=lambda p: p["metadata"]["name"])
        seen = buckets()
        named = any(b.served for b in seen)
        after = tuple(NewPod(p["metadata"]["name"], p["metadata"]["uid"], ready_now(p),
                             p["metadata"]["name"] in listed or obj_get(p, "status", "podIP") in listed,
                             _served_since_ready(p, seen, clock) if named else None) for p in fresh)
        left = tuple(sorted(p["metadata"]["name"] for p in pods.values() if p["metadata"]["uid"] in before.values()))
        wall = {"injected": to_wall(clock, inj_ts), "end": time.time()}
        if completed is not None:
            wall["completed"] = to_wall(clock, completed)
        return RolloutOutcome(
            desired=desired, before=before, after=after, left=left,
            completed_s=None if completed is None else round(completed - inj_ts, 3), stalled=stalled, status=sentence,
            min_available=None if low is None else low[0], min_available_s=None if low is None else round(low[1] - inj_ts, 3),
            wall=wall, source=(f"pods -l {self.selector}, deployments/{self.deployment} (status), endpoints/{self.service} "
                               f"in {self.ns}: watched from the restart"))

    @staticmethod
    def _all_serve(pods: dict[str, dict], before: dict[str, str], listed: set[str], desired: int) -> bool:
        """No pod of before left, and `desired` new pods Ready and in the Endpoints."""
        if any(uid in before.values() for uid in pods):
            return False
        fresh = [p for p in pods.values() if _available(p) and p["metadata"]["name"] in listed]
        return len(fresh) >= desired


def _available(pod: dict) -> bool:
    return ready_now(pod) and not obj_get(pod, "metadata", "deletionTimestamp")


def _served_since_ready(pod: dict, buckets: list[Bucket], clock) -> int:
    ready = cond_time(pod, "Ready", "True")
    since = to_wall(clock, ready) if ready is not None else None
    return served_by(buckets, since).get(pod["metadata"]["name"], 0)


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)
