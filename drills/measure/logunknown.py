"""Error-like lines no reader classifies (a part of `LogReader`): unknown is not healthy (DESIGN §5b).

A corpus closes what it has seen; what it has not seen must fail safe. A record that looks like an error — a
traceback, an `ERROR` level, an `NCCL WARN`, a driver `Xid` — and that no recogniser of the reader turned into a
fact (an error of a known kind, a resume, a save, a transport, a step; NCCL's informational IB events; a line
inside a traceback, which the traceback reader reports as one error) is kept here with its time, so a judge can
refuse to pass a stability window on it (`drills.verdicts.health.judge_log_health`). An NCCL WARN that becomes a
known error only with the `-> N` cascade after it is withdrawn then.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime

from drills.measure.logformats import TrainingEvent
from drills.measure.logprefix import Record

__all__ = ["UnknownReading", "ERROR_LIKE"]

log = logging.getLogger(__name__)

# the word ERROR, a traceback, an NCCL WARN, an Xid; and what fails without those words: a CUDA or NCCL error as
# PyTorch words it (`RuntimeError: CUDA error: …`, `NCCL error: …`), a C++ abort, the driver failing a GPU.
# A Python exception line of its own (`RuntimeError: …`, `torch.OutOfMemoryError: …`) and a C++ exception's origin
# (`Exception raised from ncclCommWatchdog at …`) are errors without those words; so are nccl-tests' `Test NCCL failure`
# and the kernel's reports of failed host hardware (an uncorrectable memory error, a machine check, an APEI record);
# a FATAL line of glog / c10 logging (`F0628 15:21:28.669647  1910 context_gpu.h:107] …`, `[F ProcessGroupNCCL.cpp:1169] …`):
# the level itself says the process is aborting. (Their ERROR level, `E0912 …]` / `[E socket.cpp:793]`, is not here: PyTorch
# prints it for the consequences of failures the readers classify, and a line that is only a consequence must not hold a
# stability window inconclusive.) The shell's `Killed` alone on a line: a process of the job got SIGKILL (the OOM killer,
# most often) — no reader has a kind for whose it was, and it must not read as healthy.
ERROR_LIKE = re.compile(r"Traceback \(most recent call last\)|\bERROR\b|NCCL WARN|\bXid\b|CUDA error|"
                        r"cuda runtime error|NCCL error|Fatal Python error|terminate called|NVRM: .*\bfailed\b|"
                        r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): |Exception raised from \S+ at |"
                        r"\bTest (?:NCCL |CUDA )?failure\b|\bUE memory (?:read |write )?error|\[Hardware Error\]|"
                        r"Machine check events logged|^\[?F\d{4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+ )?[\w./-]+:\d+\] |"
                        r"^\[F [\w./-]+:\d+\] |^Killed\s*$")
# what NCCL's IB async thread reports without it being an error (net_ib.cc: non-fatal events; lognccl)
_NCCL_INFO_WARN = re.compile(r"NET/IB\s*: (?:\S+:\d+ )?Got async (?:error )?event ?: (?:port active|LID change|"
                             r"P_Key change|SM change|client reregistration|GID table change|send queue drained|"
                             r"path migrated|last WQE reached|SRQ limit reached|communication established)")
_FACTS = frozenset({"step", "loss", "checkpoint_saved", "checkpoint_started", "resumed", "resume_attempt",
                    "resume_failed", "nccl_transport", "error", "vllm_phase"})


class UnknownReading:
    """Keeps `self.unknown`: (when, body, raw line) of every error-like record no recogniser classified."""

    unknown: list[tuple[datetime | None, str, str]]  # (when, the line's body, the raw line)
    _known_bodies: set[str]  # bodies of error-like records a recogniser classified (a repeat is as known)

    def _check_unknown(self, rec: Record, out: list[TrainingEvent], in_traceback: bool) -> None:
        text = rec.raw if rec.nccl is not None else rec.body
        if not ERROR_LIKE.search(text) and not ERROR_LIKE.search(rec.body):
            return
        if in_traceback or getattr(self, "_tb", None) is not None and not self._tb.closed:  # type: ignore[attr-defined]
            return  # the traceback reader reports it (one error of kind `traceback`)
        body = rec.body.strip()
        if any(e.kind in _FACTS for e in out) or getattr(self, "_consumed", False):
            self._known_bodies.add(body)
            return
        if body in self._known_bodies or body in getattr(self, "_seen_root", ()):
            return  # the same line again (a root cause repeated is one error, reported once): known all the same
        if rec.nccl == "WARN" and _NCCL_INFO_WARN.search(rec.body):
            return
        self.unknown.append((rec.at or getattr(self, "_last_at", None), rec.body.strip(), rec.raw))

    def _withdraw_unknown(self, out: list[TrainingEvent]) -> None:
        """A record classified after the fact (an NCCL WARN its `-> N` cascade made an error) is known after all."""
        raws = {e.line for e in out if e.kind == "error" and e.line}
        if raws:
            self.unknown = [u for u in self.unknown if u[2] not in raws]
