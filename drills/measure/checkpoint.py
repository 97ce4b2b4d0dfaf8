"""Training recovery, measured from the outside: pods, the Volcano Job and the training log.

`TrainingMonitor` starts before the fault (pods and the Volcano Job watched, every running worker's
log followed with timestamps) so it knows the step at the fault and the latest checkpoint saved
before it. After the fault it reads each phase from the objects' own timestamps and the log lines'
timestamps, not from when it happened to look:

- detected     the first sign the job noticed: an old worker terminating/gone, or the job leaving Running
- rescheduled  a new worker bound to a node (its PodScheduled lastTransitionTime)
- ready        as many new workers Ready as before the fault (the latest Ready lastTransitionTime)
- recovered    the first training step after a resume that succeeded (the log line's timestamp); an
               attempt that crashed or printed no success line is a failed resume with its error
               (`drills.measure.logread`), never a resume
- caught_up    the first step ≥ the step at the fault

"The fault" for progress is the moment the job **lost the node**: the first of its workers on that node
evicted (deletionTimestamp − grace) or stopped (its container's finishedAt), not the injection; the
step there is extrapolated from the last step line at the job's own rate (at most one log cadence).
After `recovered` the monitor keeps watching a **stability window** (until caught up, and at least
`stability_s`): restarts, the job's phase, throughput of the new workers against the pre-fault
baseline, and the NCCL transport each new worker initialised on. The job's real checkpoint interval
is read from its saves in the log (the last two), else taken from the profile.

It only measures; `drills.verdicts` judges. A job that ends (Failed/Aborted/Completed) after the fault
stops the wait at once with that fact in `TrainingRecovery.ended`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from drills.profile.model import TrainingWorkload
from drills.core.clock import Clock, parse_iso
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, WatchEvent, obj_get
from drills.measure import throughput as tp
from drills.measure.logformats import TrainingEvent, split_timestamp
from drills.measure.logread import LogReader
from drills.verdicts.timeline import Timeline, Verdict

__all__ = ["TrainingMonitor", "TrainingBaseline", "TrainingRecovery", "judge_left_node", "judge_resumed", "VOLCANO",
           "JOB_LABEL", "ENDED_PHASES", "STABILITY_S"]

log = logging.getLogger(__name__)

VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")
JOB_LABEL = "volcano.sh/job-name"
ENDED_PHASES = ("Failed", "Aborted", "Completed", "Terminated")
_EXCERPT = 60  # log lines kept for the report
STABILITY_S = 300.0  # cluster seconds a recovered job is watched at least (longer while not caught up)


@dataclass(frozen=True)
class TrainingBaseline:
    """The job before the fault: its workers, their nodes, progress and the latest checkpoint."""

    job: str
    namespace: str
    workers: dict[str, str]  # pod name → node
    uids: frozenset[str]
    step: int | None
    latest_checkpoint: int | None
    job_phase: str | None

    @property
    def nodes(self) -> list[str]:
        return sorted(set(self.workers.values()))


@dataclass(frozen=True)
class TrainingRecovery:
    """What happened after the fault, measured; None/empty where it never happened."""

    timeline: Timeline
    step_at_fault: int | None
    latest_checkpoint: int | None
    resumed_step: int | None
    first_step: int | None
    new_nodes: tuple[str, ...]
    ended: str | None  # "Volcano job phase Failed" when the job ended instead of recovering
    job_phase: str | None
    retry_count: int | None
    logs: tuple[str, ...] = ()
    throughput: tuple[tuple[float, float], ...] = ()  # (cluster s since injection, samples/s)
    waited_s: float | None = None  # cluster seconds the monitor followed the job after the fault
    resume_failed: str | None = None  # "<pod>: <error>" of the first failed resume after the fault
    # the fault's effect: when the job lost the node, and which of its workers there were evicted or stopped
    lost_at: datetime | None = None
    lost_workers: tuple[str, ...] = ()
    step_at_injection: int | None = None
    checkpoint_interval: int | None = None  # the job's real interval: steps between its last two saves
    save_steps: int | None = None  # steps the job makes while its longest save is in flight (lost with it)
    interval_source: str | None = None  # "log (saves at 4000, 6000)" | "profile (…)"
    restarted_from: int | None = None  # no checkpoint loaded: the first step the new workers logged
    # the stability window after `recovered`
    stability_s: float = STABILITY_S
    stable_for_s: float | None = None  # how long after `recovered` the job was watched
    restarts_after: tuple[str, ...] = ()  # what showed a restart after the job had recovered
    job_reason: str | None = None  # the Volcano job's state reason (MaxRetryExceeded)
    throughput_baseline: float | None = None
    throughput_after: float | None = None  # mean of the new workers' step lines over the window
    throughput_unit: str = "samples/s"
    transport_before: tuple[str, ...] = ()  # "NET/IB (mlx5_0)" labels of the old workers
    sockets_after: tuple[str, ...] = ()  # new workers (ranks) that initialised NCCL on NET/Socket
    transport_after: tuple[str, ...] = ()

    def details(self) -> dict:
        return {"step_at_fault": self.step_at_fault, "step_at_injection": self.step_at_injection,
                "lost_at": self.lost_at and Clock.iso(self.lost_at), "lost_workers": list(self.lost_workers),
                "latest_checkpoint": self.latest_checkpoint, "checkpoint_interval": self.checkpoint_interval,
                "save_steps": self.save_steps,
                "checkpoint_interval_source": self.interval_source,
                "resumed_step": self.resumed_step, "resume_failed": self.resume_failed,
                "restarted_from": self.restarted_from, "stability_s": self.stability_s,
                "stable_for_s": self.stable_for_s, "restarts_after_recovery": list(self.restarts_after),
                "job_reason": self.job_reason, "baseline_throughput": self.throughput_baseline,
                "throughput_after": self.throughput_after, "throughput_unit": self.throughput_unit,
                "transport_before": list(self.transport_before), "transport_after": list(self.transport_after),
                "first_step_after_resume": self.first_step,
                "new_nodes": list(self.new_nodes), "ended": self.ended, "job_phase": self.job_phase,
                "retry_count": self.retry_count, "logs": list(self.logs),
                "overlay": [list(p) for p in self.throughput], "overlay_label": "samples/s"}


@dataclass
class _Worker:
    name: str
    uid: str
    node: str | None = None
    phase: str | None = None
    scheduled_at: datetime | None = None
    ready_at: datetime | None = None
    terminating: bool = False
    terminating_seen: datetime | None = None  # cluster time we first saw it terminating or gone
    stopped_at: datetime | None = None  # when it was evicted/deleted (deletionTimestamp − grace) or exited
    unschedulable: str | None = None  # the scheduler's PodScheduled=False message while it is Pending
    gone: bool = False


@dataclass
class _State:
    workers: dict[str, _Worker] = field(default_factory=dict)  # uid → worker
    job: dict | None = None
    steps: list[tuple[str, datetime, int, float | None]] = field(default_factory=list)  # (uid, at, step, samples/s)
    checkpoints: list[tuple[str, datetime, int]] = field(default_factory=list)
    save_durations: dict[int, tuple[datetime, float | None]] = field(default_factory=dict)  # step → (at, seconds)
    resumes: list[tuple[str, datetime, int]] = field(default_factory=list)
    resume_failures: list[tuple[str, datetime, str]] = field(default_factory=list)  # (uid, at, reason)
    lines: list[tuple[datetime, str]] = field(default_factory=list)
    job_left_running_at: datetime | None = None


class TrainingMonitor:
    """Watches one training job from before the fault until it recovers (or the deadline)."""

    def __init__(self, cluster: Cluster, workload: TrainingWorkload) -> None:
        self.cluster = cluster
        self.workload = workload
        self.format = workload.log_parser()
        self._state = _State()
        self._merger: EventMerger | None = None
        self._readers: dict[str, LogReader] = {}  # pod uid → its log's reader (state across lines)
        self._nccl: list[tuple[str, TrainingEvent]] = []  # (pod uid, event): transport lines and warnings
        self._samples: list[tp.Sample] = []  # step lines with their throughput

    def start(self) -> "TrainingMonitor":
        """Check the job exists (CheckFailed, one line, otherwise) and start watching it."""
        from kubernetes.client.exceptions import ApiException

        w = self.workload
        try:
            self.cluster.custom.get_namespaced_custom_object(*VOLCANO[:2], w.namespace, VOLCANO[2], w.job)
        except ApiException as err:
            if err.status == 404:
                raise CheckFailed(f"training job {w.namespace}/{w.job} not found (Volcano jobs.batch.volcano.sh); "
                                  "set workloads.training.job in the profile to a running job") from None
            raise CheckFailed(f"cannot read training job {w.namespace}/{w.job}: {err.status} {err.reason}") from None
        self._merger = EventMerger(self.cluster.clock)
        self._merger.watch("pods", self.cluster.core.list_namespaced_pod, w.namespace,
                           label_selector=f"{JOB_LABEL}={w.job}")
        self._merger.watch("job", self.cluster.custom.list_namespaced_custom_object, *VOLCANO[:2], w.namespace,
                           VOLCANO[2], field_selector=f"metadata.name={w.job}")
        return self

    def close(self) -> None:
        if self._merger is not None:
            self._merger.close()

    def baseline(self, min_workers: int, timeout_s: float, need_checkpoint: bool = True,
                 on_wait: Callable[[str, float], None] | None = None) -> TrainingBaseline:
        """Wait (≤ timeout_s cluster seconds) until the job runs on ≥ min_workers workers, has stepped and
        has a checkpoint; CheckFailed saying which precondition did not hold otherwise."""
        start = self.cluster.clock.timestamp()

        def ready() -> str | None:
            running = self._running()
            if len(running) < min_workers:
                return f"running on {len(running)} worker(s), fewer than {min_workers}"
            if not self._state.steps:
                return "no training step logged yet"
            if need_checkpoint and self._latest_checkpoint(None) is None:
                return "no checkpoint saved yet"
            return None

        missing = self._pump(lambda: ready() is None, start + timeout_s,
                             on_wait and (lambda: on_wait("baseline", self.cluster.clock.timestamp() - start)))
        if not missing:
            pending = sorted({w.unschedulable for w in self._state.workers.values() if w.unschedulable and not w.gone})
            why = f"; its pods are Pending: {'; '.join(pending)}" if pending else ""
            raise CheckFailed(f"precondition not met: training job {self.workload.namespace}/{self.workload.job} "
                              f"is {ready()} after {timeout_s:.0f}s{why}; check the job before drilling")
        running = self._running()
        return TrainingBaseline(self.workload.job, self.workload.namespace,
                                {w.name: w.node or "?" for w in running}, frozenset(w.uid for w in running),
                                self._last_step(None),
                                self._latest_checkpoint(None), obj_get(self._state.job, "status", "state", "phase"))

    def checkpoint_saves(self) -> list[tuple[datetime, int, float | None]]:
        """Checkpoint saves logged so far, one per step (the first rank's line): (when, step, seconds it took)."""
        return sorted((at, step, seconds) for step, (at, seconds) in self._state.save_durations.items())

    def last_step(self) -> int | None:
        """The highest training step logged so far."""
        return self._last_step(None)

    def last_logged_at(self) -> datetime | None:
        """When the newest step line taken in so far was logged (the monitor takes events only while waiting)."""
        return max((at for _, at, _, _ in self._state.steps), default=None)

    def step_rate(self) -> float | None:
        """Training steps per cluster second over the steps logged so far (None before two distinct times)."""
        steps = sorted((at, step) for _, at, step, _ in self._state.steps)
        if len(steps) < 2 or steps[-1][0] <= steps[0][0]:
            return None
        return (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0]).total_seconds()

    def wait_until(self, done: Callable[[], bool], deadline_ts: float, tick: Callable[[], None] | None = None) -> bool:
        """Take the job's events until `done()` or the cluster-time deadline; whether `done()` holds."""
        return self._pump(done, deadline_ts, tick)

    def recovery(self, baseline: TrainingBaseline, injected_at: datetime, deadline_ts: float,
                 on_phase: Callable[[str, datetime], None] | None = None,
                 on_wait: Callable[[str, float], None] | None = None, node: str | None = None,
                 stability_s: float = STABILITY_S) -> TrainingRecovery:
        """Follow the job until it caught up and stayed healthy for `stability_s` after recovering, it
        ended, or the cluster-time deadline passed (a recovery near the deadline is still watched for
        its whole stability window)."""
        old = set(baseline.uids)
        on_node = {u for u in old if self._state.workers.get(u) and self._state.workers[u].node == node} if node else old
        reported: set[str] = set()

        def phases() -> Timeline:
            return self._timeline(injected_at, old, len(baseline.workers), on_node)

        def done() -> bool:
            timeline = phases()
            timeline.announce(reported, on_phase)
            if self._ended(injected_at) is not None:
                return True
            stable_until = timeline.recovered and timeline.recovered.timestamp() + stability_s
            return (timeline.caught_up is not None and stable_until is not None
                    and self.cluster.clock.timestamp() >= stable_until)

        def tick() -> None:
            if on_wait:
                nxt = next((p for p in ("detected", "rescheduled", "ready", "recovered", "caught_up")
                            if p not in reported), "caught_up")
                on_wait(nxt, self.cluster.clock.timestamp() - injected_at.timestamp())

        self._pump(done, deadline_ts, tick)
        timeline = phases()
        if timeline.recovered is not None and self._ended(injected_at) is None:
            self._pump(done, max(deadline_ts, timeline.recovered.timestamp() + stability_s), tick)
            timeline = phases()
        resumed = self._resume_after(injected_at, old)
        first = self._first_step_after(resumed, old)
        state = self._state
        lost_at = self._lost_at(on_node)
        interval, source = self._interval(lost_at or injected_at)
        window = self._window(timeline, old, deadline_ts)
        return TrainingRecovery(
            timeline=timeline, step_at_fault=self._step_at_loss(injected_at, old, on_node),
            step_at_injection=self._last_step(injected_at),
            lost_at=lost_at, lost_workers=tuple(sorted(self._state.workers[u].name for u in on_node
                                                       if self._state.workers[u].stopped_at is not None)),
            checkpoint_interval=interval, interval_source=source, save_steps=self._save_steps(injected_at),
            restarted_from=None if resumed else self._restarted_from(injected_at, old),
            stability_s=stability_s, stable_for_s=window[0], restarts_after=window[1],
            job_reason=obj_get(state.job, "status", "state", "reason"),
            throughput_baseline=_round(tp.baseline(self._samples_of(old), injected_at)),
            throughput_after=_round(window[2]), throughput_unit=self._unit(),
            transport_before=tuple(sorted({_label(e) for u, e in self._nccl if u in old and e.kind == "nccl_transport"
                                           and e.at <= injected_at})),
            transport_after=tuple(sorted({_label(e) for u, e in self._nccl if u not in old
                                          and e.kind == "nccl_transport"})),
            sockets_after=tuple(sorted({self._who(u, e) for u, e in self._nccl if u not in old
                                        and e.kind == "nccl_transport" and not e.is_rdma})),
            latest_checkpoint=self._latest_checkpoint(injected_at),
            resumed_step=resumed[2] if resumed else None, first_step=first[2] if first else None,
            new_nodes=tuple(sorted({w.node for w in self._new(old) if w.node and not w.gone})),
            ended=self._ended(injected_at), job_phase=obj_get(state.job, "status", "state", "phase"),
            retry_count=obj_get(state.job, "status", "retryCount"), logs=self._excerpt(injected_at),
            throughput=self._throughput(injected_at, old),
            waited_s=max(0.0, min(self.cluster.clock.timestamp(), deadline_ts) - injected_at.timestamp()),
            resume_failed=self._resume_failed_after(injected_at, old))

    # -- event intake ---------------------------------------------------------------------------

    def _pump(self, done: Callable[[], bool], deadline_ts: float, tick: Callable[[], None] | None) -> bool:
        if self._merger is None:
            raise CheckFailed("the training monitor was not started")
        if done():
            return True
        for event in self._merger.events(deadline_ts):
            if event is None:
                if tick:
                    tick()
                if done():  # a condition on time alone (a stability window) holds between events too
                    return True
                continue
            self._take(event)
            if done():
                return True
        return done()

    def _take(self, event: WatchEvent) -> None:
        if event.source == "pods":
            self._take_pod(event)
        elif event.source == "job" and event.type != "DELETED" and isinstance(event.obj, dict):
            before = obj_get(self._state.job, "status", "state", "phase")
            self._state.job = event.obj
            after = obj_get(event.obj, "status", "state", "phase")
            if before == "Running" and after != "Running" and self._state.job_left_running_at is None:
                self._state.job_left_running_at = _cluster_time(self.cluster, event.wall)
        elif event.source.startswith("log:") and event.type == "LOG":
            self._take_line(event.source[4:], event.obj)
        elif event.type == "ERROR":
            log.warning("training monitor stream %s failed: %s", event.source, event.obj)

    def _take_pod(self, event: WatchEvent) -> None:
        pod = event.obj
        uid = obj_get(pod, "metadata", "uid")
        if not uid:
            return
        worker = self._state.workers.setdefault(uid, _Worker(pod["metadata"]["name"], uid))
        worker.node = obj_get(pod, "spec", "nodeName") or worker.node
        worker.phase = obj_get(pod, "status", "phase")
        conditions = {c.get("type"): c for c in obj_get(pod, "status", "conditions", default=None) or []}
        if conditions.get("PodScheduled", {}).get("status") == "True" and worker.node:
            worker.scheduled_at = _parse(conditions["PodScheduled"].get("lastTransitionTime")) or worker.scheduled_at
        scheduled = conditions.get("PodScheduled", {})
        worker.unschedulable = (scheduled.get("message") or scheduled.get("reason") or "Unschedulable") \
            if scheduled.get("status") == "False" and not worker.node else None
        ready = conditions.get("Ready", {})
        worker.ready_at = _parse(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None
        if obj_get(pod, "metadata", "deletionTimestamp") or worker.phase in ("Failed", "Succeeded"):
            worker.terminating = True
        if event.type == "DELETED":
            worker.gone = worker.terminating = True
        if worker.terminating and worker.terminating_seen is None:
            worker.terminating_seen = _cluster_time(self.cluster, event.wall)
        if worker.terminating and worker.stopped_at is None:
            worker.stopped_at = _stopped_at(pod) or worker.terminating_seen
        if worker.phase == "Running" and not worker.gone and self._merger is not None:
            self._merger.follow_log(f"log:{uid}", self.cluster.core, worker.name, self.workload.namespace,
                                    self.workload.container)

    def _take_line(self, uid: str, line: str) -> None:
        reader = self._readers.get(uid)
        if reader is None:
            reader = self._readers[uid] = LogReader(self.format)
        events = [e for e in reader.feed(line) if e.at is not None]
        if events:
            who = self._state.workers[uid].name if uid in self._state.workers else uid
            self._state.lines.append((events[0].at, f"{who}: {split_timestamp(line)[1]}"))
        for event in events:
            self._take_event(uid, event)

    def _take_event(self, uid: str, event: TrainingEvent) -> None:
        at = event.at
        if event.kind == "step" and event.step is not None:
            self._state.steps.append((uid, at, event.step, event.samples_per_s))
        elif event.kind == "checkpoint_saved" and event.step is not None:
            self._state.checkpoints.append((uid, at, event.step))
            first_at, seconds = self._state.save_durations.get(event.step, (at, None))
            if event.duration_s is not None and (seconds is None or event.duration_s > seconds):
                seconds = event.duration_s  # Megatron's timer and DeepSpeed's last shard come after the save line
            self._state.save_durations[event.step] = (first_at, seconds)
        elif event.kind == "resumed" and event.step is not None:
            self._state.resumes.append((uid, at, event.step))
        elif event.kind == "resume_failed":
            self._state.resume_failures.append((uid, at, event.text or "resume failed"))
        if event.kind in ("nccl_transport", "nccl_warn"):
            self._nccl.append((uid, event))
        elif event.kind == "step" and event.step is not None:
            self._samples.append(tp.Sample(event.at, event.step, event.samples_per_s, event.step_time_s, uid))

    # -- derived facts ---------------------------------------------------------------------------

    def _running(self) -> list[_Worker]:
        return [w for w in self._state.workers.values() if w.phase == "Running" and not w.terminating]

    def _new(self, old: set[str]) -> list[_Worker]:
        return [w for w in self._state.workers.values() if w.uid not in old]

    def _last_step(self, before: datetime | None) -> int | None:
        steps = [s for _, at, s, _ in self._state.steps if before is None or at <= before]
        return max(steps) if steps else None

    def _latest_checkpoint(self, before: datetime | None) -> int | None:
        """The latest checkpoint known before `before`: saved ones, or the one the run started from."""
        known = [s for _, at, s in self._state.checkpoints + self._state.resumes if before is None or at <= before]
        return max(known) if known else None

    def _resume_after(self, injected_at: datetime, old: set[str]) -> tuple[str, datetime, int] | None:
        new = {w.uid for w in self._new(old)}
        found = [r for r in self._state.resumes if r[1] >= injected_at and r[0] in new]
        return min(found, key=lambda r: r[1]) if found else None

    def _resume_failed_after(self, injected_at: datetime, old: set[str]) -> str | None:
        new = {w.uid for w in self._new(old)}
        found = sorted((r for r in self._state.resume_failures if r[1] >= injected_at and r[0] in new),
                       key=lambda r: r[1])
        return f"{self._state.workers[found[0][0]].name}: {found[0][2]}" if found else None

    def _first_step_after(self, resumed, old: set[str]):
        if resumed is None:
            return None
        new = {w.uid for w in self._new(old)}
        found = [s for s in self._state.steps if s[1] >= resumed[1] and s[0] in new]
        return min(found, key=lambda s: s[1]) if found else None

    def _ended(self, injected_at: datetime) -> str | None:
        phase = obj_get(self._state.job, "status", "state", "phase")
        if phase in ENDED_PHASES and self._state.job_left_running_at is not None:
            return f"Volcano job phase {phase}"
        return None

    def _timeline(self, injected_at: datetime, old: set[str], replicas: int,
                  on_node: set[str] | None = None) -> Timeline:
        events: list[tuple[str, datetime]] = [("injected", injected_at)]
        signs = [self._state.job_left_running_at] + [self._state.workers[u].terminating_seen for u in old
                                                       if u in self._state.workers]
        signs = [s for s in signs if s is not None]
        if signs:
            events.append(("detected", max(min(signs), injected_at)))
        new = [w for w in self._new(old) if not w.gone]
        scheduled = [w.scheduled_at for w in new if w.scheduled_at and w.scheduled_at >= injected_at]
        if scheduled:
            events.append(("rescheduled", min(scheduled)))
        ready = [w.ready_at for w in new if w.ready_at]
        if len(ready) >= replicas:
            events.append(("ready", max(sorted(ready)[:replicas])))
        resumed = self._resume_after(injected_at, old)
        first = self._first_step_after(resumed, old)
        if first:
            events.append(("recovered", first[1]))
            target = self._step_at_loss(injected_at, old, old if on_node is None else on_node)
            uids = {w.uid for w in new}
            caught = [at for uid, at, step, _ in self._state.steps
                      if uid in uids and at >= first[1] and target is not None and step >= target]
            if caught:
                events.append(("caught_up", min(caught)))
        return Timeline.from_events(events)

    def _lost_at(self, on_node: set[str]) -> datetime | None:
        """When the job lost the node: the first of its workers there evicted or stopped."""
        stops = [self._state.workers[u].stopped_at for u in on_node if u in self._state.workers]
        stops = [s for s in stops if s is not None]
        return min(stops) if stops else None

    def _step_at_loss(self, injected_at: datetime, old: set[str], on_node: set[str]) -> int | None:
        """The step the job had reached when it lost the node: its last step line before then, carried
        forward at the job's own rate to that moment (at most one log cadence: a stalled job is not
        credited with steps it never made). Without a loss: the last step before the injection."""
        lost_at = self._lost_at(on_node)
        if lost_at is None:
            return self._last_step(injected_at)
        lines = sorted((at, step) for u, at, step, _ in self._state.steps if u in old and at <= lost_at)
        if not lines:
            return None
        at, step = lines[-1]
        if len(lines) < 2 or lines[-2][0] >= at:
            return step
        (at0, step0) = lines[-2]
        rate = (step - step0) / (at - at0).total_seconds()
        ahead = min(rate * (lost_at - at).total_seconds(), step - step0)
        return step + int(ahead)

    def _interval(self, before: datetime) -> tuple[int | None, str | None]:
        """The job's real checkpoint interval: the steps between its last two saves in the log; else the
        profile's declared one."""
        saved = sorted({s for _, at, s in self._state.checkpoints if at <= before})
        if len(saved) >= 2:
            return saved[-1] - saved[-2], f"log (saves at steps {saved[-2]} and {saved[-1]})"
        declared = getattr(self.workload, "checkpoint_interval_steps", None)
        seen = f"only step {saved[-1]} saved" if saved else "no save"
        return declared, f"profile (the log shows {seen}: one interval cannot be read)" if declared else None

    def _save_steps(self, before: datetime) -> int | None:
        """Steps the job trains while its longest save before `before` is in flight: a node lost then loses
        that save too, so the worst case is one interval plus these steps."""
        seconds = [d for at, _, d in self.checkpoint_saves() if d is not None and at <= before]
        steps = sorted((at, step) for _, at, step, _ in self._state.steps if at <= before)
        span = (steps[-1][0] - steps[0][0]).total_seconds() if len(steps) >= 2 else 0.0
        rate = (steps[-1][1] - steps[0][1]) / span if span > 0 else None
        return int(round(max(seconds) * rate)) if seconds and rate else None

    def _restarted_from(self, injected_at: datetime, old: set[str]) -> int | None:
        """A restart that loaded no checkpoint: the first step the new workers logged, when it is behind
        the latest checkpoint (they trained again from the beginning)."""
        steps = sorted((at, step) for u, at, step, _ in self._state.steps if u not in old and at >= injected_at)
        latest = self._latest_checkpoint(injected_at)
        if steps and latest is not None and steps[0][1] < latest:
            return steps[0][1]
        return None

    def _window(self, timeline: Timeline, old: set[str],
                deadline_ts: float) -> tuple[float | None, tuple[str, ...], float | None]:
        """The stability window after `recovered`: how long it was watched, what showed a restart in it
        (new workers stopping, resumes after the first, retries), the new workers' mean throughput."""
        if timeline.recovered is None:
            return None, (), None
        start = timeline.recovered
        now = self.cluster.clock.now()
        ended_at = self._state.job_left_running_at if self._ended(timeline.injected or start) else None
        end = min(now, ended_at) if ended_at and ended_at > start else now
        running = {u for u, at, _, _ in self._state.steps if u not in old and at >= start}
        stopped = [self._state.workers[u].name for u in running
                   if self._state.workers.get(u) and self._state.workers[u].stopped_at is not None
                   and self._state.workers[u].stopped_at >= start]
        resumes = sorted({at for u, at, _ in self._state.resumes if u not in old and at > start})
        failed = sorted({at for u, at, _ in self._state.resume_failures if u not in old and at > start})
        signs = ([f"workers stopped {len(stopped)} time(s) after it resumed ({', '.join(sorted(set(stopped)))})"]
                 if stopped else []) \
            + ([f"{len(resumes)} further resume(s)"] if resumes else []) \
            + ([f"{len(failed)} failed resume(s)"] if failed else [])
        values = [s.value for s in self._samples if s.worker not in old and start <= s.at <= end and s.value]
        mean = sum(values) / len(values) if values else None
        return max(0.0, (end - start).total_seconds()), tuple(signs), mean

    def _samples_of(self, uids: set[str]) -> list[tp.Sample]:
        return [s for s in self._samples if s.worker in uids]

    def _unit(self) -> str:
        return "samples/s" if any(s.samples_per_s is not None for s in self._samples) else "steps/s"

    def _who(self, uid: str, event: TrainingEvent) -> str:
        worker = self._state.workers.get(uid)
        name = worker.name if worker else uid
        return name if event.rank is None else f"{name} (rank {event.rank})"

    def _excerpt(self, injected_at: datetime) -> tuple[str, ...]:
        lines = sorted(self._state.lines)
        before = [f"{Clock.iso(at)} {text}" for at, text in lines if at < injected_at][-10:]
        after = [f"{Clock.iso(at)} {text}" for at, text in lines if at >= injected_at][:_EXCERPT - len(before)]
        return tuple(before + after)

    def _throughput(self, injected_at: datetime, old: set[str]) -> tuple[tuple[float, float], ...]:
        points = sorted((at, sps) for _, at, _, sps in self._state.steps if sps is not None)
        series = [((at - injected_at).total_seconds(), sps) for at, sps in points]
        step = max(1, len(series) // 200)
        return tuple(series[::step])


def _cluster_time(cluster: Cluster, wall_monotonic: float) -> datetime:
    """The cluster time of a moment seen on this machine's monotonic clock."""
    ago = time.monotonic() - wall_monotonic
    return datetime.fromtimestamp(cluster.clock.timestamp() - cluster.clock.cluster_seconds(ago), timezone.utc)


def _stopped_at(pod: dict) -> datetime | None:
    """When a pod was taken away (deletionTimestamp minus its grace period: the eviction's own time) or
    its container exited (finishedAt), from the object itself."""
    from datetime import timedelta

    deleting = _parse(obj_get(pod, "metadata", "deletionTimestamp"))
    if deleting is not None:
        return deleting - timedelta(seconds=float(obj_get(pod, "metadata", "deletionGracePeriodSeconds") or 0))
    ends = [_parse(obj_get(cs, "state", "terminated", "finishedAt"))
            for cs in obj_get(pod, "status", "containerStatuses", default=None) or []]
    ends = [e for e in ends if e is not None]
    return min(ends) if ends else None


def _label(event: TrainingEvent) -> str:
    return f"NET/{event.transport or '?'}" + (f" ({', '.join(event.devices)})" if event.devices else "")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    return parse_iso(text).astimezone(timezone.utc)


def judge_left_node(recovery: TrainingRecovery, node: str) -> Verdict:
    """Pass iff a new worker was scheduled and none of the job's new workers is on the lost node."""


    if recovery.timeline.rescheduled is None:
        why = f"the job never resumed: {recovery.ended}, " if recovery.ended else ""
        return Verdict("rescheduled", False, None, None, "", f"{why}no worker was rescheduled after losing node {node}")
    if node in recovery.new_nodes:
        return Verdict("rescheduled", False, None, None, "",
                       f"a new worker was scheduled back onto the lost node {node} (new nodes: "
                       f"{', '.join(recovery.new_nodes)}): the node was not taken out of scheduling")
    return Verdict("rescheduled", True, None, None, "",
                   f"rescheduled off {node} onto {', '.join(recovery.new_nodes) or 'other nodes'}")


def judge_resumed(recovery: TrainingRecovery) -> Verdict:
    """`timeline.judge_resume`, worded with why the job never resumed: it ended, or it hung (no worker
    resumed by the end of the wait, e.g. survivors that cannot rejoin a replaced worker)."""
    from dataclasses import replace

    from drills.verdicts.timeline import format_duration, judge_resume

    verdict = judge_resume(recovery.resumed_step, recovery.latest_checkpoint)
    if recovery.resumed_step is None and recovery.restarted_from is not None:
        start = "step 0" if recovery.restarted_from <= 100 else f"step {recovery.restarted_from}"
        return replace(verdict, never_reached=False,
                       reason=f"restarted from {start} (no checkpoint loaded): the new workers trained again from "
                              f"{start} although the latest checkpoint was {recovery.latest_checkpoint} (are "
                              f"checkpoints written to storage that outlives the pods?)")
    if recovery.resumed_step is None and recovery.resume_failed:
        ended = f"; {recovery.ended}" if recovery.ended else ""
        return replace(verdict, reason=f"resume failed: the job attempted to load its checkpoint and crashed "
                                       f"({recovery.resume_failed}){ended}; the latest checkpoint was "
                                       f"{recovery.latest_checkpoint}")
    if recovery.resumed_step is None and recovery.ended:
        return replace(verdict, reason=f"the job never resumed: {recovery.ended} "
                                       f"(the latest checkpoint was {recovery.latest_checkpoint})")
    if recovery.resumed_step is None and recovery.latest_checkpoint is not None:
        within = f" within {format_duration(recovery.waited_s)} of the fault" if recovery.waited_s else ""
        state = ", ".join(x for x in (recovery.job_phase and f"Volcano job phase {recovery.job_phase}",
                                      recovery.retry_count is not None and f"{recovery.retry_count} retries") if x)
        return replace(verdict, reason=f"the job never resumed: no worker resumed from a checkpoint{within}"
                                       f"{f' ({state})' if state else ''}; the latest checkpoint was "
                                       f"{recovery.latest_checkpoint}")
    return verdict
