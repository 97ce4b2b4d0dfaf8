"""Judges of the noisy-neighbour drill (drills/measure/neighbour.py measures): no serving replica evicted or
preempted while the burst ran, and the burst's jobs ran or waited in their queue (none failed). The users' figures
(errors, p99) under the burst are judged by drills/verdicts/rollout.py's load judges over the burst's window."""

from __future__ import annotations

import logging
from collections import Counter

from drills.measure.neighbour import NeighbourOutcome
from drills.verdicts.timeline import Verdict, format_duration

__all__ = ["judge_burst_effect", "judge_serving_kept", "judge_burst_jobs", "WAITING", "FAILED"]

log = logging.getLogger(__name__)

WAITING = ("Pending", "Inqueue", "")  # Volcano job phases of a job waiting for its resources
FAILED = ("Failed", "Aborted", "Aborting", "Terminated", "Terminating")


def judge_burst_effect(outcome: NeighbourOutcome) -> Verdict:
    """Did the burst contest the serving replicas' GPUs (issue 30, class 3: evidence of effect)? Only then does "no
    replica evicted" say the platform protects serving: a burst that fits in the free GPUs never asks the scheduler
    to choose. Evidence, from the objects: a serving replica disrupted, a burst pod placed on a node a replica served
    from, or a burst pod the scheduler could not place (PodScheduled=False, Unschedulable: no free GPUs as things
    stood, the serving nodes included — the burst tolerates the GPU taint and has no node selector; it counts only when
    a serving node was a candidate: not cordoned, no NoSchedule taint the burst does not tolerate). None of them:
    inconclusive, naming where every burst job went."""
    shared = sorted({n for j in outcome.jobs for n in j.nodes} & set(outcome.serving_nodes))
    waiting = {pod: msg for j in outcome.jobs for pod, msg in j.unschedulable.items()}
    open_nodes = [n for n in outcome.serving_nodes if n not in outcome.closed]
    if waiting and outcome.serving_nodes and not open_nodes:  # the serving nodes were never candidates (red team w8)
        waiting = {}
    if outcome.disrupted:
        seen = f"{len(outcome.disrupted)} serving replica(s) disrupted"
    elif shared:
        seen = f"burst pods placed on {', '.join(shared)}, where serving replicas run"
    elif waiting:
        pod, msg = next(iter(waiting.items()))
        seen = (f"{len(waiting)} burst pod(s) found no free GPUs (PodScheduled=False, Unschedulable; {pod}: "
                f"{msg or 'no message'})")
    else:
        seen = None
    if seen:
        return Verdict("fault effect", True, None, None, "", f"fault effect: the burst contested the serving GPUs: {seen}")
    placed = ", ".join(f"{j.name} {j.phase or 'Pending'} on {', '.join(j.nodes) or 'no node'}" for j in outcome.jobs)
    closed = "; ".join(f"{n} {why}" for n, why in outcome.closed.items())
    if closed and not open_nodes:
        return Verdict("fault effect", False, None, None, "",
                       f"inconclusive: the burst could not contest the serving replicas' GPUs — every serving node was "
                       f"out of its reach ({closed}), so burst pods left without GPUs ({placed or 'no burst job found'})"
                       f" say nothing of how serving holds under a burst: not tested", inconclusive=True)
    return Verdict("fault effect", False, None, None, "",
                   f"inconclusive: the burst never contested the serving replicas' GPUs — every burst pod was placed "
                   f"on free GPUs away from the serving nodes ({', '.join(outcome.serving_nodes) or 'none read'}) or "
                   f"never reached the scheduler, none was left without GPUs and no replica was disrupted "
                   f"({placed or 'no burst job found'}), so whether serving holds under a burst was not tested",
                   inconclusive=True)


def judge_serving_kept(outcome: NeighbourOutcome, hold_s: float) -> Verdict:
    """Pass iff no serving pod of before the burst was evicted, preempted or deleted within `hold_s`."""
    gone = outcome.disrupted
    if not gone:
        return Verdict("serving evictions", True, 0.0, 0.0, "pods",
                       f"serving evictions: none of the {len(outcome.before)} serving replicas was evicted or preempted "
                       f"in the {format_duration(hold_s)} after the burst (fewest Ready at once: "
                       f"{outcome.min_available} of {outcome.desired})")
    each = "; ".join(f"{d.pod} {d.after_s:g}s after the burst ({d.reason}{': ' + d.message if d.message else ''})"
                     for d in gone)
    return Verdict("serving evictions", False, float(len(gone)), 0.0, "pods",
                   f"serving evictions: {len(gone)} of {len(outcome.before)} serving replicas evicted or preempted for "
                   f"the burst: {each}; fewest Ready at once: {outcome.min_available} of {outcome.desired}")


def judge_burst_jobs(outcome: NeighbourOutcome) -> Verdict:
    """Pass iff every burst job is running or waits in its queue (none failed); the sentence says which ran where."""
    phases = Counter(j.phase or "Pending" for j in outcome.jobs)
    failed = [j.name for j in outcome.jobs if j.phase in FAILED]
    summary = ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items()))
    if not outcome.jobs:
        return Verdict("burst jobs", False, None, None, "jobs", "burst jobs: none of the burst's jobs was found",
                       inconclusive=True)
    if failed:
        return Verdict("burst jobs", False, float(len(failed)), 0.0, "jobs",
                       f"burst jobs: {', '.join(failed)} failed ({summary}) instead of waiting in queue {outcome.queue}")
    on = sorted({n for j in outcome.jobs for n in j.nodes})
    return Verdict("burst jobs", True, 0.0, 0.0, "jobs",
                   f"burst jobs: {summary} in queue {outcome.queue} (none failed; running on {', '.join(on) or 'no node'})")
