"""A tool that failed proves nothing, whatever it printed: the check's pod must have ended `Succeeded`
with its container's exit code 0 for a GO to stand.

The judges read the tool's words; the kubelet's word on how the tool ended is the second key (DESIGN §5b).
nvidia-smi exits 14 when an infoROM is corrupted and 15 when a GPU fell off the bus (its man page, RETURN
VALUE) while its table can still read whole; dcgmi, gpu-burn and all_reduce_perf exit non-zero on a
failure their output may not show in a shape the judge knows (cut, reordered, a new version). A GO whose
pod failed is `tool_error`, naming the exit code; a no-go keeps its own, more specific reason.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.acceptance.judge import CheckResult
from drills.core.kube import obj_get

__all__ = ["exit_code", "check"]

log = logging.getLogger(__name__)


def exit_code(pod: dict | None) -> int | None:
    """The check container's exit code from the pod's status (None: the kubelet reported none)."""
    for status in obj_get(pod or {}, "status", "containerStatuses", default=None) or ():
        terminated = (status.get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            return int(terminated["exitCode"])
    return None


def check(r: CheckResult, pod: dict | None) -> CheckResult:
    """`r`, or a `tool_error` no-go when its GO rests on a pod that failed or whose tool exited non-zero."""
    if pod is None or not r.go:
        return r
    code, phase = exit_code(pod), obj_get(pod, "status", "phase")
    r = replace(r, evidence={**r.evidence, "exit_code": code, "pod_phase": phase})
    if code == 0 and phase == "Succeeded":
        return r
    how = f"exited with code {code}" if code is not None else f"ended {phase or 'without a phase'} with no exit code"
    return replace(r, go=False, failure="tool_error",
                   reason=f"the {r.check} tool on {r.node} {how} (pod {phase}), although its output reads as a go: "
                          "a tool that failed proves nothing")
