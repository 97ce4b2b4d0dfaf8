"""One training job's simulation: runs (a set of worker pods all Running), progress, checkpoints,
NCCL transport and network phase (what the fabric does to a run: `training_fabric`). Decides what to
print and which workers crash; does no I/O — the controller (training.py) feeds it pods, leaf views
and times, and writes what it returns.

A run starts when every expected worker is Running; it ends when any of them stops (deleted, failed,
evicted). The first run continues from the profile's initial progress; every later run resumes from
the latest completed checkpoint in the store (printed in the profile's log format, `trainlogs`), re-initialises NCCL
and takes its first step only after the checkpoint load and NCCL init.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass
from typing import Any

from drills.twin.workloads import loglines as L
from drills.twin.workloads.trainlogs import for_format
from drills.twin.workloads.progress import LeafView, NetPhase, Progress, StepFilter, log_every
from drills.twin.workloads.training_fabric import FabricEffects
from drills.twin.workloads.training_lines import Output, StepRecords

__all__ = ["JobSim", "Run", "Output", "ALL_RANKS_LOG_MAX"]

log = logging.getLogger(__name__)

CPU_FACTOR = 0.05  # a training loop that fell back to the CPU: a few % of its GPU throughput (defect gpus-unseen)
ALL_RANKS_LOG_MAX = 8  # jobs up to this many workers print progress lines on every rank; larger: rank 0 only


@dataclass
class Run:
    rid: int
    pods: dict[str, str]  # pod name → uid
    workers: dict[str, L.Worker]  # pod name → worker (rank order = name order)
    nodes: dict[str, str]  # pod name → node
    leaves: dict[str, str]  # pod name → leaf
    started: float
    compute_from: float
    transport: str  # IB | Socket
    phase: NetPhase
    seq: int = 0  # NCCL work sequence, for the watchdog line
    resumed: bool = False  # a run after a restart (the defects of `spec.after_resume` apply to it)
    crash_at: float | None = None  # defect crash-after-resume: when this run's workers crash
    after_from: float | None = None  # when it trains again after a disruption (resumed, or throughput back)


class JobSim(FabricEffects, StepRecords):
    """State of one job across runs; `spec` is the profile's TrainingJob, `fabric` its Fabric section."""

    def __init__(self, ns: str, name: str, spec: Any, fabric: Any, save_s: float, truth: Any, store: Any,
                 rng: random.Random, leaf_views: dict[str, LeafView]):
        self.ns, self.name, self.spec, self.fabric = ns, name, spec, fabric
        self.leaf_views = leaf_views  # the hub's live dict: leaf → LeafView
        self.subject = f"{ns}/{name}"
        self.save_s, self.truth, self.store, self.rng = save_s, truth, store, rng
        self.base_path = spec.checkpoint.path.format(job=name)
        self.fmt = for_format(spec.log_format)  # what the workers print (the profile's framework)
        self.tags: dict[str, str] = {}  # pod → torchrun's `[rankN]:` prefix, kept for orphans of ended runs
        self.interval = spec.checkpoint.interval_steps
        self.filter = StepFilter(log_every(spec.step_time), self.interval)
        self.progress: Progress | None = None
        self.run: Run | None = None
        self.runs = 0
        self.fault_step: int | None = None  # step at the last fault (caught-up target)
        self.fault_at: float | None = None
        self.fabric_fault_at: float | None = None
        self.announced: tuple | None = None  # the last network phase recorded in the truth
        self.dead_uids: set[str] = set()
        self.orphans: dict[str, tuple[str, L.Worker, float]] = {}  # survivors of an ended run: uid, worker, watchdog
        self.awaiting_resume = False
        self.awaiting_restore = False  # a fabric event hurt throughput; not yet back to ≥ 90 %
        self.late_fallback_at: float | None = None  # defect late-socket-fallback: when NCCL drops RDMA
        self.first_after_resume: int | None = None
        self._printed_step: int | None = None  # the last step a line was printed for (skipped steps count from it)
        self.saves: list[tuple[int, float, float]] = []  # (step, started, done_at) in flight
        self.last_save_step = spec.initial_checkpoint or 0
        self.rdma_kind = {"roce": "RoCE", "ib": "IB"}.get(spec.nccl.transport, "RoCE")
        self.after_done: set[str] = set()  # the once-per-job after-disruption defects already played (oom, error_line)
        self.layout = spec.log_format  # the framework's checkpoint layout on the store (store_layout)
        self.run_saved: list[int] = []  # saves completed by the current run (the initial ones for the first)
        self.blocked_until: float | None = None  # a save that blocks the training loop ends then (blocks_training)

    # -- derived -----------------------------------------------------------------------------------
    @property
    def configured_transport(self) -> str:
        return "Socket" if self.spec.nccl.transport == "socket" else "IB"

    def transport_factor(self, transport: str) -> float:
        n = self.spec.nccl
        return 1.0 if transport == "IB" else min(1.0, n.socket_bus_bandwidth_gbs / n.bus_bandwidth_gbs)

    @property
    def baseline(self) -> float:
        return self.spec.samples_per_second * self.transport_factor(self.configured_transport)

    def factor(self, t: float) -> float:
        run = self.run
        if run is None or t < run.compute_from or (self.blocked_until is not None and t < self.blocked_until):
            return 0.0
        after = self.spec.after_resume.throughput_factor if run.resumed else (
            self.spec.first_run.throughput_factor if run.rid == 1 else 1.0)
        on_cpu = CPU_FACTOR if self.spec.cuda != "ok" else 1.0  # gpus-unseen: the loop runs on the CPU
        return self.phase_at(t).factor * self.transport_factor(run.transport) * after * on_cpu

    def progress_pods(self) -> list[str]:
        names = sorted(self.run.pods) if self.run else []
        return names if len(names) <= ALL_RANKS_LOG_MAX else names[:1]

    # -- runs ----------------------------------------------------------------------------------------
    def start_run(self, now: float, pods: list[dict], leaf_of: dict[str, str | None], out: Output) -> None:
        """Every worker is Running: start a run (first start, or resume from the latest checkpoint)."""
        pods = sorted(pods, key=lambda p: p["metadata"]["name"])
        names = [p["metadata"]["name"] for p in pods]
        workers = {p["metadata"]["name"]: L.Worker(p["spec"].get("nodeName", "node"), i,
                                                   (p.get("status") or {}).get("podIP", ""), p["metadata"].get("uid", ""),
                                                   self.spec.gpus_per_worker, len(pods))
                   for i, p in enumerate(pods)}
        self.tags.update({pod: w.tag for pod, w in workers.items()})
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
        leaves = {n: leaf_of.get(nodes[n]) or "" for n in names}
        nccl, first = self.spec.nccl, self.runs == 0
        self.runs += 1
        init_s = nccl.init_duration
        load_s = 0.0 if first else self.spec.checkpoint.load_duration
        compute_from = now + (0.0 if first else load_s + init_s)
        after = self.spec.after_resume
        transport = "Socket" if not first and after.transport == "socket" else self.configured_transport
        self.run = Run(self.runs, {p["metadata"]["name"]: p["metadata"].get("uid", "") for p in pods}, workers, nodes,
                       leaves, now, compute_from, transport, NetPhase("healthy", 1.0, now), resumed=not first,
                       crash_at=self._crash_at(first, compute_from), after_from=None if first else compute_from)
        # the first advance announces whatever the fabric is doing to this new communicator
        nranks = len(pods) * max(1, self.spec.gpus_per_worker)
        if first:
            self._first_start(now, nranks, out)
        elif not self._resume(now, load_s, nranks, out):
            return
        self.truth.record("training", self.subject, "nccl_transport", at=compute_from, transport=self.run.transport)
        self._update_truth()

    def _first_start(self, now: float, nranks: int, out: Output) -> None:
        """The twin joins a job already under way: its log tail (NCCL init, the initial checkpoint) is backdated."""
        spec, run = self.spec, self.run
        step = spec.initial_step
        self.progress = Progress(float(step), now)
        ckpt = spec.initial_checkpoint
        behind = (step - ckpt) * spec.step_time if ckpt is not None else 0.0
        init_at = now - behind - (self.save_s if ckpt is not None else 0.0) - spec.nccl.init_duration
        for pod, w in run.workers.items():
            out.add(init_at, [pod], self._init_lines(w, run.transport, nranks))
        previous = ckpt - self.interval if ckpt is not None else 0
        if previous > 0:  # a job under way has saved before: its log shows the interval between saves
            at = now - behind - self.interval * spec.step_time
            path = self.fmt.checkpoint_path(self.base_path, previous)
            if self.store.latest(self.ns, self.name, self.layout) is None:
                self.store.save(self.ns, self.name, previous, at, self.save_s, spec.checkpoint.size_gib, path,
                                layout=self.layout)
            out.add(at - self.save_s, self.progress_pods(), self.fmt.save_started(previous, path, at - self.save_s))
            out.add(at, self.progress_pods(), self.fmt.save_done(previous, path, at - self.save_s, at))
        if ckpt is not None:
            saved_at = now - behind
            path = self.fmt.checkpoint_path(self.base_path, ckpt)
            if self.store.latest(self.ns, self.name, self.layout) in (None, previous):
                self.store.save(self.ns, self.name, ckpt, saved_at, self.save_s, spec.checkpoint.size_gib, path,
                                layout=self.layout)
                self.run_saved.append(ckpt)
            out.add(saved_at - self.save_s, self.progress_pods(), self.fmt.save_started(ckpt, path, saved_at - self.save_s))
            out.add(saved_at, self.progress_pods(), self.fmt.save_done(ckpt, path, saved_at - self.save_s, saved_at))
            self.truth.record("training", self.subject, "checkpoint_saved", at=saved_at, step=ckpt,
                              duration_s=round(self.save_s, 3), initial=True)
        out.add(now, self.progress_pods(), self._step_text(step, now))
        self.truth.record("training", self.subject, "job_started", at=now, step=step)

    def _resume(self, now: float, load_s: float, nranks: int, out: Output) -> bool:
        """Resume from the latest checkpoint; False when loading it crashed the job (defect broken-resume)."""
        run, spec = self.run, self.spec
        latest = self.store.latest(self.ns, self.name, self.layout) if spec.checkpoint.persistent else None
        step = latest or 0
        path = self.fmt.checkpoint_path(self.base_path, step)
        if latest is not None and not spec.checkpoint.loadable:
            self.truth.record("training", self.subject, "resume_failed", at=now, step=step, run=run.rid)
            texts = {pod: self.fmt.resume_crash(step, path, now, w.grank) for pod, w in run.workers.items()}
            self.crash_workers(now, list(run.workers), 1, "Error", texts, out, cause="broken-resume")
            return False
        partial = None
        if latest is not None and not spec.checkpoint.optimizer_state:  # defect lost-optimizer-state
            partial = {pod: self.fmt.resume_without_optimizer(step, path, now, load_s, w.grank)
                       for pod, w in run.workers.items()}
            if None in partial.values():  # the framework refuses a checkpoint without its optimizer state
                self.truth.record("training", self.subject, "resume_failed", at=now, step=step, run=run.rid)
                texts = {pod: self.fmt.refuse_without_optimizer(step, path, now, w.grank)
                         for pod, w in run.workers.items()}
                self.crash_workers(now, list(run.workers), 1, "Error", texts, out, cause="lost-optimizer-state")
                return False
        self.progress = Progress(float(step), now)
        self.truth.record("training", self.subject, "job_resumed", at=now, run=run.rid)
        resumed_at = now + load_s
        for pod, w in run.workers.items():  # every rank loads its shard; the framework's lines come from each
            if latest is None:
                out.add(now, [pod], self.fmt.no_checkpoint(self.base_path, now))
            elif partial is not None:  # trains on from the weights, with a fresh optimizer
                attempt = len(self.fmt.resume_started(step, path, now, w.grank))
                out.add(now, [pod], partial[pod][:attempt])
                out.add(resumed_at, [pod], partial[pod][attempt:])
            else:
                out.add(now, [pod], self.fmt.resume_started(step, path, now, w.grank))
                out.add(resumed_at, [pod], self.fmt.resumed(step, path, resumed_at, load_s, w.grank))
        if partial is not None:
            self.truth.record("training", self.subject, "resumed_without_optimizer_state", at=resumed_at, step=step)
        self.truth.record("training", self.subject, "resumed_from_checkpoint", at=resumed_at, step=step)
        for pod, w in run.workers.items():
            out.add(resumed_at, [pod], self._init_lines(w, run.transport, nranks))
        self.first_after_resume = step + 1
        self.last_save_step = step
        forced = {step + 1}
        if self.fault_step is not None:
            forced.add(max(self.fault_step, step + 1))
        self.filter.forced = forced
        return True

    def end_run(self, now: float, cause: str, out: Output, advance: bool = True, lost: set[str] | None = None) -> None:
        """A worker stopped: progress freezes, in-flight saves are lost, the next run resumes.

        The surviving workers cannot rejoin a new rendezvous (torchrun's is static): they block in their
        collective until NCCL's watchdog kills them, unless Volcano restarts them first (RestartJob).
        """
        if self.run is None:
            return
        if advance:
            self.advance(now, out)
        run = self.run
        deadline = now + self.spec.nccl.timeout
        for pod, uid in run.pods.items():
            if lost is not None and pod not in lost and uid not in self.dead_uids:
                self.dead_uids.add(uid)
                self.orphans[pod] = (uid, run.workers[pod], deadline)
                peer = run.nodes.get(next(iter(lost), ""), "peer") if lost else "peer"
                out.add(now, [pod], L.peer_lost_warn(run.workers[pod], peer))
        self.fault_step = math.floor(self.progress.step) if self.progress else None
        self.fault_at = now
        if not self.spec.checkpoint.durable and self.run_saved and lost:  # defect lost-last-save
            gone = self.run_saved[-1]
            self.store.forget(self.ns, self.name, gone, layout=self.layout)
            self.truth.record("training", self.subject, "checkpoint_lost", at=now, step=gone)
        self.run_saved = []
        self.blocked_until = None
        self.truth.record("training", self.subject, "fault", at=now, cause=cause, step_at_fault=self.fault_step,
                          latest_checkpoint=self.store.latest(self.ns, self.name, self.layout), run=self.run.rid)
        self.saves.clear()
        self.run = None
        self._carry(now)
        self.awaiting_resume = True
        self._update_truth()

    def _crash_at(self, first: bool, compute_from: float) -> float | None:
        """When this run's workers crash by a defect: a resumed run `after_resume.crash_after` into it, the first
        run `first_run.crash_after` into it; None: it does not."""
        crash_after = self.spec.first_run.crash_after if first else self.spec.after_resume.crash_after
        return None if crash_after is None else compute_from + crash_after

    # -- time passes -----------------------------------------------------------------------------
    def advance(self, now: float, out: Output) -> None:
        """Steps, checkpoints and network phases up to `now`."""
        run, prog = self.run, self.progress
        if run is None or prog is None:
            return
        crash = run.crash_at is not None and now >= run.crash_at
        if crash:
            now = run.crash_at
        self._net_transitions(now, out)
        while True:  # a save that blocks the training loop stops the steps until it is written
            prog.segments = self._segments(prog.t, now)
            blocked = False
            for k, t in prog.advance(now, self.filter):
                # the step's own line first, then its save: every framework logs step k before it saves k (HF's
                # `_maybe_log_save_evaluate`, Megatron's training_log before save_checkpoint) — printed after the
                # save line, it read as the loop having got past that save (HF, Lightning: their only completion
                # evidence), so a worker lost mid-save left a "saved" checkpoint its store never completed
                if k % self.filter.every == 0 or k in self.filter.forced:
                    out.add(t, self.progress_pods(), self._step_text(k, t))
                if k % self.interval == 0 and k > self.last_save_step:
                    self._start_save(k, t, out)
                    blocked = self.fmt.blocks_training
                    if blocked:
                        self.blocked_until = self.saves[-1][2]
                self._step_truth(k, t)
                if blocked:
                    prog.step, prog.t = float(k), t
                    break
            self._finish_saves(now, out)
            if not blocked:
                break
        self._after_disruption(now, out)
        if crash:  # defect crash-after-resume: the resumed run dies on its own, every time (restarted-before-drill:
            # the first run does, once)
            texts = {pod: L.gpu_xid(w, 31) for pod, w in run.workers.items()}
            cause = "crash-after-resume" if run.resumed else "crash-before-drill"
            self.truth.record("training", self.subject, cause.replace("-", "_"), at=now, run=run.rid)
            self.crash_workers(now, list(run.workers), 1, "Error", texts, out, cause=cause)
            return
        self._check_stall(now, out)
        self._late_fallback(now, out)
        self._carry(now)
        self._update_truth()

    def next_wake(self, now: float) -> float | None:
        """The next twin time something happens (a step worth printing, a save ends, a phase changes)."""
        run, prog = self.run, self.progress
        orphans = [deadline for _, _, deadline in self.orphans.values()]
        if run is None or prog is None:
            return min(orphans) if orphans else None
        times = [done for _, _, done in self.saves] + orphans
        if run.crash_at is not None:
            times.append(run.crash_at)
        if now < run.compute_from:
            times.append(run.compute_from)
        phase = run.phase
        if phase.ends is not None:
            times.append(phase.ends)
        if phase.name == "isolated":
            times.append(max(phase.since, run.compute_from) + self.spec.nccl.timeout)
        if self.late_fallback_at is not None:
            times.append(self.late_fallback_at)
        times += [at for _, at in self._after_due()]
        prog.segments = self._segments(prog.t, prog.t + 10 * 86400)
        reach = prog.time_to(self.filter.next_after(prog.step))
        if reach is not None:
            times.append(reach)
        future = [t for t in times if t > now - 1e-9]
        return min(future) if future else None

    def crash_workers(self, now: float, pods: list[str], exit_code: int, reason: str, texts: dict[str, list[str]],
                      out: Output, cause: str) -> None:
        for pod in pods:
            out.add(now, [pod], texts.get(pod, []))
            out.crashes.append((pod, exit_code, reason, cause))
            self.dead_uids.add(self.run.pods[pod])  # exiting: never part of a new run, even while still Running
            self.truth.record("training", self.subject, "worker_crashed", at=now, pod=pod, exit_code=exit_code,
                              cause=cause)
        self.end_run(now, cause, out, advance=False, lost=set(pods))

    def orphan_timeouts(self, now: float, live: dict[str, str], out: Output) -> None:
        """Survivors of an ended run still Running at their watchdog deadline exit like a timed-out rank."""
        for pod, (uid, w, deadline) in list(self.orphans.items()):
            if live.get(pod) != uid:
                del self.orphans[pod]  # restarted or gone before the watchdog fired
            elif now >= deadline:
                del self.orphans[pod]
                out.add(deadline, [pod], L.watchdog_timeout(w, 1, self.spec.nccl.timeout, self.spec.nccl.timeout + 0.01))
                out.crashes.append((pod, 134, "Error", "nccl_timeout"))
                self.truth.record("training", self.subject, "worker_crashed", at=deadline, pod=pod, exit_code=134,
                                  cause="nccl_timeout")

    # -- helpers ---------------------------------------------------------------------------------
    def _after_due(self) -> list[tuple[str, float]]:
        """The once-per-job defects of `after_resume` still to play: (which, when)."""
        run, after = self.run, self.spec.after_resume
        if run is None or run.after_from is None:
            return []
        due = [("oom", after.oom_after), ("error_line", after.error_line_after)]
        return [(k, run.after_from + d) for k, d in due if d is not None and k not in self.after_done]

    def _after_disruption(self, now: float, out: Output) -> None:
        """Defects oom-after-resume (the kernel kills one worker's container: exit 137, OOMKilled, nothing in its
        log), unclassified-error-after-resume (an error line no reader classifies) and gpu-error-after-resume (the
        driver's Xid 74, which the GPU reader classifies); training goes on."""
        run = self.run
        victim = sorted(run.workers)[-1]
        for kind, at in self._after_due():
            if now < at:
                continue
            self.after_done.add(kind)
            if kind == "oom":
                out.crashes.append((victim, 137, "OOMKilled", "oom-after-resume"))
                self.truth.record("training", self.subject, "worker_oom_killed", at=at, pod=victim)
            else:
                xid = self.spec.after_resume.error_line == "xid"
                line = (L.driver_xid if xid else L.nvswitch_fatal)(run.workers[victim], at)
                out.add(at, [victim], line)
                self.truth.record("training", self.subject, "driver_xid_printed" if xid else "error_line_printed",
                                  at=at, pod=victim)
