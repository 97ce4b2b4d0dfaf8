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

Per replacement pod it also reads the startup phase by phase (`drills.measure.serving_startup`: pod
events and stamps, then the replica's own vLLM log), so a slow recovery names its slow phase. It only
measures; `drills.verdicts.timeline` judges.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Callable

from drills.core.clock import Clock, parse_iso
from drills.profile.model import InferenceWorkload
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, obj_get, wait_for
from drills.load.bucket_stats import first_failure, first_sustained_run, served_by
from drills.load.buckets import Bucket
from drills.measure.serving_startup import PodStartup, StartupReader, cond_time, ready_now, stamp
from drills.measure.vllm_startup import PHASE_LABELS
from drills.measure.replicas import FaultEffect, Replacement, endpoint_pods, ready_addresses, replacement_states
from drills.verdicts.timeline import Timeline, Verdict, format_duration

__all__ = ["ServingMonitor", "ServingBaseline", "ServingRecovery", "to_cluster", "to_wall", "with_slowest_phase"]

log = logging.getLogger(__name__)

VLLM_DETAILS = ("model_load_s", "weights_load_s", "compile_s", "graph_capture_s", "engine_init_s")


@dataclass(frozen=True)
class ServingBaseline:
    """The Deployment before the fault: desired and Ready replicas, and its pods (name → uid)."""

    deployment: str
    namespace: str
    desired: int
    ready: int
    pods: dict[str, str]
    in_service: tuple[str, ...] = ()  # the Ready pods the Service's endpoints listed (the load reaches these)


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
    load_gap_s: float = 0.0  # cluster seconds at the end of the wait the load's results did not reach (it lagged)

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
        pod = next((s for s in self.startups if slow and s.pod == slow[2]), None)
        return {**self.vllm_details(), "killed_pods": list(self.killed), "survivors": self.survivors, "desired_replicas": self.desired,
                "ready_replicas": self.ready_replicas, "replaced": self.replaced,
                "replacements": {r.pod: r.to_dict() for r in self.replacements},
                "fault_effect": {"had_effect": not self.unaffected, "unaffected": list(self.unaffected)},
                "startup": {s.pod: {k: round(v, 1) for k, v in s.attributed().items()} for s in self.startups},
                "vllm_startup": {s.pod: s.vllm for s in self.startups if s.vllm},
                "slowest_phase": None if slow is None else {
                    "phase": slow[0], "seconds": round(slow[1], 1), "pod": slow[2],
                    "source": "vllm log" if pod is not None and pod.from_log else "pod events"}}

    def vllm_details(self) -> dict:
        """The vLLM phases of the replacement that took longest to start (model_load_s, graph_capture_s, …,
        startup_s: its container start → Ready, or until the watch ended); empty when no log was read."""
        logged = [s for s in self.startups if s.vllm]
        if not logged:
            return {}
        top = max(logged, key=lambda s: s.phases.get("server startup", 0.0))
        out = {k: top.vllm[k] for k in VLLM_DETAILS if k in top.vllm}
        out["startup_s"] = round(top.phases.get("server startup", 0.0), 3)
        out["vllm_ready"] = bool(top.vllm.get("ready"))
        if "in_progress" in top.vllm:
            out["vllm_in_progress"] = PHASE_LABELS.get(top.vllm["in_progress"]["phase"], top.vllm["in_progress"]["phase"])
        return out


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
                                       {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods},
                                       tuple(sorted(_name(p) for p in serving)))
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

    def readiness(self) -> tuple[int, int, int]:
        """Now, read once: (the Deployment's desired replicas, pods Ready, pods Ready and in the Service's
        endpoints) — the steady-state reading of the serving side (drills/measure/steady.py)."""
        dep = self._deployment()
        desired = int(obj_get(dep, "spec", "replicas", default=1))
        pods = [p for p in self._pods() if _ready(p) and not obj_get(p, "metadata", "deletionTimestamp")]
        listed = endpoint_pods(self._endpoints())
        serving = [p for p in pods if _name(p) in listed or obj_get(p, "status", "podIP") in listed]
        return desired, len(pods), len(serving)

    def recovery(self, baseline: ServingBaseline, record: dict, buckets: Callable[[], list[Bucket]], *,
                 deadline_ts: float, settle_s: float, window_s: float,
                 on_phase: Callable[[str, datetime], None] | None = None,
                 on_wait: Callable[[str, float], None] | None = None,
                 covered: Callable[[float], float | None] | None = None) -> ServingRecovery:
        """Watch until the Deployment is Ready, the endpoint served for `settle_s` and `window_s` more
        passed (for the p99 after recovery) — or until `deadline_ts` (cluster time). Not yet recovered then,
        it reads the load once `covered(wall moment)` (the load's watermark, waited for) says its results
        reach the end of the wait: a deadline ends the waiting, not the reading."""
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
        answered_wall: float | None = None  # when the first answer of the recovered run arrived (the load's stamp)
        next_read = 0.0
        outage_expected = not restart_mode and record["running_before"] - len(killed) <= 0
        # every replica killed: the outage can only show once the last of them was (a replica not yet killed serves)
        done_ts = max(inj_ts, parse_iso(record.get("completed_at") or record["injected_at"]).timestamp())

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
            def take(event) -> None:
                nonlocal dep, listed, ready_at, recovered_wall, answered_wall, next_read
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
                        t = cond_time(p, "Ready", "False")
                        if t:
                            mark("detected", t)
                    else:
                        mark("detected", stamp(obj_get(p, "metadata", "creationTimestamp")) or clock.timestamp())
                    t = cond_time(p, "PodScheduled", "True")
                    if t and not restart_mode:
                        mark("rescheduled", t)
                live_ready = [p for p in pods.values() if _ready(p)]
                if (ready_at is None and len(live_ready) >= baseline.desired
                        and len([p for p in fresh if _ready(p)]) >= len(killed)
                        and int(obj_get(dep, "status", "readyReplicas", default=0) or 0) >= baseline.desired):
                    ready_at = max((cond_time(p, "Ready", "True") or clock.timestamp() for p in fresh),
                                   default=clock.timestamp())
                    mark("ready", ready_at)
                if recovered_wall is None and (event is None or time.monotonic() >= next_read):
                    next_read = time.monotonic() + 0.1
                    seen, inj_wall = buckets(), to_wall(clock, inj_ts)
                    if outage_expected:  # every replica killed: serving again means after the outage showed,
                        # not the answers the gateway still gave while the kill propagated (at 600× under load,
                        # tens of cluster seconds), nor a replica's answers before its own kill; no failure at all
                        # before Ready: the first run counts
                        # — and after the last answer of a killed replica (the load's own stamps, when the endpoint
                        # names who answered): one still routed, its process not yet stopped, answers between the
                        # outage's first failures (at 600x on a busy machine, a "sustained" run of cluster seconds)
                        done_wall = to_wall(clock, done_ts)
                        outage = first_failure(seen, done_wall)
                        # no failure since the injection: the endpoint never stopped serving (evictions a budget
                        # paced, each replaced before the next): recovered at once, not at the last kill
                        failed = first_failure(seen, inj_wall) is not None
                        after = outage if outage is not None else (
                            (done_wall if failed else inj_wall) if ready_at is not None else None)
                        old = [b.end for b in seen if b.end > done_wall and set(b.served) & set(killed.values())]
                        after = max(after, *old) if after is not None and old and failed else after
                    else:
                        after = inj_wall
                    run = None if after is None else first_sustained_run(seen, after, clock.wall_seconds(settle_s))
                    if run is not None:
                        recovered_wall, answered_wall = run
                        mark("recovered", to_cluster(clock, recovered_wall))

            for event in merger.events(deadline_ts, tick_wall_s=0.05):  # ends with a catch-up at the deadline
                take(event)
                now = clock.timestamp()
                if ready_at is not None and recovered_wall is not None and \
                        now >= max(ready_at, to_cluster(clock, recovered_wall)) + window_s:
                    break
                if event is None and on_wait:
                    on_wait("recovered" if recovered_wall is None else "ready", now - inj_ts)
            for event in merger.catch_up():  # the window passed: judge what the cluster has, not the streams
                take(event)
            gap = 0.0
            if recovered_wall is None and covered is not None:
                end_wall = to_wall(clock, min(clock.timestamp(), deadline_ts))
                upto = covered(end_wall)
                gap = clock.cluster_seconds(end_wall - (upto if upto is not None else to_wall(clock, inj_ts)))
            take(None)  # a last look at the load once every event is in
        fresh = self._replacements(pods, baseline, killed, restarts, restart_mode)
        effect.finish()
        seen = buckets()
        named = served_by(seen, to_wall(clock, inj_ts)) if any(b.served for b in seen) else None
        replacements = replacement_states(fresh, listed, named, _ready)
        until = min(clock.timestamp(), deadline_ts)
        reader = StartupReader(self.cluster, ns)
        startups = tuple(reader.startup(p, until, restart_mode) for p in sorted(fresh, key=_name))
        wall = {name: to_wall(clock, at.timestamp()) for name, at in timeline.reached.items()}
        if recovered_wall is not None:  # the load's own stamps, not a round trip through cluster time: while the
            # twin's clock holds, many wall moments read one cluster instant (the outage's last failures too)
            wall["recovered"], wall["answered"] = recovered_wall, answered_wall
        wall["end"] = time.time()
        return ServingRecovery(
            timeline=timeline, killed=tuple(record["pods"]), survivors=max(0, record["running_before"] - len(killed)),
            desired=baseline.desired, ready_replicas=len([p for p in pods.values() if _ready(p)]),
            replaced=len([r for r in replacements if r.counts]), startups=startups, wall=wall,
            replacements=replacements, unaffected=effect.unaffected,
            load_gap_s=0.0 if recovered_wall is not None else max(0.0, round(gap, 3)))

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

def with_slowest_phase(verdict: Verdict, recovery: ServingRecovery) -> Verdict:
    """A failed recovery verdict names the slow phase: "…; slowest phase: image pull 5m2s (pod …)"."""
    slow = recovery.slowest()
    if verdict.passed or slow is None:
        return verdict
    phase, seconds, pod = slow
    startup = next((s for s in recovery.startups if s.pod == pod), None)
    state = "" if startup is None or startup.ready else ", still not Ready"
    if startup is not None and startup.from_log:
        running = startup.vllm.get("in_progress", {}).get("phase")
        state += ", still in it" if running and PHASE_LABELS.get(running) == phase else ""
        state += f", from its vLLM log; server startup {format_duration(startup.phases.get('server startup', 0.0))}"
    why = f": {startup.pending_message}" if startup is not None and startup.pending_message else ""
    return replace(verdict, reason=f"{verdict.reason}; slowest phase: {phase} {format_duration(seconds)} "
                                   f"(pod {pod}{state}){why}")


def to_cluster(clock: Clock, wall_ts: float) -> float:
    """An epoch wall-clock stamp (the load's buckets) in cluster time (what the cluster's clock read then)."""
    return clock.at_wall(wall_ts)


def to_wall(clock: Clock, cluster_ts: float) -> float:
    """A cluster timestamp as the epoch wall time the cluster's clock read it (for the load's buckets)."""
    return clock.wall_at(cluster_ts)


def _name(pod: dict) -> str:
    return pod["metadata"]["name"]


_ready = ready_now


def _restart_count(pod: dict) -> int:
    statuses = obj_get(pod, "status", "containerStatuses", default=None) or [{}]
    return int(statuses[0].get("restartCount") or 0)
