"""The training job as the monitor has taken it in (drills.measure.checkpoint): its workers and what their
logs said — steps, saves, resumes — and the progress facts derived from them: the step it had reached when
it lost a node, its real checkpoint interval, the latest checkpoint before a moment, the first resume after
the fault. Pure readings of the state; no API calls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from drills.core.clock import parse_iso
from drills.core.kubetime import latest, may_be_after, not_before
from drills.core.kube import obj_get
from drills.verdicts.timeline import Timeline

__all__ = ["Worker", "JobState", "ContainerExit", "ENDED_PHASES"]

log = logging.getLogger(__name__)

ENDED_PHASES = ("Failed", "Aborted", "Completed", "Terminated")


@dataclass(frozen=True)
class ContainerExit:
    """One termination of a worker's container as its pod's status says it (`state.terminated` or, after a
    restart in place, `lastState.terminated`): the second key to the log for the job's health."""

    pod: str
    container: str
    at: datetime | None  # finishedAt
    exit_code: int | None
    reason: str | None  # OOMKilled, Error, Completed, …
    message: str | None
    restarts: int  # the container's restartCount when it was read
    source: str  # "pods/<name> status.containerStatuses[<container>].<state|lastState>.terminated @ rv <n>"

    restarted: bool = False  # read from lastState: the kubelet restarted the container in place after it

    @property
    def failed(self) -> bool:
        """Exited non-zero, killed for memory, or restarted in place (a worker's process died mid-training
        whatever its code); a final exit 0 that nothing restarted is a completion, not a failure."""
        return self.restarted or self.reason == "OOMKilled" or (self.exit_code is not None and self.exit_code != 0)

    def sentence(self) -> str:
        code = f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code"
        why = f" ({self.reason})" if self.reason else ""
        msg = f": {self.message}" if self.message else ""
        again = f", restarted {self.restarts} time(s)" if self.restarts else ""
        return f"{self.pod} container {self.container} terminated with {code}{why}{msg}{again}"


@dataclass
class Worker:
    name: str
    uid: str
    node: str | None = None
    phase: str | None = None
    scheduled_at: datetime | None = None
    ready_at: datetime | None = None
    terminating: bool = False
    terminating_seen: datetime | None = None  # cluster time we first saw it terminating or gone
    stopped_at: datetime | None = None  # when it was evicted/deleted (deletionTimestamp − grace) or exited
    stopped_seen: bool = False  # stopped_at is only when we saw it gone (its own time was never delivered)
    unschedulable: str | None = None  # the scheduler's PodScheduled=False message while it is Pending
    gone: bool = False
    exits: dict[tuple[str, str], ContainerExit] = field(default_factory=dict)  # (container, finishedAt) → exit
    restarts: int = 0  # the sum of its containers' restartCount, as last read


@dataclass
class JobState:
    """What the monitor took in of one training job: workers, progress lines, saves, resumes; and the
    facts derived from them (each a pure reading of this state)."""

    workers: dict[str, Worker] = field(default_factory=dict)  # uid → worker
    job: dict | None = None
    steps: list[tuple[str, datetime, int, float | None]] = field(default_factory=list)  # (uid, at, step, samples/s)
    last_step_at: datetime | None = None  # the newest `at` in `steps` (kept as they come: asked after every event)
    checkpoints: list[tuple[str, datetime, int]] = field(default_factory=list)
    save_durations: dict[int, tuple[datetime, float | None]] = field(default_factory=dict)  # step → (at, seconds)
    resumes: list[tuple[str, datetime, int]] = field(default_factory=list)
    resume_failures: list[tuple[str, datetime, str]] = field(default_factory=list)  # (uid, at, reason)
    lines: list[tuple[datetime, str]] = field(default_factory=list)
    losses: list[tuple[str, datetime, int | None, float | None, float | None]] = field(default_factory=list)
    # ↑ (uid, at, step, loss, grad norm) of every line that printed a loss (`drills.measure.logloss`); step None for
    #   a line of its own (the HF Trainer's log dict, printed before the bar that shows its step)
    skipped: list[tuple[str, datetime, int]] = field(default_factory=list)
    # ↑ (uid, at, n) of every line that said n optimizer steps were skipped (a loss-scaler overflow; `logloss`):
    #   Megatron's count on its iteration line (for the interval it ends), DeepSpeed's one OVERFLOW line per step
    job_left_running_at: datetime | None = None

    def take_pod(self, pod: dict, deleted: bool, seen_at: Callable[[], datetime]) -> Worker | None:
        """Take in one watch event of a worker pod; `seen_at()` is the cluster time it was seen (for a
        worker first seen terminating or gone). Returns the worker (None for an object without a uid)."""
        uid = obj_get(pod, "metadata", "uid")
        if not uid:
            return None
        worker = self.workers.setdefault(uid, Worker(pod["metadata"]["name"], uid))
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
        _take_exits(worker, pod)
        if obj_get(pod, "metadata", "deletionTimestamp") or worker.phase in ("Failed", "Succeeded"):
            worker.terminating = True
        if deleted:
            worker.gone = worker.terminating = True
        if worker.terminating and worker.terminating_seen is None:
            worker.terminating_seen = seen_at()
        if worker.terminating and (worker.stopped_at is None or worker.stopped_seen):
            own = _stopped_at(pod)
            worker.stopped_at, worker.stopped_seen = (own, False) if own else (worker.stopped_at or worker.terminating_seen, True)
        return worker

    def take_killing(self, event: dict) -> None:
        """A kubelet's `Killing` event for a worker: when it was stopped, for a worker whose terminating state
        a stream never delivered (a watch that caught up only after the pod was gone)."""
        worker = self.workers.get(obj_get(event, "involvedObject", "uid") or "")
        at = _parse(event.get("eventTime") or event.get("firstTimestamp")
                    or obj_get(event, "metadata", "creationTimestamp"))
        if worker is None or at is None or not worker.terminating or not (worker.stopped_at is None
                                                                            or worker.stopped_seen):
            return  # a live pod's Killing is a container restart; an eviction already read from the pod wins
        if worker.stopped_at is None or at < worker.stopped_at:
            worker.stopped_at, worker.stopped_seen = at, False

    def reached_at(self, step: int) -> datetime | None:
        """When the log first showed the job at `step` or beyond (None: not yet)."""
        return min((at for _, at, s, _ in self.steps if s >= step), default=None)

    def saves(self) -> list[tuple[datetime, int, float | None]]:
        """Checkpoint saves, one per step (the first rank's line): (when, step, seconds it took)."""
        return sorted((at, step, seconds) for step, (at, seconds) in self.save_durations.items())

    def running(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.phase == "Running" and not w.terminating]

    def new(self, old: set[str]) -> list[Worker]:
        return [w for w in self.workers.values() if w.uid not in old]

    def last_step(self, before: datetime | None) -> int | None:
        steps = [s for _, at, s, _ in self.steps if before is None or at <= before]
        return max(steps) if steps else None

    def latest_checkpoint(self, before: datetime | None) -> int | None:
        """The latest checkpoint known before `before`: saved ones, or the one the run started from."""
        known = [s for _, at, s in self.checkpoints + self.resumes if before is None or at <= before]
        return max(known) if known else None

    def latest_saved_by(self, old: set[str], until: datetime | None) -> int | None:
        """The latest checkpoint the workers before the fault (`old`) saved or started from, before `until`
        (the new workers' resume): a save still in flight at the eviction completes within the grace period,
        so what the old generation logged — not a moment — says what there was to resume from."""
        known = [s for uid, at, s in self.checkpoints + self.resumes if uid in old and (until is None or at <= until)]
        return max(known) if known else None

    def resume_after(self, injected_at: datetime, old: set[str]) -> tuple[str, datetime, int] | None:
        new = {w.uid for w in self.new(old)}
        found = [r for r in self.resumes if r[1] >= injected_at and r[0] in new]
        return min(found, key=lambda r: r[1]) if found else None

    def resume_failed_after(self, injected_at: datetime, old: set[str]) -> str | None:
        new = {w.uid for w in self.new(old)}
        found = sorted((r for r in self.resume_failures if r[1] >= injected_at and r[0] in new),
                       key=lambda r: r[1])
        return f"{self.workers[found[0][0]].name}: {found[0][2]}" if found else None

    def first_step_after(self, resumed, old: set[str]):
        if resumed is None:
            return None
        new = {w.uid for w in self.new(old)}
        found = [s for s in self.steps if s[1] >= resumed[1] and s[0] in new]
        return min(found, key=lambda s: s[1]) if found else None

    def ended(self, injected_at: datetime) -> str | None:
        phase = obj_get(self.job, "status", "state", "phase")
        if phase in ENDED_PHASES and self.job_left_running_at is not None:
            return f"Volcano job phase {phase}"
        return None

    def lost_at(self, on_node: set[str]) -> datetime | None:
        """When the job lost the node: the first of its workers there evicted or stopped."""
        stops = [self.workers[u].stopped_at for u in on_node if u in self.workers]
        stops = [s for s in stops if s is not None]
        return min(stops) if stops else None

    def step_at_loss(self, injected_at: datetime, old: set[str], on_node: set[str]) -> int | None:
        """The step the job had reached when it lost the node: its last step line before then, carried
        forward at the job's own rate to that moment (at most one log cadence: a stalled job is not
        credited with steps it never made). Without a loss: the last step before the injection."""
        lost_at = self.lost_at(on_node)
        if lost_at is None:
            return self.last_step(injected_at)
        # the loss is a whole-second object time: a line within its second may precede it (core/kubetime.py)
        lines = sorted((at, step) for u, at, step, _ in self.steps if u in old and at < latest(lost_at))
        if not lines:
            return None
        at, step = lines[-1]
        if len(lines) < 2 or lines[-2][0] >= at:
            return step
        (at0, step0) = lines[-2]
        rate = (step - step0) / (at - at0).total_seconds()
        ahead = max(0.0, min(rate * (lost_at - at).total_seconds(), step - step0))
        return step + int(ahead)

    def interval(self, before: datetime, declared: int | None) -> tuple[int | None, str | None]:
        """The job's real checkpoint interval: the steps between its last two saves in the log; else None,
        naming what the log showed — the profile's `declared` interval is a promise, never a reading (issue 30)."""
        saved = sorted({s for _, at, s in self.checkpoints if at <= before})
        if len(saved) >= 2:
            return saved[-1] - saved[-2], f"log (saves at steps {saved[-2]} and {saved[-1]})"
        seen = f"only step {saved[-1]} saved" if saved else "no save"
        promise = f"; the profile declares {declared}, a promise, not a reading" if declared else ""
        return None, f"not observed: the log before the fault shows {seen}, so one interval cannot be read{promise}"

    def save_steps(self, before: datetime) -> int | None:
        """Steps the job trains while its longest save before `before` is in flight: a node lost then loses
        that save too, so the worst case is one interval plus these steps."""
        seconds = [d for at, _, d in self.saves() if d is not None and at <= before]
        steps = sorted((at, step) for _, at, step, _ in self.steps if at <= before)
        span = (steps[-1][0] - steps[0][0]).total_seconds() if len(steps) >= 2 else 0.0
        rate = (steps[-1][1] - steps[0][1]) / span if span > 0 else None
        return int(round(max(seconds) * rate)) if seconds and rate else None

    def restarted_from(self, injected_at: datetime, old: set[str]) -> int | None:
        """A restart that loaded no checkpoint: the first step the new workers logged, when it is behind
        the latest checkpoint (they trained again from the beginning)."""
        steps = sorted((at, step) for u, at, step, _ in self.steps if u not in old and at >= injected_at)
        latest = self.latest_checkpoint(injected_at)
        if steps and latest is not None and steps[0][1] < latest:
            return steps[0][1]
        return None

    def timeline(self, injected_at: datetime, old: set[str], replicas: int,
                  on_node: set[str] | None = None) -> Timeline:
        events: list[tuple[str, datetime]] = [("injected", injected_at)]
        # the objects' own times (an eviction's, a container's exit) before when a stream happened to show them
        signs = [self.job_left_running_at] + [self.workers[u].stopped_at or self.workers[u].terminating_seen
                                              for u in old if u in self.workers]
        signs = [s for s in signs if s is not None]
        if signs:
            events.append(("detected", max(min(signs), injected_at)))
        new = [w for w in self.new(old) if not w.gone]
        # PodScheduled's time is whole seconds: one in the fault's own second may be after it (core/kubetime.py)
        scheduled = [not_before(w.scheduled_at, injected_at) for w in new
                     if w.scheduled_at and may_be_after(w.scheduled_at, injected_at)]
        if scheduled:
            events.append(("rescheduled", min(scheduled)))
        ready = [w.ready_at for w in new if w.ready_at]
        if len(ready) >= replicas:
            events.append(("ready", max(sorted(ready)[:replicas])))
        resumed = self.resume_after(injected_at, old)
        first = self.first_step_after(resumed, old)
        if first:
            events.append(("recovered", first[1]))
            target = self.step_at_loss(injected_at, old, old if on_node is None else on_node)
            uids = {w.uid for w in new}
            caught = [at for uid, at, step, _ in self.steps
                      if uid in uids and at >= first[1] and target is not None and step >= target]
            if caught:
                events.append(("caught_up", min(caught)))
        return Timeline.from_events(events)


def _take_exits(worker: Worker, pod: dict) -> None:
    """Every container termination the pod's status shows (current state and, after a restart, the last one)."""
    rv = obj_get(pod, "metadata", "resourceVersion") or "?"
    statuses = obj_get(pod, "status", "containerStatuses", default=None) or []
    worker.restarts = max(worker.restarts, sum(int(cs.get("restartCount") or 0) for cs in statuses))
    for cs in statuses:
        for where in ("state", "lastState"):
            term = obj_get(cs, where, "terminated")
            if not isinstance(term, dict):
                continue
            name = cs.get("name") or "?"
            key = (name, str(term.get("finishedAt") or term.get("startedAt") or where))
            if key in worker.exits:
                continue
            code = term.get("exitCode")
            worker.exits[key] = ContainerExit(
                worker.name, name, _parse(term.get("finishedAt")), None if code is None else int(code),
                term.get("reason"), term.get("message"), int(cs.get("restartCount") or 0),
                f"pods/{worker.name} status.containerStatuses[{name}].{where}.terminated @ rv {rv}",
                restarted=where == "lastState")


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


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    return parse_iso(text).astimezone(timezone.utc)
