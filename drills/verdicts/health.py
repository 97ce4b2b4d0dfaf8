"""The training job's health after a fault, judged (DESIGN §5b): it learns (finite loss), its containers say it
stayed up (the second key, not text), and nothing error-like that no reader knows was printed. The same three
judges for every drill that watches the job after a fault (GPU node loss, switch uplink drop).

Pure: each takes the measured `JobHealth` (drills.measure.job_health) and returns a `Verdict`; the report category
comes from the check's name (drills/core/catalog.yaml): `learning` → diverged, `loss reading` → not_observed,
`worker containers` → worker_failed, `log errors` → worker_failed, `log health` → unclassified_log.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from drills.core.clock import Clock
from drills.verdicts.timeline import Verdict

if TYPE_CHECKING:
    from drills.measure.job_health import JobHealth

__all__ = ["judge_learning", "judge_containers", "judge_log_errors", "judge_log_health", "judge_health_window"]

log = logging.getLogger(__name__)


# A loss that repeats to every printed digit this many times in a row is a model that is not updated (a learning
# rate of 0, frozen parameters): a real batch-to-batch loss never does.
FLAT_READINGS = 8
# Readings compared across the fault: the median of the last N before it, of the first N after the resume.
COMPARED = 5


def judge_health_window(health: "JobHealth", loss_ratio: float = 1.5, skip_fraction: float = 0.5,
                        skips_allowed: int = 32) -> list[Verdict]:
    """The judgements, in the order a reader wants them: learning, containers, known errors, unknown lines.
    `loss_ratio`, `skip_fraction`, `skips_allowed`: the profile's `slo.resume_loss_ratio`, `slo.skipped_step_fraction`,
    `slo.skipped_steps_allowed`."""
    return [judge_learning(health, loss_ratio, skip_fraction, skips_allowed), judge_containers(health),
            judge_log_errors(health), judge_log_health(health)]


def judge_learning(h: "JobHealth", loss_ratio: float = 1.5, skip_fraction: float = 0.5,
                   skips_allowed: int = 32) -> Verdict:
    """Pass iff every loss (and grad norm) logged in the window is finite, at least one was logged, the optimizer
    did not skip its steps (more than `skips_allowed` skipped and at least `skip_fraction` of the steps made: a loss
    scaler at its floor, the step counter advancing over no update), and the job learns on from where it was: its
    loss after the resume is not `loss_ratio` × (or more) its loss before the fault (a fresh model's loss: the
    checkpoint's weights were not restored), nor one value repeated `FLAT_READINGS` times (a model no step updates)."""
    window = _window(h)
    bad = h.first_bad
    if bad is not None:
        what = "loss" if bad.loss is not None and not math.isfinite(bad.loss) else "grad norm"
        value = bad.loss if what == "loss" else bad.grad_norm
        also = f", grad norm {_fmt(bad.grad_norm)}" if what == "loss" and bad.grad_norm is not None else ""
        missing = " (its loss not printed: Megatron leaves a NaN loss out of the line)" \
            if what == "grad norm" and bad.loss is None else ""
        step = f"step {bad.step}" if bad.step is not None else Clock.iso(bad.at)
        return Verdict("learning", False, None, None, "",
                       f"{h.subject} but diverged ({what} {_fmt(value)} from {step}{also}){missing}: {bad.pod} logged "
                       f"it at {Clock.iso(bad.at)}, {window}; the job runs but learns nothing")
    sk = h.skipped
    if sk is not None and sk.skipped > skips_allowed and sk.fraction >= skip_fraction:
        return Verdict("learning", False, float(sk.skipped), float(skips_allowed), "skipped steps",
                       f"{h.subject} but its optimizer skipped {sk.skipped} of the {sk.stepped} steps from step "
                       f"{sk.first_step} to {sk.last_step} ({sk.fraction:.0%}; {sk.pod}'s log, to "
                       f"{Clock.iso(sk.at)}: the framework's own skipped-step lines, a loss scaler overflowing every "
                       f"step) — more than {skips_allowed} and at least {skip_fraction:.0%} of them "
                       f"(slo.skipped_steps_allowed, slo.skipped_step_fraction), {window}; the step counter advances, "
                       "the model does not: the job runs but learns nothing")
    if h.losses_after == 0:
        seen = (f"it logged {h.losses_before} loss reading(s) before the fault and none {window} (a NaN loss is "
                "left out of Megatron's line)" if h.losses_before else
                "its log shows no training loss the readers know, before or after the fault")
        return Verdict("loss reading", False, None, None, "",
                       f"inconclusive: whether the job still learns was not observed: {seen}", inconclusive=True)
    stalled = _not_learning(h, loss_ratio)
    if stalled is not None:
        return Verdict("learning", False, None, None, "", f"{h.subject} but {stalled}, {window}; the job runs but "
                                                           "learns nothing")
    last = h.last
    grad = f", grad norm {_fmt(last.grad_norm)}" if last and last.grad_norm is not None else ""
    return Verdict("learning", True, float(h.losses_after), None, "readings",
                   f"loss finite {window}: {h.losses_after} reading(s), the last {_fmt(last.loss if last else None)}"
                   f"{grad} at step {last.step if last else '?'}; {_compared(h)}{_skips(h)}")


def _skips(h: "JobHealth") -> str:
    """What the log said of skipped optimizer steps, in a pass (a few are fp16 warm-up; none said: not known)."""
    sk = h.skipped
    if sk is None:
        return ""
    return f"; {sk.skipped} of {sk.stepped} steps skipped by the optimizer ({sk.pod}, steps {sk.first_step}–{sk.last_step})"


def _not_learning(h: "JobHealth", ratio: float) -> str | None:
    """What shows the job does not learn on from where it was, or None (each figure with where it was read)."""
    after = [r.loss for r in h.window if r.loss is not None]
    before = [r.loss for r in h.prior if r.loss is not None]
    if len(after) >= COMPARED and len(before) >= COMPARED:
        was, now = _median(before[-COMPARED:]), _median(after[:COMPARED])
        if was > 0 and now >= ratio * was:
            first = h.window[0]
            return (f"its loss jumped from {_fmt(was)} before the fault to {_fmt(now)} (medians of the last and first "
                    f"{COMPARED} readings; {first.pod} from step {first.step}), {now / was:.1f}× — at least the "
                    f"{ratio:g}× allowed (slo.resume_loss_ratio): the checkpoint's weights were not restored")
        # the whole window, not only its start: a loss that looks right after the resume and then climbs, finite all
        # the way (a learning rate restored too high, the optimizer's moments lost), diverges all the same
        end = [r for r in h.window if r.loss is not None][-COMPARED:]
        late = _median([r.loss for r in end])
        if len(after) >= 2 * COMPARED and was > 0 and late >= ratio * was:
            return (f"its loss climbed to {_fmt(late)} by the end of the window (median of its last {COMPARED} "
                    f"readings, {end[-1].pod} to step {end[-1].step}) from {_fmt(was)} before the fault and "
                    f"{_fmt(now)} when it trained again, {late / was:.1f}× — at least the {ratio:g}× allowed "
                    f"(slo.resume_loss_ratio): it diverges")
    run = h.window[:FLAT_READINGS]
    if len(run) >= FLAT_READINGS and len({r.loss for r in run}) == 1:
        varied = f" (before the fault it varied: {_fmt(min(before))}–{_fmt(max(before))})" if len(set(before)) > 1 else ""
        return (f"its loss stayed at {_fmt(run[0].loss)} for {len(run)} readings in a row (steps {run[0].step}–"
                f"{run[-1].step}, {run[0].pod}){varied}: no step updates the model")
    return None


def _compared(h: "JobHealth") -> str:
    """What the continuity check could compare (said in a pass, so a thin reading is not taken for a strong one)."""
    after, before = len(h.window), len(h.prior)
    if after >= COMPARED and before >= COMPARED:
        end = [r.loss for r in h.window if r.loss is not None][-COMPARED:]
        return (f"it learns on from where it was (median of the first {COMPARED} after "
                f"{_fmt(_median([r.loss for r in h.window[:COMPARED]]))}, of the last {COMPARED} of the window "
                f"{_fmt(_median(end))}, of the last {COMPARED} before the fault "
                f"{_fmt(_median([r.loss for r in h.prior[-COMPARED:]]))})")
    return (f"not compared with the loss before the fault ({before} finite reading(s) before, {after} after: "
            f"{COMPARED} of each needed)")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def judge_containers(h: "JobHealth") -> Verdict:
    """Pass iff no worker container terminated non-zero or OOMKilled (or restarted) in the window, by the pods'
    own status — whatever the log says."""
    window = _window(h)
    if h.exits:
        first = h.exits[0]
        more = f"; {len(h.exits) - 1} more: " + "; ".join(e.sentence() for e in h.exits[1:3]) if len(h.exits) > 1 else ""
        return Verdict("worker containers", False, float(len(h.exits)), 0.0, "exits",
                       f"a worker failed {window} by its container's state, whatever its log says: {first.sentence()}"
                       f" at {Clock.iso(first.at) if first.at else '?'} ({first.source}){more}")
    if h.since is None:
        return Verdict("worker containers", False, None, 0.0, "exits",
                       "worker containers: the job never resumed, so no window to read", never_reached=True)
    return Verdict("worker containers", True, 0.0, 0.0, "exits",
                   f"no worker container exited, was OOMKilled or restarted {window} ({h.pods_read} pods' "
                   "containerStatuses read)")


def judge_log_errors(h: "JobHealth") -> Verdict:
    """Pass iff no worker logged an error a reader classifies (a GPU Xid/ECC error, an NCCL error, a traceback)
    once the job was back: a job that reports its GPU failing while it steps on is not healthy."""
    window = _window(h)
    if h.errors:
        first = h.errors[0]
        more = f" and {len(h.errors) - 1} more" if len(h.errors) > 1 else ""
        return Verdict("log errors", False, float(len(h.errors)), 0.0, "errors",
                       f"a worker reported an error {window}, though the job trains on: {first.sentence()}{more}")
    return Verdict("log errors", True, 0.0, 0.0, "errors", f"no worker logged an error {window}")


def judge_log_health(h: "JobHealth") -> Verdict:
    """Pass iff no error-like line that no reader classifies appeared after the fault (less `log_ignore`'s)."""
    ignored = (f"; {len(h.ignored)} line(s) covered by the profile's log_ignore ({', '.join(h.ignore_patterns)}), "
               f"first: {h.ignored[0].sentence()}") if h.ignored else ""
    if h.unknown:
        first = h.unknown[0]
        more = f" and {len(h.unknown) - 1} more" if len(h.unknown) > 1 else ""
        return Verdict("log health", False, float(len(h.unknown)), 0.0, "lines",
                       f"inconclusive: an error-like line no reader classifies appeared after the fault, so the job's "
                       f"health cannot be vouched for: {first.sentence()}{more} (if it is harmless here, cover it with "
                       f"a workloads.training.log_ignore pattern in the profile){ignored}", inconclusive=True)
    return Verdict("log health", True, 0.0, 0.0, "lines",
                   f"no error-like line the readers do not know after the fault{ignored}")


def _window(h: "JobHealth") -> str:
    if h.since is None:
        return "after the fault"
    until = f" to {Clock.iso(h.until)}" if h.until else ""
    return f"from {Clock.iso(h.since)} (when it {h.subject}){until}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "?"
    return str(value) if not math.isfinite(value) else f"{value:.4g}"
