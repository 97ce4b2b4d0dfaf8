"""The training workload: a controller that makes every Volcano training job's pods behave like a
multi-node NCCL job — log lines, progress, checkpoints, restarts, fabric and GPU faults.

It watches pods labelled `volcano.sh/job-name`, the Volcano Jobs (for the expected worker count) and
the nodes (leaf label, GPU health annotation `twin.gpu-drills.io/gpu-health: unhealthy`), and hears
leaf-uplink changes from the fabric through the hub. The simulation itself is `training_job.JobSim`;
this module only reads the API and writes log lines (into the pods' logs in the twin's own process, as a container
runtime writes a log file, stamped in twin time) and container exits (the kubelet's `twin.gpu-drills.io/exit`
annotation, over the API).

Log cadence: a step line every `progress.log_every(step_time)` steps (10 for steps ≥ 1 s), plus the
first step after a resume and the step that catches up with the step at the last fault, each at once.
Jobs up to `ALL_RANKS_LOG_MAX` workers print progress lines on every worker; larger jobs on rank 0
(the first pod by name) only. NCCL lines go to the workers they concern.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Hashable

from drills.core.clock import parse_iso, to_iso
from drills.twin.api import status as st
from drills.twin.api.resources import by_kind
from drills.twin.api.twin_routes import write_stdout
from drills.twin.controllers.base import Controller
from drills.twin.controllers.client import ApiError
from drills.twin.workloads import loglines as L
from drills.twin.workloads.hub import hub_for
from drills.twin.workloads.training_job import JobSim, Output

__all__ = ["TrainingController", "advance_to_stop", "JOB_LABEL", "GPU_HEALTH_ANNOTATION", "EXIT_ANNOTATION",
           "LEAF_LABEL"]

log = logging.getLogger(__name__)

JOB_LABEL = "volcano.sh/job-name"
LEAF_LABEL = "network.gpu-drills.io/leaf"
GPU_HEALTH_ANNOTATION = "twin.gpu-drills.io/gpu-health"  # written by the node fault endpoint (C1's kubelet contract)
STAMP_RESOLUTION_S = 1.0  # deletionTimestamp and finishedAt carry whole seconds
EXIT_ANNOTATION = "twin.gpu-drills.io/exit"  # the kubelet terminates the container with this exit code
PODS = by_kind("v1", "Pod")
NODES = by_kind("v1", "Node")
VCJOBS = by_kind("batch.volcano.sh/v1alpha1", "Job")


class TrainingController(Controller):
    name = "training"

    def setup(self) -> None:
        ctx = self.ctx
        self.hub = hub_for(ctx.twin)  # type: ignore[attr-defined]
        self.pods = ctx.informers.informer(PODS)
        self.nodes = ctx.informers.informer(NODES)
        self.vcjobs = ctx.informers.informer(VCJOBS)
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        self.vcjobs.add_handler(self._on_vcjob)
        self.hub.on_leaf_change(self._on_leaf)
        self.sims: dict[tuple[str, str], JobSim] = {}
        self.hub.training_sims = self.sims  # the exporters read whether a job steps (GPU utilisation)
        self.stopped_at: dict[str, float] = {}  # pod uid → when its process stopped (deleted pods)
        self.job_pods: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.node_jobs: dict[str, set[tuple[str, str]]] = defaultdict(set)
        profile = ctx.profile
        self.specs = {(j.namespace, j.name): j for j in profile.workloads.training.values()} if profile else {}

    # -- events ------------------------------------------------------------------------------------
    def _on_pod(self, etype: str, pod: dict, old: dict | None) -> None:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        key = (meta.get("namespace", ""), job)
        if etype == "DELETED":
            self.job_pods[key].discard(meta["name"])
            self.stopped_at[meta.get("uid", "")] = _stopped_at(pod, self.ctx.clock.timestamp())
        else:
            self.job_pods[key].add(meta["name"])
            node = pod.get("spec", {}).get("nodeName")
            if node:
                self.node_jobs[node].add(key)
        self.enqueue(key)

    def _on_node(self, etype: str, node: dict, old: dict | None) -> None:
        if _gpu_broken(node) and (old is None or not _gpu_broken(old)):
            for key in self.node_jobs.get(node["metadata"]["name"], ()):
                self.enqueue(key)

    def _on_vcjob(self, etype: str, job: dict, old: dict | None) -> None:
        self.enqueue((job["metadata"].get("namespace", ""), job["metadata"]["name"]))

    def _on_leaf(self, leaf: str, view) -> None:
        for key, sim in self.sims.items():
            if sim.run is not None and leaf in sim.run.leaves.values():
                self.enqueue(key)

    # -- reconcile -----------------------------------------------------------------------------------
    async def reconcile(self, key: Hashable) -> None:
        ns, name = key  # type: ignore[misc]
        sim = self.sims.get(key) or self._new_sim(ns, name)
        if sim is None:
            return
        now = self.ctx.clock.timestamp()
        out = Output()
        pods = [p for p in (self.pods.get(ns, n) for n in sorted(self.job_pods.get(key, ()))) if p is not None]
        broken = self._broken_workers(sim, pods) if sim.run is not None else None
        until = now
        if sim.run is not None:
            until = advance_to_stop(sim, now, broken[2] if broken else None, out)  # may end the run (NCCL timeout)
        if sim.run is not None:
            if broken:
                sim.end_run(until, broken[0], out, lost=broken[1])
            else:
                self._gpu_faults(sim, now, out)
        sim.orphan_timeouts(now, {p["metadata"]["name"]: p["metadata"].get("uid", "") for p in pods if _live(p)}, out)
        if sim.run is None:
            live = [p for p in pods if _live(p) and p["metadata"].get("uid") not in sim.dead_uids]
            expected = self._expected(ns, name, sim)
            if expected and len(live) >= expected:
                leaf_of = {p["spec"].get("nodeName", ""): self._leaf(p["spec"].get("nodeName", "")) for p in live}
                sim.start_run(now, live[:expected], leaf_of, out)
                sim.advance(now, out)
        await self._flush(ns, out, pods, sim.tags)
        wake = sim.next_wake(now)
        if wake is not None:
            self.enqueue_after(key, max(0.0, wake - now))

    def _new_sim(self, ns: str, name: str) -> JobSim | None:
        job = self.vcjobs.get(ns, name)
        spec = self.specs.get((ns, name))
        if spec is None:
            if job is None or self.ctx.profile is None:
                return None
            from drills.twin.profile_model import TrainingJob

            spec = TrainingJob(name=name, namespace=ns, replicas=max(1, _replicas(job)), initial_step=0,
                               initial_checkpoint=None)
        profile = self.ctx.profile
        save_s = profile.checkpoint_save_seconds(spec)
        sim = JobSim(ns, name, spec, profile.fabric, save_s, self.hub.truth, self.hub.store, self.ctx.rng,
                     self.hub.leaves)
        self.sims[(ns, name)] = sim
        return sim

    def _expected(self, ns: str, name: str, sim: JobSim) -> int:
        job = self.vcjobs.get(ns, name)
        if job is not None:
            phase = (job.get("status") or {}).get("state", {}).get("phase")
            if phase in ("Failed", "Aborted", "Aborting", "Completed", "Terminated"):
                return 0
            return _replicas(job) or sim.spec.replicas
        return sim.spec.replicas

    def _broken_workers(self, sim: JobSim, pods: list[dict]) -> tuple[str, set[str], float] | None:
        """Why the current run ended (a worker gone, replaced, deleting or stopped), which workers, and when the
        first of them stopped (twin time), or None."""
        by_name = {p["metadata"]["name"]: p for p in pods}
        now = self.ctx.clock.timestamp()
        causes: dict[str, str] = {}
        stops: list[float] = []
        for name, uid in sim.run.pods.items():
            pod = by_name.get(name)
            if pod is None or pod["metadata"].get("uid", "") != uid:
                causes[name] = "pod_deleted"
                stops.append(self.stopped_at.get(uid, now))
            elif pod["metadata"].get("deletionTimestamp"):
                causes[name] = "pod_terminating"
                stops.append(_stopped_at(pod, now))
            elif not _live(pod):
                causes[name] = f"pod_{(pod.get('status') or {}).get('phase', 'stopped').lower()}"
                stops.append(_stopped_at(pod, now))
        return (next(iter(causes.values())), set(causes), min(stops)) if causes else None

    def _gpu_faults(self, sim: JobSim, now: float, out: Output) -> None:
        run = sim.run
        bad = [pod for pod, node in run.nodes.items() if _gpu_broken(self.nodes.get("", node))]
        if not bad:
            return
        texts: dict[str, list[str]] = {}
        for pod in bad:  # the others hear of it from end_run (peer lost, then their watchdog)
            node = self.nodes.get("", run.nodes[pod]) or {}
            xid = int((node.get("metadata", {}).get("annotations") or {}).get("twin.gpu-drills.io/gpu-xid") or 48)
            texts[pod] = L.gpu_xid(run.workers[pod], xid)
        sim.crash_workers(now, bad, 1, "Error", texts, out, "gpu_xid")

    def _leaf(self, node: str) -> str | None:
        obj = self.nodes.get("", node)
        return ((obj or {}).get("metadata", {}).get("labels") or {}).get(LEAF_LABEL)

    # -- writes ----------------------------------------------------------------------------------------
    async def _flush(self, ns: str, out: Output, pods: list[dict], tags: dict[str, str]) -> None:
        containers = {p["metadata"]["name"]: p["spec"]["containers"][0]["name"] for p in pods}
        groups: dict[str, list[tuple[float, list[str]]]] = defaultdict(list)
        for t, pod, text in sorted(out.lines, key=lambda x: x[0]):
            text = tags.get(pod, "") + text  # torchrun prefixes every line of a rank
            batches = groups[pod]
            if batches and abs(batches[-1][0] - t) < 1e-6:
                batches[-1][1].append(text)
            else:
                batches.append((t, [text]))
        for pod, batches in groups.items():
            self._append(ns, pod, containers.get(pod), batches)
        for pod, code, reason, cause in out.crashes:
            await self._exit(ns, pod, containers.get(pod), code, reason, cause)

    def _append(self, ns: str, pod: str, container: str | None, batches: list[tuple[float, list[str]]]) -> None:
        """The workers' stdout into their containers' logs, each line stamped when it was printed. In-process, as a
        container runtime writes a log file (no API request: at 600× that was 3/4 of the twin's own traffic)."""
        store = self.ctx.twin.store  # type: ignore[attr-defined]
        for t, lines in batches:
            try:
                write_stdout(store, ns, pod, container, lines, t)
            except st.ApiError as err:  # the pod is gone (its log went with it), or it has no such container
                log.debug("log append to %s/%s: %s", ns, pod, err)
                return

    async def _exit(self, ns: str, pod: str, container: str | None, code: int, reason: str, cause: str) -> None:
        """Make the worker's container exit like the kubelet would report it (the kubelet does the rest)."""
        body = {"code": code, "reason": reason}
        if reason != "OOMKilled":  # the kernel's SIGKILL leaves no message; a process that exits says why
            body["message"] = f"training worker exited: {cause}"
        if container:
            body["container"] = container
        try:
            await self.ctx.client.patch(PODS, ns, pod, {"metadata": {"annotations": {EXIT_ANNOTATION: json.dumps(body)}}})
        except ApiError as err:
            log.warning("training: could not stop %s/%s: %s", ns, pod, err)
        log.info("training: %s/%s exits with code %d (%s) at %s", ns, pod, code, cause,
                 to_iso(self.ctx.clock.now()))


def advance_to_stop(sim: JobSim, now: float, stopped: float | None, out: Output) -> float:
    """Advance the run to `now`, or only to `stopped` when a worker was told to stop then (never back before what
    is already written): a process does not outlive its container, however late a starved twin learns of the stop
    — a save it made after it would be a checkpoint no log shows. Returns the time advanced to."""
    until = now if stopped is None else max(sim.progress.t if sim.progress else 0.0, min(now, stopped))
    sim.advance(until, out)
    return until


def _stopped_at(pod: dict, default: float) -> float:
    """When the pod's process was told to stop (twin time): the deletion request (deletionTimestamp is that
    moment plus the grace period: the kubelet sends SIGTERM at the request), else its container's finishedAt.
    Both are stamped to the second (RFC 3339, as the real server does): the end of that second, the first moment
    the stop has surely happened — never before the request itself."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        return parse_iso(meta["deletionTimestamp"]).timestamp() - grace + STAMP_RESOLUTION_S
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        finished = ((status.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if finished:
            return parse_iso(finished).timestamp() + STAMP_RESOLUTION_S
    return default


def _live(pod: dict) -> bool:
    status = pod.get("status") or {}
    return (not pod["metadata"].get("deletionTimestamp") and status.get("phase") == "Running"
            and bool(pod.get("spec", {}).get("nodeName")))


def _gpu_broken(node: dict | None) -> bool:
    return bool(node) and (node["metadata"].get("annotations") or {}).get(GPU_HEALTH_ANNOTATION) == "unhealthy"


def _replicas(job: dict) -> int:
    return sum(int(t.get("replicas") or 0) for t in (job.get("spec") or {}).get("tasks") or [])
