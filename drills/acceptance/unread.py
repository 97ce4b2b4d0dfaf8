"""Unknown is not healthy: a check's output that reads as a GO but also carries an error line no reader
classified — a zero-exit tool that printed `ERROR …`, a driver `Xid`, `Segmentation fault`, libmlx5's
`got completion with error`, `Failed to initialize NVML`, `Couldn't …` — is no GO (DESIGN §5b).

Each judge reads its tool's known shapes and ignores what it does not know: an error in the middle of a
healthy table, before the first section of a multi-tool Job, or after the summary changes nothing it reads.
This is the acceptance's second look at the same text: the lines the drills' log readers call error-like
(drills.measure.logunknown.ERROR_LIKE) and the failure shapes the acceptance tools print (a line that starts
with an error word, optionally after the program's `name:`), less what the check's own reader classifies
(NCCL's WARN and INFO lines: the pair and node judges already turn a WARN into `warned`; fio's JSON keys).
A GO with such a line becomes an `unread_error` no-go quoting it; a no-go keeps its own reason.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

from drills.acceptance.judge import CheckResult
from drills.measure.logunknown import ERROR_LIKE

__all__ = ["error_lines", "check"]

log = logging.getLogger(__name__)

# a line that starts with an error word (after an optional `program:` prefix), as C tools and shells print them
_STARTS = re.compile(r"^\s*(?:[\w./-]+:\s+){0,2}(?:error|fatal|failed|failure|couldn't|could not|unable to|cannot|"
                     r"segmentation fault|bus error|aborted|killed)\b", re.IGNORECASE)
# what fails without an error word first: libmlx5's CQE dump header, a shell's report of a crashed tool
_SHAPES = re.compile(r"got completion with error|\(core dumped\)|\bSegmentation fault\b")
# check → the lines its own reader classifies (never judged twice): NCCL's debug lines (the nccl judges read WARN)
_OWN = {"nccl-node": re.compile(r"\bNCCL (?:INFO|WARN)\b"), "nccl-pair": re.compile(r"\bNCCL (?:INFO|WARN)\b")}


def error_lines(check: str, text: str) -> list[str]:
    """The error-like lines of `text` that `check`'s reader does not classify, in order."""
    own = _OWN.get(check)
    out = []
    for line in text.splitlines():
        if own is not None and own.search(line):
            continue
        if ERROR_LIKE.search(line) or _STARTS.search(line) or _SHAPES.search(line):
            out.append(line.strip())
    return out


def check(r: CheckResult, text: str) -> CheckResult:
    """`r`, or an `unread_error` no-go when its GO rests on an output that also says something failed."""
    if not r.go:
        return r
    found = error_lines(r.check, text)
    if not found:
        return r
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return replace(r, go=False, failure="unread_error", measured={**r.measured, "unread_errors": found[:10]},
                   reason=f"the {r.check} output of {r.node} reads as a go but also says `{found[0][:200]}`{more}: "
                          "a line no reader classifies is not a pass (unknown is not healthy)")
