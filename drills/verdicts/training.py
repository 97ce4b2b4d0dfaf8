"""The GPU-node-loss drill's judges: did the fault take effect, how much progress the promise risks,
and whether the job really recovered — resumed, then healthy through a stability window (no restart,
not Failed, throughput ≥ the ratio of its baseline, NCCL still on RDMA) and caught up with the step it
had reached when it lost the node, within the target (DESIGN §5).

Pure: each takes the measured `TrainingRecovery` (drills.measure.checkpoint) and numbers, and returns a
`Verdict` whose fields say what its sentence says.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dataclasses import replace

from drills.core.clock import Clock

from drills.verdicts.timeline import (
    Verdict, format_duration, judge_effect, judge_recovery, judge_resume, lost_steps, within,
)

if TYPE_CHECKING:
    from drills.measure.checkpoint import TrainingRecovery

__all__ = ["judge_left_node", "judge_resumed", "judge_node_effect", "judge_lost_progress", "judge_transport_kept", "judge_throughput_kept",
           "judge_recovered"]

log = logging.getLogger(__name__)


def judge_node_effect(rec: "TrainingRecovery", node: str, evicted: tuple[str, ...] = ()) -> Verdict:
    """The fault took effect iff a worker of the job on the lost node was evicted or stopped: seen by the
    monitor, or evicted by the injector itself (`evicted`: the job's pods among the drain's evictions)."""
    lost = sorted(set(rec.lost_workers) | set(evicted))
    observed = f"{', '.join(lost)} evicted or stopped on {node}" if lost else None
    return judge_effect(f"losing node {node}", observed)


def judge_lost_progress(rec: "TrainingRecovery", budget: float) -> Verdict:
    """Pass iff the worst case (the job's real checkpoint interval, plus the steps it makes while a save is
    in flight: losing the node then loses that save too) and the realised loss (from the step it had
    reached when it lost the node back to the step it resumed from) are both within the budget."""
    lost = lost_steps(rec.step_at_fault, rec.resumed_step)
    interval, source = rec.interval_read
    in_flight = rec.save_steps or 0
    worst = None if interval is None else interval + in_flight
    plus = f" + {in_flight} steps while a save is in flight" if in_flight else ""
    realised = (f"{lost} steps lost (step {rec.step_at_fault} when the job lost the node, resumed from "
                f"{rec.resumed_step})" if lost is not None else "the realised loss was not measured")
    if interval is None:  # the profile's interval is a promise, not a reading: only the realised loss is judged
        if lost is not None and not within(lost, budget):  # observed over the budget: that alone fails it
            return Verdict("lost steps", False, float(lost), float(budget), "steps",
                           f"lost steps: {realised}, over the limit of {budget:g} steps (the job's checkpoint "
                           f"interval was not observed: {source})")
        return Verdict("lost steps", False, None if lost is None else float(lost), float(budget), "steps",
                       f"inconclusive: the job's checkpoint interval was not observed ({source}), so the worst case "
                       f"cannot be judged; {realised}", inconclusive=True)
    if not within(worst, budget):
        return Verdict("lost steps", False, float(worst), float(budget), "steps",
                       f"lost steps: the job checkpoints every {interval} steps ({source}), so a node loss just "
                       f"before a save completes loses up to {worst} steps ({interval}{plus}), over the limit of "
                       f"{budget:g} steps (this time: {realised})")
    if lost is None:
        return Verdict("lost steps", False, None, float(budget), "steps",
                       f"lost steps: not measured (no resume after the fault; limit {budget:g} steps)")
    ok = within(lost, budget)
    return Verdict("lost steps", ok, float(lost), float(budget), "steps",
                   f"lost steps: {realised}, {'within' if ok else 'over'} the limit of {budget:g} steps; worst "
                   f"case {worst} steps: one checkpoint interval of {interval} steps ({source}){plus}")


def judge_transport_kept(rec: "TrainingRecovery") -> Verdict:
    """Pass iff every new worker initialised NCCL on RDMA (no NET/Socket after the restart)."""
    before = ", ".join(rec.transport_before) or "unknown"
    if rec.sockets_after:
        return Verdict("transport", False, None, None, "",
                       f"NCCL re-initialised on NET/Socket after the restart on {', '.join(rec.sockets_after)} "
                       f"(before the fault: {before}): the recovered job trains over TCP sockets, not RDMA "
                       "(check the replacement nodes' RDMA devices and NCCL_IB_HCA)")
    if not rec.transport_after:
        if rec.timeline.recovered is None:
            return Verdict("transport", False, None, None, "", "transport: the job never trained again after the "
                           "fault, so its NCCL transport after the restart is unknown")
        return Verdict("transport", False, None, None, "", "transport unknown: the restarted workers logged no NCCL "
                       "transport line (run the job with NCCL_DEBUG=INFO)")
    return Verdict("transport", True, None, None, "",
                   f"NCCL re-initialised on {', '.join(rec.transport_after)} (before the fault: {before})")


def judge_throughput_kept(rec: "TrainingRecovery", required_ratio: float) -> Verdict:
    """Pass iff the new workers' mean throughput over the stability window is ≥ required_ratio × baseline."""
    unit, base = rec.throughput_unit, rec.throughput_baseline
    if not base:
        return Verdict("throughput", False, None, required_ratio * 100, "%",
                       "throughput: no baseline before the fault (no step lines with samples/s or step time)")
    need = f"{required_ratio:.0%} of the {base:.1f} {unit} baseline"
    if rec.throughput_after is None:
        return Verdict("throughput", False, None, required_ratio * 100, "%",
                       f"throughput: the job logged no training step after recovering, so it never got back to {need}",
                       never_reached=True)
    ratio = rec.throughput_after / base
    ok = within(required_ratio, ratio)
    return Verdict("throughput", ok, round(ratio * 100, 1), required_ratio * 100, "%",
                   f"throughput after recovery {rec.throughput_after:.1f} {unit}, {ratio:.0%} of the {base:.1f} {unit} "
                   f"baseline ({'at least' if ok else 'below'} the required {required_ratio:.0%}) over "
                   f"{format_duration(rec.stable_for_s)} after it resumed", baseline=base)


def judge_recovered(rec: "TrainingRecovery", target_s: float) -> Verdict:
    """Recovered = resumed (the first step after it) within the target, then no restart and not ended
    through the stability window, and caught up with the step at the loss within the target."""
    base = judge_recovery(rec.timeline, target_s, subject="the job", verb="resume")
    injected = rec.timeline.injected
    target = format_duration(target_s)
    ended = rec.ended and f"{rec.ended}{f' ({rec.job_reason})' if rec.job_reason else ''}"
    if rec.timeline.recovered is not None and (ended or rec.restarts_after):
        what = "; ".join(rec.restarts_after) or "no restart seen"
        after = format_duration((rec.timeline.recovered - injected).total_seconds()) if injected else "?"
        tail = f" and ended: {ended}" if ended else ""
        return Verdict("recovery", False, base.measured, float(target_s), "s",
                       f"not recovered: the job resumed {after} after the fault, then did not stay healthy "
                       f"({what}){tail}, {rec.retry_count or 0} Volcano retries")
    if ended:
        return Verdict("recovery", False, base.measured, float(target_s), "s",
                       f"never recovered: the job ended ({ended}) after {rec.retry_count or 0} Volcano retries",
                       never_reached=True)
    if not base.passed:
        return base
    if rec.timeline.caught_up is None:
        return Verdict("recovery", False, base.measured, float(target_s), "s",
                       f"not recovered: the job resumed in {format_duration(base.measured)} but did not catch up "
                       f"with step {rec.step_at_fault} (where it lost the node) within the {target} target",
                       never_reached=True)
    caught = (rec.timeline.caught_up - injected).total_seconds() if injected else None
    if not within(caught, target_s):
        return Verdict("recovery", False, base.measured, float(target_s), "s",
                       f"not recovered in time: resumed in {format_duration(base.measured)} but caught up with step "
                       f"{rec.step_at_fault} only {format_duration(caught)} after the fault, over the {target} target")
    if rec.stable_for_s is not None and rec.stable_for_s + 1.0 < rec.stability_s:
        return Verdict("recovery", False, base.measured, float(target_s), "s",
                       f"not recovered: watched only {format_duration(rec.stable_for_s)} of the "
                       f"{format_duration(rec.stability_s)} stability window after it resumed")
    return Verdict("recovery", True, base.measured, float(target_s), "s",
                   f"{base.reason}; caught up with step {rec.step_at_fault} after {format_duration(caught)}, no restart "
                   f"for {format_duration(rec.stable_for_s)} after resuming")


def judge_left_node(recovery: "TrainingRecovery", node: str) -> Verdict:
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


def judge_resumed(recovery: "TrainingRecovery") -> Verdict:
    """Did the job resume from its latest checkpoint — the store's latest **complete** one (DESIGN §5b: the store's
    own markers are the second key, the log's claim is cross-checked and both are in the reason)?

    - store read: judged against its latest complete checkpoint; a log claiming a newer save complete than the
      store holds is a FAIL (a save the job reported was lost, or never completed); a store holding a newer
      complete checkpoint than the log shows is reported (and judges the resume).
    - store not readable, the profile expecting it to be: a resume the log alone would pass is inconclusive,
      naming why; a failure stays a failure (a misread log can never make a PASS).
    - the profile says the store is not readable (`checkpoint_store.read: none`): the log alone, said so.
    The store is judged as it was **at the fault** (`recovery.store_at_fault`, drills/measure/ckpt_asof.py): a
    checkpoint whose completion evidence was written after it is named and not counted; what a late reading cannot
    tell (no modification times, read after a replacement was scheduled; a checkpoint maybe rotated away) makes a
    resume the log alone would pass inconclusive (`unobserved`), never a made-up PASS or FAIL."""
    store, log_latest = recovery.store, recovery.latest_checkpoint
    if store is None:
        verdict = _against(recovery, log_latest)
        if recovery.store_read == "none":
            return replace(verdict, reason=f"{verdict.reason} (judged on the log alone: the profile says the "
                                           "checkpoint store is not readable)")
        return verdict
    if not store.readable:
        verdict = _against(recovery, log_latest)
        why = f"the checkpoint store could not be read: {store.problem}"
        if not verdict.passed:
            return replace(verdict, reason=f"{verdict.reason}; {why}")
        return replace(verdict, passed=False, inconclusive=True, unobserved=True,
                       reason=f"inconclusive: {why}; the log alone says resumed from {recovery.resumed_step} with the "
                              f"latest checkpoint {log_latest}, and a log is not evidence enough for a pass "
                              "(read the store: profile workloads.training.checkpoint_store)")
    view = recovery.store_at_fault
    latest = view.latest
    truth = latest.step if latest else None
    newer_unknown = sorted((c for c in view.unknown if truth is None or c.step > truth), key=lambda c: c.step)
    if newer_unknown:  # what the store held at the fault cannot be told: the log alone may fail, never pass
        verdict = _against(recovery, log_latest)
        why = (f"the checkpoint store cannot say what it held at the fault: {view.why_unknown} (complete when read: "
               f"{_names(newer_unknown)}; {store.source})")
        if not verdict.passed:
            return replace(verdict, reason=f"{verdict.reason}; {why}")
        return replace(verdict, passed=False, inconclusive=True, unobserved=True, never_reached=False,
                       reason=f"inconclusive: {why}; the log alone says resumed from {recovery.resumed_step} with the "
                              f"latest checkpoint {log_latest}, and a log is not evidence enough for a pass")
    verdict = _against(recovery, truth)
    cited = (f"the store's latest complete checkpoint is {truth} ({latest.name}: {latest.evidence}"
             f"{_written(latest)}; complete at the fault; {store.source})" if latest else
             f"the store held no complete checkpoint at the fault ({store.source})")
    if view.after:
        cited += "; written after the fault, not counted: " + ", ".join(
            f"{c.name} ({c.evidence}{_written(c)})" for c in view.after)
    if log_latest is not None and (truth is None or log_latest > truth):
        kind, held = view.find(log_latest) or (None, None)
        if kind in (None, "unknown") and not view.settled:  # it may have been there and rotated away since
            alone = _against(recovery, log_latest)
            why = (f"the job's log reports checkpoint {log_latest} saved and the store no longer holds it, but "
                   f"entries were added to or removed from the store after the fault (the directory changed"
                   f"{_written_at(store.root_changed_at)}): it may have been rotated away since; {cited}")
            if not alone.passed:
                return replace(alone, reason=f"{alone.reason}; {why}")
            return replace(alone, passed=False, inconclusive=True, unobserved=True, never_reached=False,
                           reason=f"inconclusive: {why}; the job resumed from {recovery.resumed_step}")
        if kind == "after":
            state = (f"held it complete only after the fault ({held.name}: {held.evidence}{_written(held)}: saved "
                     "again after the fault)")
        elif kind == "incomplete":
            state = f"holds it incomplete ({held.name}: {held.evidence})"
        else:
            state = "does not hold it"
        return replace(verdict, passed=False, inconclusive=False, never_reached=False,
                       reason=f"the job's log reports checkpoint {log_latest} saved but the store {state}: a save the "
                              f"job reported complete was lost or never completed; {cited}; the job resumed from "
                              f"{recovery.resumed_step if recovery.resumed_step is not None else 'no checkpoint'}")
    if truth is not None and (log_latest is None or truth > log_latest):
        return replace(verdict, reason=f"{verdict.reason}; {cited}, newer than the latest save its log shows "
                                       f"({log_latest}): judged against the store")
    return replace(verdict, reason=f"{verdict.reason}; {cited}, as the log says")


def _names(checkpoints) -> str:
    """The last few names (the newest matter), and how many more."""
    names = [c.name for c in checkpoints]
    return ", ".join(names[-3:]) + (f" and {len(names) - 3} older" if len(names) > 3 else "")


def _written(c) -> str:
    return _written_at(c.completed_at) if c.completed_at is not None else ""


def _written_at(ts: float | None) -> str:
    return "" if ts is None else f", written {Clock.iso(ts)}"


def _against(recovery: "TrainingRecovery", latest: int | None) -> Verdict:
    """`timeline.judge_resume` against `latest`, worded with why the job never resumed: it ended, or it hung (no
    worker resumed by the end of the wait, e.g. survivors that cannot rejoin a replaced worker)."""
    verdict = judge_resume(recovery.resumed_step, latest)
    if recovery.resumed_step is None and recovery.restarted_from is not None:
        start = "step 0" if recovery.restarted_from <= 100 else f"step {recovery.restarted_from}"
        return replace(verdict, never_reached=False,
                       reason=f"restarted from {start} (no checkpoint loaded): the new workers trained again from "
                              f"{start} although the latest checkpoint was {latest} (are "
                              f"checkpoints written to storage that outlives the pods?)")
    if recovery.resumed_step is None and recovery.resume_failed:
        ended = f"; {recovery.ended}" if recovery.ended else ""
        return replace(verdict, reason=f"resume failed: the job attempted to load its checkpoint and did not restore it "
                                       f"({recovery.resume_failed}){ended}; the latest checkpoint was {latest}")
    if recovery.resumed_step is None and recovery.ended:
        return replace(verdict, reason=f"the job never resumed: {recovery.ended} (the latest checkpoint was {latest})")
    if recovery.resumed_step is None and latest is not None:
        within = f" within {format_duration(recovery.waited_s)} of the fault" if recovery.waited_s else ""
        state = ", ".join(x for x in (recovery.job_phase and f"Volcano job phase {recovery.job_phase}",
                                      recovery.retry_count is not None and f"{recovery.retry_count} retries") if x)
        return replace(verdict, reason=f"the job never resumed: no worker resumed from a checkpoint{within}"
                                       f"{f' ({state})' if state else ''}; the latest checkpoint was {latest}")
    return verdict
