"""What a training drill measured: the job before the fault (`TrainingBaseline`) and what happened after it
(`TrainingRecovery`), as plain records — `drills.measure.checkpoint.TrainingMonitor` fills them, the judges in
`drills.verdicts.training` read them. The store's state at the fault is derived here, in one place
(`TrainingRecovery.store_at_fault`, drills/measure/ckpt_asof.py), for the judge and the record alike."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from drills.core.clock import Clock
from drills.measure.ckpt_asof import StoreAtFault, at_fault
from drills.measure.ckpt_store import StoreReading
from drills.measure.job_health import JobHealth
from drills.verdicts.timeline import Timeline

__all__ = ["TrainingBaseline", "TrainingRecovery", "STABILITY_S"]

log = logging.getLogger(__name__)

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
    health: JobHealth | None = None  # learning, container states, unknown lines from the resume on
    store: "StoreReading | None" = None  # the checkpoint store, read when the job lost its node (ckpt_store)
    store_read: str = "pod"  # how the profile says to read it: pod | path | none (not readable: the log alone)

    @property
    def store_at_fault(self) -> "StoreAtFault | None":
        """The store reading as it proves the store was at the fault (ckpt_asof), on the cluster's clock: the
        injection, and the first replacement worker running (else scheduled): the earliest a resumed job could write."""
        if self.store is None or not self.store.readable:
            return None
        t = self.timeline
        writers = t.ready or t.rescheduled  # a replacement writes once it runs, not before; the old workers may
        # finish a save until then (a drain's grace period while the replacement is created and starts)
        return at_fault(self.store, t.injected.timestamp() if t.injected else None, self.step_at_fault,
                        writers.timestamp() if writers else None, self.store.read_done)

    @property
    def interval_read(self) -> tuple[int | None, str]:
        """The job's checkpoint interval as this run observed it: its log's last two saves, else the last two
        checkpoints the store proves complete at the fault (the job's own saves, read from where it writes them:
        a job resumed just before this fault has logged one save since, but its store holds the ones before);
        never the profile's declared interval (a promise, issue 30)."""
        source = self.interval_source or "unknown"
        if self.checkpoint_interval is not None:
            return self.checkpoint_interval, source
        view = self.store_at_fault
        steps = sorted({c.step for c in view.complete}) if view else []
        if len(steps) >= 2 and steps[-1] > steps[-2]:
            return steps[-1] - steps[-2], (f"store (complete at the fault: checkpoints at steps {steps[-2]} and "
                                           f"{steps[-1]}); {source}")
        return None, source

    def details(self) -> dict:
        view = self.store_at_fault
        interval, interval_source = self.interval_read
        return {**(self.health.details() if self.health else {}),
                "checkpoint_store": self.store.details() if self.store else None, "store_read": self.store_read,
                "checkpoint_store_at_fault": view and view.details(),
                "step_at_fault": self.step_at_fault, "step_at_injection": self.step_at_injection,
                "lost_at": self.lost_at and Clock.iso(self.lost_at), "lost_workers": list(self.lost_workers),
                "latest_checkpoint": self.latest_checkpoint, "checkpoint_interval": interval,
                "save_steps": self.save_steps,
                "checkpoint_interval_source": interval_source,
                "resumed_step": self.resumed_step, "resume_failed": self.resume_failed,
                "restarted_from": self.restarted_from, "stability_s": self.stability_s,
                "stable_for_s": self.stable_for_s, "restarts_after_recovery": list(self.restarts_after),
                "job_reason": self.job_reason, "baseline_throughput": self.throughput_baseline,
                "throughput_after": self.throughput_after, "throughput_unit": self.throughput_unit,
                "transport_before": list(self.transport_before), "transport_after": list(self.transport_after),
                "first_step_after_resume": self.first_step,
                "new_nodes": list(self.new_nodes), "ended": self.ended, "job_phase": self.job_phase,
                "retry_count": self.retry_count, "waited_s": self.waited_s, "logs": list(self.logs),
                "overlay": [list(p) for p in self.throughput], "overlay_label": "samples/s"}
