"""Serving recovery after a pod kill, measured from the outside: pods, the Deployment and the load.

`ServingMonitor.recovery` watches the workload's pods and Deployment after the fault and reads each
phase from the objects' own timestamps; the endpoint side comes from the load's 50 ms buckets, whose
wall-clock stamps are converted to cluster time with the cluster clock (the twin's is dilated):

- detected     the first replacement created (or, for a killed container, the pod going unready)
- rescheduled  the first replacement bound to a node (its PodScheduled lastTransitionTime)
- ready        the Deployment back to its desired Ready replicas (the last replacement's Ready time)
- recovered    the endpoint serving again: the start of the first run of successful requests after
               the fault that lasts `settle_s` without a failure (`first_sustained_success`)

It also watches the Service's Endpoints and the killed pods (`drills.measure.replicas`): a replacement
counts only when Ready, in the Endpoints and seen serving; a kill that took no pod down is recorded
(`unaffected`), so the drill can say the fault had no effect instead of judging a recovery.

Per replacement pod it also splits the startup into scheduling, image pull, container start and
model load (events Pulling/Pulled, startedAt, the Ready condition), so a slow recovery names its
slow phase. It only measures; `drills.verdicts.timeline` judges.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Callable

from drills.core.clock import Clock, parse_iso
from drills.profile.model import InferenceWorkload
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, obj_get, wait_for
from drills.load.buckets import Bucket, first_sustained_success, kind_counts, rebin, served_by, window
from drills.measure.replicas import FaultEffect, Replacement, endpoint_pods, ready_addresses, replacement_states
from drills.verdicts.timeline import Timeline, Verdict, format_duration

__all__ = ["ServingMonitor", "ServingBaseline", "ServingRecovery", "PodStartup", "LoadMeasure", "measure_load",
           "load_overlay", "wait_for_load", "to_cluster", "to_wall", "with_slowest_phase", "STARTUP_PHASES"]

log = logging.getLogger(__name__)

STARTUP_PHASES = ("scheduling", "image pull", "container start", "model load")


@dataclass(frozen=True)
class ServingBaseline:
    """The Deployment before the fault: desired and Ready replicas, and its pods (name → uid)."""

    deployment: str
    namespace: str
    desired: int
    ready: int
    pods: dict[str, str]


@dataclass(frozen=True)
class PodStartup:
    """One replacement pod's startup, phase by phase (cluster seconds; an unfinished phase runs to `until`)."""

    pod: str
    node: str | None
    phases: dict[str, float]
    ready: bool
    pull_message: str | None = None
    pending_message: str | None = None  # the scheduler's last FailedScheduling message, while never bound

    def slowest(self) -> tuple[str, float] | None:
        return max(self.phases.items(), key=lambda kv: kv[1]) if self.phases else None


@dataclass(frozen=True)
class ServingRecovery:
    """What happened after the fault, measured; wall anchors let the load be read in the same frame."""

    timeline: Timeline
    killed: tuple[str, ...]
    survivors: int
    desired: int
    ready_replicas: int
    replaced: int  # replacements that count: Ready, in the Service's Endpoints and serving
    startups: tuple[PodStartup, ...]
    wall: dict[str, float] = field(default_factory=dict)  # phase → epoch wall seconds
    replacements: tuple[Replacement, ...] = ()
    unaffected: tuple[str, ...] = ()  # killed pods the fault did not take down (none: it had its effect)

    def slowest(self) -> tuple[str, float, str] | None:
        """(phase, seconds, pod) of the slowest startup phase of any replacement."""
        best = None
        for s in self.startups:
            top = s.slowest()
            if top and (best is None or top[1] > best[1]):
                best = (top[0], top[1], s.pod)
        return best

    def details(self) -> dict:
        slow = self.slowest()
        return {"killed_pods": list(self.killed), "survivors": self.survivors, "desired_replicas": self.desired,
                "ready_replicas": self.ready_replicas, "replaced": self.replaced,
                "replacements": {r.pod: r.to_dict() for r in self.replacements},
                "fault_effect": {"had_effect": not self.unaffected, "unaffected": list(self.unaffected)},
                "startup": {s.pod: {k: round(v, 1) for k, v in s.phases.items()} for s in self.startups},
                "slowest_phase": None if slow is None else {"phase": slow[0], "seconds": round(slow[1], 1),
                                                           "pod": slow[2]}}


@dataclass(frozen=True)
class LoadMeasure:
    """The load's figures around the fault (rates 0..1, latencies ms; None where nothing completed)."""

    requests: int
    failures: int
    baseline_rps: float | None
    baseline_p99_ms: float | None
    after_p99_ms: float | None  # once serving again and Ready (the Deployment whole again)
    outage_error_rate: float | None  # from the fault to the endpoint serving again
    budget_error_rate: float | None  # while at least one replica survived / served
    budget_window: str
    serving_p99_ms: float | None = None  # over the budget window: what users saw while a replica served
    budget_errors: dict[str, int] = field(default_factory=dict)  # most frequent errors in that window
    # from the fault to the end of the watch, whatever survived: a voluntary disruption (a drain) must keep
    # users served throughout, so no outage window is excused
    fault_error_rate: float | None = None
    fault_errors: dict[str, int] = field(default_factory=dict)
    failure_kinds: dict[str, int] = field(default_factory=dict)  # failures per kind over the whole load
    client_timeout_s: float | None = None  # cluster seconds a request may take before it counts as hung

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class ServingMonitor:
    """Watches one inference workload (Deployment + pods by label) around a pod kill."""

    def __init__(self, cluster: Cluster, workload: InferenceWorkload) -> None:
        self.cluster, self.workload = cluster, workload

    def baseline(self, wait_s: float, on_wait: Callable[[str, float], None] | None = None) -> ServingBaseline:
        """Wait (cluster seconds) until every desired replica is Ready; CheckFailed if it never is."""
        clock = self.cluster.clock
        start = clock.timestamp()
        deadline = start + wait_s
        while True:
            dep = self._deployment()
            desired = int(obj_get(dep, "spec", "replicas", default=1))
            pods = [p for p in self._pods() if _ready(p)]
            listed = endpoint_pods(self._endpoints())
            serving = [p for p in pods if _name(p) in listed or obj_get(p, "status", "podIP") in listed]
            if desired and len(serving) >= desired and \
                    int(obj_get(dep, "status", "readyReplicas", default=0) or 0) >= desired:
                return ServingBaseline(self.workload.deployment, self.workload.namespace, desired, len(pods),
                                       {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods})
            if clock.timestamp() >= deadline:
                outside = "" if len(serving) == len(pods) else \
                    f" and only {len(serving)} in service {self.workload.service}'s endpoints"
                raise CheckFailed(f"precondition not met: deployment {self.workload.namespace}/"
                                  f"{self.workload.deployment} has {len(pods)} of {desired} replicas Ready{outside} "
                                  f"after {format_duration(wait_s)}")
            if on_wait:
                on_wait("ready", clock.timestamp() - start)
            # event-driven: wake when the Deployment reports enough Ready replicas, then when its Service
            # lists them all (or at the deadline)
            if len(pods) < desired:
                wait_for(self.cluster, self.cluster.apps.list_namespaced_deployment,
                         lambda d: int(obj_get(d, "status", "readyReplicas", default=0) or 0) >= max(desired, 1),
                         deadline, self.workload.namespace, field_selector=f"metadata.name={self.workload.deployment}")
            else:
                wait_for(self.cluster, self.cluster.core.list_namespaced_endpoints,
                         lambda e: ready_addresses(e) > len(serving),
                         deadline, self.workload.namespace, field_selector=f"metadata.name={self.workload.service}")

    def recovery(self, baseline: ServingBaseline, record: dict, buckets: Callable[[], list[Bucket]], *,
                 deadline_ts: float, settle_s: float, window_s: float,
                 on_phase: Callable[[str, datetime], None] | None = None,
                 on_wait: Callable[[str, float], None] | None = None) -> ServingRecovery:
        """Watch until the Deployment is Ready, the endpoint served for `settle_s` and `window_s` more
        passed (for the p99 after recovery) — or until `deadline_ts` (cluster time)."""
        clock, ns = self.cluster.clock, self.workload.namespace
        injected = parse_iso(record["injected_at"])
        inj_ts = injected.timestamp()
        killed = dict(zip(record["uids"], record["pods"]))
        restarts = dict(zip(record["pods"], record.get("restart_counts") or []))
        restart_mode = record["mode"] == "kill-container"
        timeline = Timeline(injected=injected)
        effect = FaultEffect(restart_mode, killed, restarts)
        listed: set[str] = set()
        pods: dict[str, dict] = {}
        dep: dict | None = None
        ready_at: float | None = None
        recovered_wall: float | None = None
        next_read = 0.0

        def mark(phase: str, ts: float) -> None:
            nonlocal timeline
            moment = datetime.fromtimestamp(max(ts, inj_ts), timezone.utc)
            if getattr(timeline, phase) is None:
                timeline = timeline.mark(phase, moment)
                if on_phase:
                    on_phase(phase, moment)

        with EventMerger(clock) as merger:
            merger.watch("pods", self.cluster.core.list_namespaced_pod, ns, label_selector=self.workload.label_selector)
            merger.watch("deployment", self.cluster.apps.list_namespaced_deployment, ns,
                         field_selector=f"metadata.name={self.workload.deployment}")
            merger.watch("endpoints", self.cluster.core.list_namespaced_endpoints, ns,
                         field_selector=f"metadata.name={self.workload.service}")
            for event in merger.events(deadline_ts, tick_wall_s=0.05):
                if event is not None:
                    if event.type == "ERROR":
                        raise CheckFailed(f"watching the inference workload failed: {event.obj}")
                    if event.source == "deployment" and event.type != "DELETED":
                        dep = event.obj
                    elif event.source == "endpoints":
                        listed = set() if event.type == "DELETED" else endpoint_pods(event.obj)
                    elif event.source == "pods":
                        effect.observe(event.type, event.obj)
                        uid = event.obj["metadata"]["uid"]
                        if event.type == "DELETED":
                            pods.pop(uid, None)
                        else:
                            pods[uid] = event.obj
                fresh = self._replacements(pods, baseline, killed, restarts, restart_mode)
                for p in fresh:
                    if restart_mode:
                        t = _cond_time(p, "Ready", "False")
                        if t:
                            mark("detected", t)
                    else:
                        mark("detected", _ts(obj_get(p, "metadata", "creationTimestamp")) or clock.timestamp())
                    t = _cond_time(p, "PodScheduled", "True")
                    if t and not restart_mode:
                        mark("rescheduled", t)
                live_ready = [p for p in pods.values() if _ready(p)]
                if (ready_at is None and len(live_ready) >= baseline.desired
                        and len([p for p in fresh if _ready(p)]) >= len(killed)
                        and int(obj_get(dep, "status", "readyReplicas", default=0) or 0) >= baseline.desired):
                    ready_at = max((_cond_time(p, "Ready", "True") or clock.timestamp() for p in fresh),
                                   default=clock.timestamp())
                    mark("ready", ready_at)
                if recovered_wall is None and time.monotonic() >= next_read:
                    next_read = time.monotonic() + 0.1
                    found = first_sustained_success(buckets(), to_wall(clock, inj_ts), clock.wall_seconds(settle_s))
                    if found is not None:
                        recovered_wall = found
                        mark("recovered", to_cluster(clock, found))
                now = clock.timestamp()
                if ready_at is not None and recovered_wall is not None and \
                        now >= max(ready_at, to_cluster(clock, recovered_wall)) + window_s:
                    break
                if event is None and on_wait:
                    on_wait("recovered" if recovered_wall is None else "ready", now - inj_ts)
        fresh = self._replacements(pods, baseline, killed, restarts, restart_mode)
        effect.finish()
        seen = buckets()
        named = served_by(seen, to_wall(clock, inj_ts)) if any(b.served for b in seen) else None
        replacements = replacement_states(fresh, listed, named, _ready)
        until = min(clock.timestamp(), deadline_ts)
        startups = tuple(self._startup(p, until, restart_mode) for p in sorted(fresh, key=_name))
        wall = {name: to_wall(clock, at.timestamp()) for name, at in timeline.reached.items()}
        wall["end"] = time.time()
        return ServingRecovery(
            timeline=timeline, killed=tuple(record["pods"]), survivors=max(0, record["running_before"] - len(killed)),
            desired=baseline.desired, ready_replicas=len([p for p in pods.values() if _ready(p)]),
            replaced=len([r for r in replacements if r.counts]), startups=startups, wall=wall,
            replacements=replacements, unaffected=effect.unaffected)

    def busiest_node(self) -> str:
        """The node running the most Ready replicas (ties: the first by name): draining it disrupts the most."""
        counts: dict[str, int] = {}
        for pod in self._pods():
            if _ready(pod) and obj_get(pod, "spec", "nodeName"):
                counts[pod["spec"]["nodeName"]] = counts.get(pod["spec"]["nodeName"], 0) + 1
        if not counts:
            raise CheckFailed(f"precondition not met: no Ready replica of deployment {self.workload.namespace}/"
                              f"{self.workload.deployment} runs on a node")
        return min(counts, key=lambda n: (-counts[n], n))

    # ------------------------------------------------------------ helpers
    def _deployment(self) -> dict:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.cluster.apps.read_namespaced_deployment(self.workload.deployment, self.workload.namespace,
                                                                _preload_content=False)
        except ApiException as err:
            if err.status == 404:
                raise CheckFailed(f"precondition not met: deployment {self.workload.namespace}/"
                                  f"{self.workload.deployment} not found (workloads.inference.deployment)") from None
            raise
        return json.loads(resp.data)

    def _endpoints(self) -> dict | None:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.cluster.core.read_namespaced_endpoints(self.workload.service, self.workload.namespace,
                                                               _preload_content=False)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return json.loads(resp.data)

    def _pods(self) -> list[dict]:
        resp = self.cluster.core.list_namespaced_pod(self.workload.namespace, label_selector=self.workload.label_selector,
                                                     _preload_content=False)
        return json.loads(resp.data).get("items", [])

    @staticmethod
    def _replacements(pods: dict[str, dict], baseline: ServingBaseline, killed: dict[str, str],
                      restarts: dict[str, int], restart_mode: bool) -> list[dict]:
        if restart_mode:  # the same pods, their container restarted
            return [p for uid, p in pods.items() if uid in killed and _restart_count(p) > restarts.get(_name(p), 0)]
        old = set(baseline.pods.values()) | set(killed)
        return [p for uid, p in pods.items() if uid not in old and not obj_get(p, "metadata", "deletionTimestamp")]

    def _startup(self, pod: dict, until: float, restart_mode: bool) -> PodStartup:
        """Scheduling → image pull → container start → model load of one replacement, from its own stamps."""
        name = _name(pod)
        events = self._events(name)
        created = _ts(obj_get(pod, "metadata", "creationTimestamp"))
        scheduled = _cond_time(pod, "PodScheduled", "True")
        pulled = _event_time(events, "Pulled")
        running = obj_get(pod, "status", "containerStatuses", default=[{}])
        started = _ts(obj_get(running[0] if running else {}, "state", "running", "startedAt"))
        ready = _cond_time(pod, "Ready", "True") if _ready(pod) else None
        if restart_mode:
            points = [("container start", _cond_time(pod, "Ready", "False"), started), ("model load", started, ready)]
        else:
            points = [("scheduling", created, scheduled), ("image pull", scheduled, pulled or None),
                      ("container start", pulled, started), ("model load", started, ready)]
        phases: dict[str, float] = {}
        for phase, begin, end in points:  # an unfinished phase runs until `until`; later ones never began
            if begin is None:
                break
            phases[phase] = max(0.0, (until if end is None else end) - begin)
            if end is None:
                break
        message = next((e.get("message") for e in reversed(events) if e.get("reason") in ("Pulled", "Pulling")), None)
        pending = None if scheduled else next((e.get("message") for e in reversed(events)
                                               if e.get("reason") == "FailedScheduling"), None)
        return PodStartup(name, obj_get(pod, "spec", "nodeName"), phases, ready is not None, message, pending)

    def _events(self, pod: str) -> list[dict]:
        try:
            resp = self.cluster.core.list_namespaced_event(self.workload.namespace, _preload_content=False,
                                                           field_selector=f"involvedObject.name={pod}")
        except Exception as err:  # noqa: BLE001 — attribution is best effort; the verdict still stands
            log.warning("events of pod %s not read: %s", pod, err)
            return []
        items = json.loads(resp.data).get("items", [])
        return sorted(items, key=lambda e: _event_ts(e) or 0.0)


def measure_load(buckets: list[Bucket], recovery: ServingRecovery, clock: Clock, baseline_s: float,
                 client_timeout_s: float | None = None) -> LoadMeasure:
    """Load figures from the buckets and the recovery's wall anchors (windows are wall seconds)."""
    w = recovery.wall
    inj, end = w["injected"], w["end"]
    # The baseline stops a bucket before the one the fault's stamp fell in: that bucket holds answers given
    # after the fault, and the stamp is the middle of the kill request, whose effect may come earlier (at a
    # high twin scale, or on a loaded machine, a bucket is many cluster seconds).
    cut = (math.floor(inj / buckets[0].w) - 1) * buckets[0].w if buckets else inj
    base = window(buckets, cut - clock.wall_seconds(baseline_s), cut)
    back = w.get("recovered")
    settled = max(back, w["ready"]) if back is not None and "ready" in w else None
    after = window(buckets, settled, end) if settled is not None else None
    outage = window(buckets, inj, back if back is not None else end)
    if recovery.survivors:
        since, label = inj, f"from the fault on ({recovery.survivors} replica(s) survived)"
    elif back is not None:
        since, label = back, "since the endpoint served again (no replica survived)"
    else:
        since, label = None, "the endpoint never served again"
    budget = window(buckets, since, end) if since is not None else None
    throughout = window(buckets, inj, end)
    return LoadMeasure(
        requests=sum(b.n for b in buckets), failures=sum(b.fail for b in buckets),
        baseline_rps=_num(base.rps),
        baseline_p99_ms=_num(base.p99_ms), after_p99_ms=_num(after.p99_ms) if after else None,
        outage_error_rate=_num(outage.failure_rate), budget_error_rate=_num(budget.failure_rate) if budget else None,
        budget_window=label, serving_p99_ms=_num(budget.p99_ms) if budget else None,
        budget_errors=_top_errors(buckets, since, end) if since is not None else {},
        failure_kinds=kind_counts(buckets), client_timeout_s=client_timeout_s,
        fault_error_rate=_num(throughout.failure_rate), fault_errors=_top_errors(buckets, inj, end))


def load_overlay(buckets: list[Bucket], clock: Clock, injected_wall: float, width_s: float = 0.25) -> list[list[float]]:
    """(cluster seconds since the fault, requests per cluster second) points for the timeline chart."""
    return [[round(clock.cluster_seconds(b.t - injected_wall), 2), round(b.n / clock.cluster_seconds(width_s), 3)]
            for b in rebin(buckets, width_s)]


def wait_for_load(buckets: Callable[[], list[Bucket]], clock: Clock, baseline_s: float, timeout_s: float = 120.0) -> None:
    """Until the load's buckets span `baseline_s` cluster seconds (the baseline before a fault)."""
    deadline = time.monotonic() + timeout_s
    span = clock.wall_seconds(baseline_s)
    while time.monotonic() < deadline:
        got = buckets()
        if got and got[-1].end - got[0].t >= span:
            return
        time.sleep(0.05)
    raise CheckFailed(f"the load did not run for a {format_duration(baseline_s)} baseline within {timeout_s:.0f}s")


def with_slowest_phase(verdict: Verdict, recovery: ServingRecovery) -> Verdict:
    """A failed recovery verdict names the slow phase: "…; slowest phase: image pull 5m2s (pod …)"."""
    slow = recovery.slowest()
    if verdict.passed or slow is None:
        return verdict
    phase, seconds, pod = slow
    startup = next((s for s in recovery.startups if s.pod == pod), None)
    state = "" if startup is None or startup.ready else ", still not Ready"
    why = f": {startup.pending_message}" if startup is not None and startup.pending_message else ""
    return replace(verdict, reason=f"{verdict.reason}; slowest phase: {phase} {format_duration(seconds)} "
                                   f"(pod {pod}{state}){why}")


def to_cluster(clock: Clock, wall_ts: float) -> float:
    """An epoch wall-clock stamp (the load's buckets) in cluster time."""
    return clock.timestamp() - (time.time() - wall_ts) * clock.scale


def to_wall(clock: Clock, cluster_ts: float) -> float:
    return time.time() - (clock.timestamp() - cluster_ts) / clock.scale


def _name(pod: dict) -> str:
    return pod["metadata"]["name"]


def _ready(pod: dict) -> bool:
    return not obj_get(pod, "metadata", "deletionTimestamp") and _cond_time(pod, "Ready", "True") is not None


def _restart_count(pod: dict) -> int:
    statuses = obj_get(pod, "status", "containerStatuses", default=None) or [{}]
    return int(statuses[0].get("restartCount") or 0)


def _cond_time(pod: dict, kind: str, status: str) -> float | None:
    for c in obj_get(pod, "status", "conditions", default=None) or []:
        if c.get("type") == kind and c.get("status") == status:
            return _ts(c.get("lastTransitionTime")) or 0.0
    return None


def _event_time(events: list[dict], reason: str) -> float | None:
    return next((_event_ts(e) for e in events if e.get("reason") == reason), None)


def _event_ts(event: dict) -> float | None:
    return _ts(event.get("eventTime") or event.get("firstTimestamp") or obj_get(event, "metadata", "creationTimestamp"))


def _ts(text: str | None) -> float | None:
    return parse_iso(text).timestamp() if text else None


def _top_errors(buckets: list[Bucket], start: float, end: float, top: int = 3) -> dict[str, int]:
    counts: dict[str, int] = {}
    for b in buckets:
        if start <= b.t < end:
            for message, n in b.errors.items():
                counts[message] = counts.get(message, 0) + n
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:top])


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)
