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

The job's state and the progress facts read from it live in `drills.measure.job_state`, the stability
window and the transports in `drills.measure.stability`. It only measures; `drills.verdicts.training` judges. A job that ends (Failed/Aborted/Completed) after the fault
stops the wait at once with that fact in `TrainingRecovery.ended`.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Callable

from drills.profile.model import TrainingWorkload
from drills.core.clock import Clock, parse_iso
from drills.core.errors import CheckFailed
from drills.core.kube import Cluster, EventMerger, WatchEvent, obj_get
from drills.measure import throughput as tp
from drills.measure.logformats import TrainingEvent, split_timestamp
from drills.measure.logread import LogReader
from drills.measure.job_health import JobHealth, job_health
from drills.measure.job_state import ENDED_PHASES, JobState
from drills.measure.stability import stability_window, transports
from drills.measure.training_records import STABILITY_S, TrainingBaseline, TrainingRecovery
from drills.verdicts.timeline import Timeline

__all__ = ["TrainingMonitor", "TrainingBaseline", "TrainingRecovery", "VOLCANO", "JOB_LABEL", "ENDED_PHASES",
           "STABILITY_S"]

log = logging.getLogger(__name__)

VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")
JOB_LABEL = "volcano.sh/job-name"
_EXCERPT = 60  # log lines kept for the report
# `done()` reads the whole timeline of what was taken so far; judged after every event, following a job cost
# O(events²) — invisible on the test suite's short logs, not on a real job's hours of them. What is already queued
# is taken first, then `done()` judged once; at most this many events between two judgements.
_JUDGE_EVERY = 256


class TrainingMonitor:
    """Watches one training job from before the fault until it recovers (or the deadline)."""

    def __init__(self, cluster: Cluster, workload: TrainingWorkload) -> None:
        self.cluster = cluster
        self.workload = workload
        self.format = workload.log_parser()
        self._state = JobState()
        self._merger: EventMerger | None = None
        self._readers: dict[str, LogReader] = {}  # pod uid → its log's reader (state across lines)
        self._followed: dict[str, int] = {}  # "log:<uid>" → the restart count of the instance followed last
        self._lines_seen: dict[str, set[str]] = {}  # pod uid → the raw lines (with their timestamps) taken
        self._nccl: list[tuple[str, TrainingEvent]] = []  # (pod uid, event): transport lines and warnings
        self._samples: list[tp.Sample] = []  # step lines with their throughput
        self.pods_seen: dict[str, dict] = {}  # pod name → its latest object (the reader mounts what they mount)
        self.save_paths: list[str] = []  # checkpoint paths the saves in the log name (where the store is)

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
        self._merger.watch("killing", self.cluster.core.list_namespaced_event, w.namespace,
                           field_selector="involvedObject.kind=Pod,reason=Killing")
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
            running = self._state.running()
            if len(running) < min_workers:
                return f"running on {len(running)} worker(s), fewer than {min_workers}"
            if not self._state.steps:
                return "no training step logged yet"
            if need_checkpoint and self._state.latest_checkpoint(None) is None:
                return "no checkpoint saved yet"
            return None

        missing = self._pump(lambda: ready() is None, start + timeout_s,
                             on_wait and (lambda: on_wait("baseline", self.cluster.clock.timestamp() - start)))
        if not missing:
            pending = sorted({w.unschedulable for w in self._state.workers.values() if w.unschedulable and not w.gone})
            why = f"; its pods are Pending: {'; '.join(pending)}" if pending else ""
            raise CheckFailed(f"precondition not met: training job {self.workload.namespace}/{self.workload.job} "
                              f"is {ready()} after {timeout_s:.0f}s{why}; check the job before drilling")
        running = self._state.running()
        return TrainingBaseline(self.workload.job, self.workload.namespace,
                                {w.name: w.node or "?" for w in running}, frozenset(w.uid for w in running),
                                self._state.last_step(None),
                                self._state.latest_checkpoint(None), obj_get(self._state.job, "status", "state", "phase"))

    def checkpoint_saves(self) -> list[tuple[datetime, int, float | None]]:
        """Checkpoint saves logged so far, one per step (the first rank's line): (when, step, seconds it took)."""
        return self._state.saves()

    def last_step(self) -> int | None:
        """The highest training step logged so far."""
        return self._state.last_step(None)

    def reached_at(self, step: int) -> datetime | None:
        """When the job's log first showed it at `step` or beyond (a save at that step began then)."""
        return self._state.reached_at(step)

    def last_logged_at(self) -> datetime | None:
        """When the newest step line taken in so far was logged (the monitor takes events only while waiting)."""
        return self._state.last_step_at

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
            return self._state.timeline(injected_at, old, len(baseline.workers), on_node)

        def done() -> bool:
            timeline = phases()
            timeline.announce(reported, on_phase)
            if self._state.ended(injected_at) is not None:
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
        if timeline.recovered is not None and self._state.ended(injected_at) is None:
            self._pump(done, max(deadline_ts, timeline.recovered.timestamp() + stability_s), tick)
            timeline = phases()
        resumed = self._state.resume_after(injected_at, old)
        first = self._state.first_step_after(resumed, old)
        state = self._state
        lost_at = self._state.lost_at(on_node)
        interval, source = self._state.interval(lost_at or injected_at, getattr(self.workload, "checkpoint_interval_steps", None))
        nets = transports(state, self._nccl, old, injected_at)
        window = stability_window(state, self._samples, timeline, old, self.cluster.clock.now())
        return TrainingRecovery(
            timeline=timeline, step_at_fault=self._state.step_at_loss(injected_at, old, on_node),
            step_at_injection=self._state.last_step(injected_at),
            lost_at=lost_at, lost_workers=tuple(sorted(self._state.workers[u].name for u in on_node
                                                       if self._state.workers[u].stopped_at is not None)),
            checkpoint_interval=interval, interval_source=source, save_steps=self._state.save_steps(injected_at),
            restarted_from=None if resumed else self._state.restarted_from(injected_at, old),
            stability_s=stability_s, stable_for_s=window[0], restarts_after=window[1],
            job_reason=obj_get(state.job, "status", "state", "reason"),
            throughput_baseline=_round(tp.baseline(self._samples_of(old), injected_at)),
            throughput_after=_round(window[2]), throughput_unit=self._unit(),
            transport_before=nets[0], transport_after=nets[1], sockets_after=nets[2],
            latest_checkpoint=self._state.latest_saved_by(old, resumed[1] if resumed else None),
            resumed_step=resumed[2] if resumed else None, first_step=first[2] if first else None,
            new_nodes=tuple(sorted({w.node for w in self._state.new(old) if w.node and not w.gone})),
            ended=self._state.ended(injected_at), job_phase=obj_get(state.job, "status", "state", "phase"),
            retry_count=obj_get(state.job, "status", "retryCount"), logs=self._excerpt(injected_at),
            throughput=self._throughput(injected_at, old),
            waited_s=max(0.0, min(self.cluster.clock.timestamp(), deadline_ts) - injected_at.timestamp()),
            resume_failed=self._state.resume_failed_after(injected_at, old),
            health=self.health(injected_at, resumed[1] if resumed else None, None))  # every pod of the job

    def health(self, injected_at: datetime, since: datetime | None, uids: set[str] | None,
               subject: str = "resumed") -> JobHealth:
        """The job's health from `since` to now (drills.measure.job_health): loss, container states, unknown lines."""
        return job_health(self._state, {u: r.unknown for u, r in self._readers.items()}, uids, injected_at, since,
                          self.cluster.clock.now(), self.workload.log_ignore, subject,
                          errors={u: r.errors for u, r in self._readers.items()})

    # -- event intake ---------------------------------------------------------------------------

    def _pump(self, done: Callable[[], bool], deadline_ts: float, tick: Callable[[], None] | None) -> bool:
        """Take events until `done()` or the deadline. `done()` is accepted only after a catch-up (what the
        cluster had that the streams had not delivered yet): a stability window that "held" while this
        machine's streams lagged must still see a crash inside it."""
        if self._merger is None:
            raise CheckFailed("the training monitor was not started")
        while True:
            if done():
                for event in self._merger.catch_up():
                    self._take(event)
                if done():
                    return True
            taken = 0
            for event in self._merger.events(deadline_ts):  # ends with a catch-up at the deadline
                if event is None:
                    if tick:
                        tick()
                else:
                    self._take(event)
                    taken += 1
                    if taken < _JUDGE_EVERY and self._merger.pending():
                        continue  # what is queued already is taken before `done()` is judged again
                taken = 0
                if done():  # a condition on time alone (a stability window) holds between events too
                    break
            else:
                return done()

    def _take(self, event: WatchEvent) -> None:
        if event.source == "pods":
            self._take_pod(event)
        elif event.source == "job" and event.type != "DELETED" and isinstance(event.obj, dict):
            before = obj_get(self._state.job, "status", "state", "phase")
            self._state.job = event.obj
            after = obj_get(event.obj, "status", "state", "phase")
            if before == "Running" and after != "Running" and self._state.job_left_running_at is None:
                since = obj_get(event.obj, "status", "state", "lastTransitionTime")  # Volcano's own record
                self._state.job_left_running_at = (parse_iso(since).astimezone(timezone.utc) if since
                                                   else _cluster_time(self.cluster, event.wall))
        elif event.source == "killing" and event.type != "DELETED" and isinstance(event.obj, dict):
            self._state.take_killing(event.obj)
        elif event.source.startswith("log:") and event.type == "LOG":
            self._take_line(event.source[4:].split("#", 1)[0], event.obj)  # every instance's lines, one reader
        elif event.type == "ERROR":
            log.warning("training monitor stream %s failed: %s", event.source, event.obj)

    def _take_pod(self, event: WatchEvent) -> None:
        worker = self._state.take_pod(event.obj, event.type == "DELETED", lambda: _cluster_time(self.cluster, event.wall))
        if isinstance(event.obj, dict) and event.type != "DELETED":
            self.pods_seen[obj_get(event.obj, "metadata", "name", default="?")] = event.obj
        if worker is not None and worker.phase == "Running" and not worker.gone and self._merger is not None:
            self._follow(worker, event.obj if isinstance(event.obj, dict) else {})

    def _follow(self, worker, pod: dict) -> None:
        """Follow each container instance of a worker: a container restarted in place (OOMKilled, restartPolicy
        OnFailure) ends its log follow, so its next instance is followed anew, and the instance that ended is read
        once more (`previous`, which the kubelet keeps): a follow that began late — the monitor is behind its
        events, or the restart came between two of them — would otherwise never read what it printed. Lines read
        twice are taken once (`_take_line`); an instance between two restarts seen as one is not read."""
        statuses = obj_get(pod, "status", "containerStatuses", default=None) or []
        mine = next((c for c in statuses if c.get("name") == self.workload.container), statuses[0] if statuses else {})
        restarts = int(mine.get("restartCount") or 0)
        first = f"log:{worker.uid}" not in self._followed
        source = f"log:{worker.uid}" if first else f"log:{worker.uid}#{restarts}"
        if not first and self._followed[f"log:{worker.uid}"] >= restarts:
            return
        self._followed[f"log:{worker.uid}"] = restarts
        self._merger.follow_log(source, self.cluster.core, worker.name, self.workload.namespace,
                                self.workload.container, previous_first=restarts > 0)

    def _take_line(self, uid: str, line: str) -> None:
        seen = self._lines_seen.setdefault(uid, set())
        if line in seen:  # an instance's log read twice (its follow and, after a restart, `previous`): once
            return
        seen.add(line)
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
        if event.loss is not None or event.grad_norm is not None:  # a loss-only line's step: job_health
            self._state.losses.append((uid, at, event.step, event.loss, event.grad_norm))
        if event.skipped is not None:
            self._state.skipped.append((uid, at, event.skipped))
        if event.kind == "step" and event.step is not None:
            self._state.steps.append((uid, at, event.step, event.samples_per_s))
            if at is not None and (self._state.last_step_at is None or at > self._state.last_step_at):
                self._state.last_step_at = at
        elif event.kind == "checkpoint_saved" and event.step is not None:
            self._state.checkpoints.append((uid, at, event.step))
            if event.path:
                self.save_paths.append(event.path)
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

    def _samples_of(self, uids: set[str]) -> list[tp.Sample]:
        return [s for s in self._samples if s.worker in uids]

    def _unit(self) -> str:
        return "samples/s" if any(s.samples_per_s is not None for s in self._samples) else "steps/s"

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


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
