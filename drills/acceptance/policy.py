"""The acceptance policy: which checks every node must pass (`acceptance.required`, all of them by
default, DCGM at level ≥ 2), and the explicit waivers (check, node, reason, who).

A required check with no result for a node — left out of `acceptance.checks`, or never run — is a
`not_run` no-go for that node: silence is not a pass. A waiver lets a node be accepted without one
check's GO; it is never implicit, and the report prints it in the sign-off section with its author. A
waiver excuses a check, never the want of all evidence: a node of which no check observed anything (an
empty policy, every required check waived) is a `not_run` no-go on `evidence`.
"""

from __future__ import annotations

import logging

from drills.acceptance.judge import CheckResult, not_run
__all__ = ["missing_required", "no_evidence", "waiver_for", "blocking", "EVIDENCE"]

EVIDENCE = "evidence"  # the result's check when nothing at all was observed of a node (never waivable)

log = logging.getLogger(__name__)


def missing_required(cfg, nodes: tuple[str, ...], results: list[CheckResult]) -> list[CheckResult]:
    """A `not_run` no-go per (node, required check) with no result at all."""
    have = {(r.node, r.check) for r in results}
    out = []
    for check in cfg.required:
        why = ("it is not in acceptance.checks" if check not in cfg.checks
               else "the run produced no result for it")
        out += [not_run(node, check, f"required check {check} did not run on {node}: {why}")
                for node in nodes if (node, check) not in have]
    return out


def no_evidence(cfg, nodes: tuple[str, ...], results: list[CheckResult]) -> list[CheckResult]:
    """A `not_run` no-go per node that no check found a go for and nothing else keeps out: a GO needs evidence."""
    seen = {r.node for r in results if r.go}
    kept = {r.node for r in results if blocking(cfg, r)}
    out = []
    for node in nodes:
        if node in seen or node in kept:
            continue
        waived = sorted({r.check for r in results if r.node == node})
        why = (f"every check of {node} is waived ({', '.join(waived)})" if waived
               else f"the policy required no check of {node} (acceptance.required names none that ran)")
        out.append(not_run(node, EVIDENCE, f"nothing was observed of {node}: {why}; a waiver excuses a check, "
                                           "never the want of all evidence"))
    return out


def waiver_for(cfg, node: str, check: str):
    return next((w for w in cfg.waivers if w.node == node and w.check == check), None)


def blocking(cfg, r: CheckResult) -> bool:
    """Whether a no-go result keeps its node out: yes, unless a waiver names this check on this node."""
    if r.go:
        return False
    if waiver_for(cfg, r.node, r.check) is not None:
        return False
    return True
