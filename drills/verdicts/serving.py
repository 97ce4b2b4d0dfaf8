"""Judges of the inference drill beyond the timeline: the fault's effect, the replacements, and failures
that users feel but a status-code dashboard does not see (DESIGN §5, issue 12 items 4 and 5).

Each takes measured values (`drills.measure.replicas`, the load's failure kinds) and returns a Verdict
with one sentence; the numbers come from fields, never from the wording of a message.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from drills.load.outcome import ERROR_200, INVALID, TIMEOUT, WRONG_MODEL
from drills.measure.replicas import Replacement
from drills.verdicts.timeline import Verdict, format_duration, judge_min

__all__ = ["judge_fault_effect", "judge_fault_target", "judge_load_coverage", "judge_replacements", "judge_visible_failures",
           "masked_failures"]

log = logging.getLogger(__name__)


def judge_fault_effect(unaffected: Sequence[str], killed: int, restart_mode: bool) -> Verdict:
    """Pass iff every killed pod really went down; otherwise inconclusive — recovery from a fault that did
    not happen proves nothing (DESIGN §3)."""
    if not unaffected:
        how = "restarted" if restart_mode else "deleted"
        return Verdict("fault effect", True, float(killed), float(killed), "pods",
                       f"fault effect: all {killed} killed pods were {how}")
    state = "its container was never restarted" if restart_mode else "it is still running"
    pods = ", ".join(unaffected)
    return Verdict("fault effect", False, float(killed - len(unaffected)), float(killed), "pods",
                   f"inconclusive: the fault had no effect on {len(unaffected)} of {killed} killed pods "
                   f"({pods}: {state}), so there is no recovery to judge", inconclusive=True)


def judge_fault_target(killed: Sequence[str], served_before: Mapping[str, int] | None, in_service: Sequence[str],
                       service: str) -> Verdict:
    """The fault reached what the load measures (issue 30, evidence of effect): with a replica header, a killed
    pod answered the load before the kill; without one, every killed pod was in the Service's endpoints before
    the kill (the weaker key, said so). Otherwise inconclusive, naming what is missing: users never saw the
    pods that were killed, so their recovery proves nothing."""
    killed = sorted(killed)
    if served_before is not None:
        answered = {p: served_before.get(p, 0) for p in killed if served_before.get(p, 0) > 0}
        if answered:
            said = ", ".join(f"{p} answered {n}" for p, n in sorted(answered.items()))
            return Verdict("fault target", True, float(len(answered)), 1.0, "pods",
                           f"fault target: the load measured the killed pods ({said} request(s) before the kill)")
        if not served_before:
            return Verdict("fault target", False, 0.0, 1.0, "pods", inconclusive=True, reason=
                           f"inconclusive: the load's answers before the kill named no replica (the endpoint's replica "
                           f"header was absent), so nothing ties the killed pods ({', '.join(killed)}) to what the load "
                           "measured; check workloads.inference.replica_header")
        others = ", ".join(f"{p} ({n})" for p, n in sorted(served_before.items()))
        return Verdict("fault target", False, 0.0, 1.0, "pods", inconclusive=True, reason=
                       f"inconclusive: none of the killed pods ({', '.join(killed)}) answered the load before the "
                       f"kill (the answers named: {others}), so the fault did not reach what the load measures")
    outside = [p for p in killed if p not in set(in_service)]
    if killed and not outside:
        return Verdict("fault target", True, float(len(killed)), float(len(killed)), "pods",
                       f"fault target: every killed pod was in service {service}'s endpoints before the kill (the "
                       "load's answers name no replica, so which pod answered is not observed)")
    return Verdict("fault target", False, float(len(killed) - len(outside)), float(len(killed)), "pods",
                   inconclusive=True, reason=f"inconclusive: killed pod(s) {', '.join(outside) or '(none)'} were not in "
                   f"service {service}'s endpoints before the kill, and the load's answers name no replica: nothing "
                   "ties the fault to what the load measures")


def judge_load_coverage(gap_s: float) -> Verdict:
    """Pass iff the load's results reach the end of the recovery wait; otherwise inconclusive — with no
    answer seen yet, the last `gap_s` cluster seconds the load generator had not reported may hold one."""
    if gap_s <= 0:
        return Verdict("load results", True, 0.0, 0.0, "s", "load results: they cover the whole recovery wait")
    return Verdict("load results", False, round(gap_s, 1), 0.0, "s",
                   f"inconclusive: the load generator's results stop {format_duration(gap_s)} before the end of "
                   "the recovery wait (it fell behind), so whether the endpoint served again in time is unknown",
                   inconclusive=True)


def judge_replacements(replacements: Sequence[Replacement], killed: int) -> Verdict:
    """Pass iff each killed pod has a replacement that is Ready, in the Service's endpoints and has served."""
    counted = [r for r in replacements if r.counts]
    verdict = judge_min("replaced pods", len(counted), killed, "pods")
    if verdict.passed:
        served = all(r.served is not None for r in counted)
        return Verdict(verdict.name, True, verdict.measured, verdict.target, verdict.unit,
                       f"{verdict.reason} (Ready, in the Service's endpoints"
                       f"{' and serving' if served else '; serving per pod not observable'})")
    problems = [_problem(r) for r in replacements if not r.counts]
    if len(replacements) < killed:
        problems.append(f"{killed - len(replacements)} killed pod(s) have no replacement at all")
    return Verdict(verdict.name, False, verdict.measured, verdict.target, verdict.unit,
                   f"{verdict.reason}: " + "; ".join(problems))


def judge_visible_failures(kinds: Mapping[str, int], client_timeout_s: float | None) -> Verdict:
    """Pass iff no request failed invisibly: a 200 with an error payload, a 2xx without generated text, a
    completion from another model, or a request hung past the client timeout (each is a failure users feel and
    status codes hide)."""
    masked = masked_failures(kinds, client_timeout_s)
    total = sum(kinds.get(k, 0) for k in (ERROR_200, INVALID, WRONG_MODEL, TIMEOUT))
    if not masked:
        return Verdict("visible failures", True, 0.0, 0.0, "requests",
                       "visible failures: every failed request was an HTTP error answered in time "
                       "(no 200 with an error payload, no empty completion, no other model's answer, "
                       "no hung request)")
    return Verdict("visible failures", False, float(total), 0.0, "requests", masked)


def masked_failures(kinds: Mapping[str, int], client_timeout_s: float | None) -> str:
    """"12 requests returned HTTP 200 with an error payload; 3 requests hung past the 30s client timeout"."""
    parts = []
    if kinds.get(ERROR_200):
        parts.append(f"{kinds[ERROR_200]} requests returned HTTP 200 with an error payload")
    if kinds.get(INVALID):
        parts.append(f"{kinds[INVALID]} requests returned 2xx without a valid completion (no generated text)")
    if kinds.get(WRONG_MODEL):
        parts.append(f"{kinds[WRONG_MODEL]} requests returned 2xx with a completion from another model than the one "
                     "the endpoint serves")
    if kinds.get(TIMEOUT):
        limit = "the" if client_timeout_s is None else f"the {format_duration(client_timeout_s)}"
        parts.append(f"{kinds[TIMEOUT]} requests hung past {limit} client timeout")
    return "; ".join(parts)


def _problem(r: Replacement) -> str:
    if not r.ready:
        return f"replacement {r.pod} is not Ready"
    if not r.in_endpoints:
        return f"replacement {r.pod} is Ready but not in the Service's endpoints"
    return f"replacement {r.pod} is Ready and in the Service's endpoints but has not served a request"
