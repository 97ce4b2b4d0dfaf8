"""Judges of a rolling restart (drills/measure/rollout.py measures): the rollout completed in time, every replica
was replaced by a pod that serves, the rollout never took more replicas down than the scenario allows, and users
kept being served (errors and p99 over the rollout's own window).

Each names its evidence: the uids before and after, the moment of fewest available replicas, the errors users
got. The rollout's window runs from the restart to its completion (or the end of the watch when it never
completed: what users went through counts either way).
"""

from __future__ import annotations

import logging
from drills.measure.rollout import RolloutLoad, RolloutOutcome
from drills.verdicts.latency import judge_p99
from drills.verdicts.timeline import Verdict, format_duration, judge_max

__all__ = ["judge_rollout_duration", "judge_rollout_replaced", "judge_rollout_unavailable",
           "judge_rollout_errors", "judge_rollout_p99"]

log = logging.getLogger(__name__)


def judge_rollout_duration(outcome: RolloutOutcome, limit_s: float) -> Verdict:
    """Pass iff the Deployment's status said the rollout was complete within `limit_s` of the restart."""
    if outcome.completed_s is None:
        why = "it stalled (ProgressDeadlineExceeded)" if outcome.stalled else f"at the end: {outcome.status}"
        return Verdict("rollout", False, None, float(limit_s), "s",
                       f"the rollout did not complete within {format_duration(limit_s)}: {why}", never_reached=True)
    verdict = judge_max("rollout", round(outcome.completed_s, 1), limit_s, "s")
    return Verdict("rollout", verdict.passed, verdict.measured, verdict.target, "s",
                   f"rollout completed in {format_duration(outcome.completed_s)} "
                   f"({'within' if verdict.passed else 'over'} the {format_duration(limit_s)} limit; {outcome.status})")


def judge_rollout_replaced(outcome: RolloutOutcome) -> Verdict:
    """Pass iff no pod of before the restart is left (by uid) and `desired` new pods are Ready, in the Service's
    endpoints and have served since they became Ready."""
    counted = [p for p in outcome.after if p.counts]
    problems = [f"pod {name} (uid {outcome.before[name]}) of before the restart still runs" for name in outcome.left]
    for p in outcome.after:
        if not p.ready:
            problems.append(f"new pod {p.pod} is not Ready")
        elif not p.in_endpoints:
            problems.append(f"new pod {p.pod} is Ready but not in the Service's endpoints")
        elif p.served == 0:
            problems.append(f"new pod {p.pod} is Ready and in the endpoints but has not served a request")
    if len(outcome.after) < outcome.desired:
        problems.append(f"{outcome.desired - len(outcome.after)} replica(s) have no new pod")
    passed = not problems and len(counted) >= outcome.desired
    served = all(p.served is not None for p in counted)
    if passed:
        reason = (f"replaced pods: all {len(outcome.before)} pods of before the restart are gone (by uid) and "
                  f"{len(counted)} new pods are Ready, in the Service's endpoints"
                  f"{' and serving' if served else '; serving per pod not observable'}")
    else:
        reason = "replaced pods: " + "; ".join(problems)
    return Verdict("replaced pods", passed, float(len(counted)), float(outcome.desired), "pods", reason)


def judge_rollout_unavailable(outcome: RolloutOutcome, limit: int) -> Verdict:
    """Pass iff the fewest replicas available at once (Ready and not terminating) kept at most `limit` of the
    desired ones down: what the strategy really let go, read from the pods."""
    most = outcome.most_unavailable
    verdict = judge_max("unavailable replicas", most, float(limit), "replicas")
    if most is None:
        return verdict
    when = "" if outcome.min_available_s is None else f", {format_duration(outcome.min_available_s)} after the restart"
    return Verdict(verdict.name, verdict.passed, verdict.measured, verdict.target, verdict.unit,
                   f"{verdict.reason} at once during the rollout (fewest available: {outcome.min_available} of "
                   f"{outcome.desired}{when})")


def judge_rollout_errors(load: RolloutLoad, budget: float, name: str = "rollout errors") -> Verdict:
    """Pass iff the share of failed requests over the load's window is within `budget` (0..1; a rollout's goal is 0)."""
    rate = None if load.error_rate is None else round(load.error_rate * 100.0, 2)
    verdict = judge_max(name, rate, round(budget * 100.0, 6), "%")
    top = "; ".join(f"{n}× {message}" for message, n in load.errors.items())
    counted = "" if load.error_rate is None else f" ({load.failures} of {load.requests} requests)"
    return Verdict(verdict.name, verdict.passed, verdict.measured, verdict.target, verdict.unit,
                   f"{verdict.reason} of requests failing {load.window}{counted}"
                   f"{f'; most frequent: {top}' if top and not verdict.passed else ''}")


def judge_rollout_p99(load: RolloutLoad, factor: float) -> Verdict:
    """Pass iff the users' p99 over the window stays within `factor` × the p99 before the fault, each a p99 of
    enough answers (drills/verdicts/latency.py)."""
    return judge_p99(load.baseline_p99_ms, load.baseline_answers, load.p99_ms, load.answers, factor, load.window)
