"""What a training job's steps and saves leave behind in the twin: the log lines a step and a save print (in the
job's format, with the loss the after-resume defects shape), the saves in the store (or lost from it), and the
truth records the drills are judged against. A mixin of `JobSim` (training_job.py), which holds the state."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from drills.twin.workloads import loglines as L

__all__ = ["Output", "StepRecords", "FRESH_LOSS"]

log = logging.getLogger(__name__)

CLIMB_AFTER_STEPS = 150  # defect climbs-after-resume: steps of a normal-looking loss before it climbs
FRESH_LOSS = 10.37  # cross-entropy of an untrained model over a 32,000-token vocabulary: ln(32000)


@dataclass
class Output:
    """What one reconcile decided: log lines (twin time, pod, text) and workers to crash (pod, exit code, reason)."""

    lines: list[tuple[float, str, str]] = field(default_factory=list)
    crashes: list[tuple[str, int, str, str]] = field(default_factory=list)

    def add(self, t: float, pods: list[str], texts: list[str] | str) -> None:
        for text in [texts] if isinstance(texts, str) else texts:
            for pod in pods:
                self.lines.append((t, pod, text))


class StepRecords:
    """JobSim's step and save output (uses its spec, store, truth, fmt, rng, run and progress)."""

    def _step_truth(self, k: int, t: float) -> None:
        rec = self.truth.record
        if self.first_after_resume is not None and k == self.first_after_resume:
            rec("training", self.subject, "first_step_after_resume", at=t, step=k)
            self.first_after_resume = None
            self._maybe_restored(t)
        if self.fault_step is not None and k >= self.fault_step and self.awaiting_resume:
            self.awaiting_resume = False
            rec("training", self.subject, "caught_up", at=t, step=k, step_at_fault=self.fault_step)

    def _start_save(self, k: int, t: float, out: Output) -> None:
        start = max([t] + [done for _, _, done in self.saves])
        duration = self.save_s * self.store.save_factor() * (1 + self.rng.uniform(-0.05, 0.05))
        self.saves.append((k, start, start + duration))
        self.last_save_step = k
        self.store.begin(self.ns, self.name, k, layout=self.layout, at=t)
        out.add(t, self.progress_pods(), self.fmt.save_started(k, self.fmt.checkpoint_path(self.base_path, k), start))

    def _finish_saves(self, now: float, out: Output) -> None:
        while self.saves and self.saves[0][2] <= now:
            k, start, done = self.saves.pop(0)
            path = self.fmt.checkpoint_path(self.base_path, k)
            if self.spec.checkpoint.durable_under_load or not self.store.under_load():
                self.store.save(self.ns, self.name, k, done, done - start, self.spec.checkpoint.size_gib, path,
                                layout=self.layout)
                self.run_saved.append(k)
            else:  # defect saves-lost-under-load: the log says saved, the store never got the completion evidence
                self.truth.record("training", self.subject, "checkpoint_lost", at=done, step=k)
            out.add(done, self.progress_pods(), self.fmt.save_done(k, path, start, done))
            self.truth.record("training", self.subject, "checkpoint_saved", at=done, step=k,
                              duration_s=round(done - start, 3))

    def _step_text(self, k: int, t: float) -> list[str]:
        spec = self.spec
        ratio = max(self._ratio(t), 1e-3) if self.run and t >= self.run.compute_from else 1.0
        eff = ratio * self.baseline / spec.samples_per_second
        loss = spec.initial_loss * (max(k, 1) / max(spec.initial_step, 1)) ** -0.08 + self.rng.uniform(-0.01, 0.01)
        run = self.run
        if run and run.after_from is not None and t >= run.after_from and spec.after_resume.loss != "finite":
            kind = spec.after_resume.loss
            if kind == "nan":
                loss = math.nan  # defect diverges-after-resume: the framework prints its own NaN shape (trainlogs)
            elif kind == "flat":
                loss = round(spec.initial_loss, 4)  # defect frozen-after-resume: no step changes the model
            elif kind == "climbs":  # defect climbs-after-resume: fine for a while, then diverging, finite
                steps = (t - run.after_from) / max(spec.step_time, 1e-3)
                loss *= (1 + max(0.0, steps - CLIMB_AFTER_STEPS) / 150) ** 2
            else:  # defect weights-not-restored: a fresh model's loss (ln of a 32k vocabulary), falling slowly
                steps = (t - run.after_from) / max(spec.step_time, 1e-3)
                loss = FRESH_LOSS * (1 + steps / 200) ** -0.05 + self.rng.uniform(-0.01, 0.01)
        samples = spec.samples_per_second * eff * (1 + self.rng.uniform(-0.005, 0.005))
        printed, self._printed_step = self._printed_step, k
        skipped = 0
        if run and run.after_from is not None and t >= run.after_from and spec.after_resume.loss_scale == "floor":
            # defect loss-scale-floor: every step since the last line printed was skipped by the optimizer
            skipped = k - printed if printed is not None and printed < k else 1
        return self.fmt.step(k, t, loss, samples, spec.step_time / max(eff, 1e-3), spec.total_steps, skipped)

    def _init_lines(self, w: L.Worker, transport: str, nranks: int) -> list[str]:
        if self.spec.cuda != "ok":  # CUDA never initialised: torch warns, the job runs on gloo over the CPU (no NCCL)
            return L.torch_cuda_warning(self.spec.cuda)
        n = self.spec.nccl
        return L.nccl_init(w, transport, n.hcas, n.socket_ifname, nranks, n.version, self.rdma_kind)

    def _latest_checkpoint(self) -> int | None:
        return self.store.latest(self.ns, self.name, self.layout)

    def _update_truth(self) -> None:
        run = self.run
        self.truth.update(
            "training", self.subject,
            baseline_samples_per_s=round(self.baseline, 3), nominal_samples_per_s=self.spec.samples_per_second,
            step=math.floor(self.progress.step) if self.progress else None,
            checkpoint=self._latest_checkpoint, checkpoint_interval_steps=self.interval,
            running=run is not None, run=self.runs, transport=run.transport if run else None,
            network_phase=run.phase.name if run else None, step_at_fault=self.fault_step,
            pods=sorted(run.pods) if run else [], log_every_steps=self.filter.every,
        )
