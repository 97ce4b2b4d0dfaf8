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

__all__ = ["UnknownReading", "ERROR_LIKE", "GLOG_ERROR", "CONSEQUENCE_S"]

log = logging.getLogger(__name__)

# the word ERROR, a traceback, an NCCL WARN, an Xid; and what fails without those words: a CUDA or NCCL error as
# PyTorch words it (`RuntimeError: CUDA error: …`, `NCCL error: …`), a C++ abort, the driver failing a GPU.
# A Python exception line of its own (`RuntimeError: …`, `torch.OutOfMemoryError: …`) and a C++ exception's origin
# (`Exception raised from ncclCommWatchdog at …`) are errors without those words; so are nccl-tests' `Test NCCL failure`
# and the kernel's reports of failed host hardware (an uncorrectable memory error, a machine check, an APEI record);
# a FATAL line of glog / c10 logging (`F0628 15:21:28.669647  1910 context_gpu.h:107] …`,
# `[F ProcessGroupNCCL.cpp:1169] …`): the level itself says the process is aborting. Their ERROR level (`E0912 …]`,
# `[E socket.cpp:793]`, torchrun's `[rank0]:[E1105 …]`) is `GLOG_ERROR`: PyTorch prints it for the consequences of
# failures the readers classify (the watchdog's `Some NCCL operations have failed…`) and for failures of its own (a
# store socket timing out); such a line is unknown unless a classified error of the same process (this stream, the
# same launcher rank) is within `CONSEQUENCE_S` of it — or, in a log without times, `CONSEQUENCE_RECORDS` records.
# glog's stamp is MMDD; c10 prints the month unpadded in 2.x (`[E521 15:43:02.707733876 socket.cpp:1023]`).
# The shell's `Killed` alone on a line: a process of the job got SIGKILL (the OOM killer, most often) — no reader
# has a kind for whose it was, and it must not read as healthy.
# A process that died of a signal, in each shape that reports it (red team, wave 8): the shell's `Segmentation fault
# (core dumped)` / `Aborted (core dumped)` / `Bus error (core dumped)` (bash; zsh's `segmentation fault  python …`),
# glog's and abseil's failure banners (`*** Aborted at 1525341768 (unix time) …`, `*** SIGSEGV (@0x8) received by PID
# 19262 …`, `*** SIGSEGV received at time=… on cpu 169 ***`), torchrun's `Signal 11 (SIGSEGV) received by PID …`;
# Python logging's CRITICAL level (`CRITICAL:root:…`, `[CRITICAL]`), and a Go runtime's `panic: …` / `fatal error: …`
# (a sidecar, a storage client): each says a process of the job failed, whatever printed it.
_ERROR_LIKE = re.compile(r"Traceback \(most recent call last\)|\bERROR\b|NCCL WARN|\bXid\b|CUDA error|"
                        r"cuda runtime error|NCCL error|Fatal Python error|terminate called|NVRM: .*\bfailed\b|"
                        r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): |Exception raised from \S+ at |"
                        r"\bTest (?:NCCL |CUDA )?failure\b|\bUE memory (?:read |write )?error|\[Hardware Error\]|"
                        r"Machine check events logged|^\[?F\d{3,4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+ )?[\w./-]+:\d+\] |"
                        r"^\[F [\w./-]+:\d+\] |^Killed\s*$|"
                        r"\b[Ss]egmentation fault\b|\(core dumped\)|\*\*\* Aborted at \d+ \(unix time\)|"
                        r"\*\*\* SIG[A-Z]+ |\bSignal \d+ \(SIG[A-Z]+\) received by PID|\bCRITICAL\b|"
                        r"^\s*panic: |^fatal error: |^goroutine \d+ \[running\]:")


class _Prefiltered:
    """A pattern searched only in text that holds one of the literals every match must hold (or starts as one
    must start): Python's `re` tries each of the pattern's 28 alternatives at each position of a line (67 µs on a
    Megatron iteration line, twice per record); the literals are found by one C scan each (2 µs in all). The same
    matches: tests/unit/test_log_fail_safe.py compares both over every line of the real logs."""

    def __init__(self, pattern: re.Pattern[str], literals: tuple[str, ...], starts: tuple[str, ...]):
        self.regex, self.pattern, self.literals, self.starts = pattern, pattern.pattern, literals, starts

    def search(self, text: str) -> re.Match[str] | None:
        if text.lstrip().startswith(self.starts) or any(lit in text for lit in self.literals):
            return self.regex.search(text)
        return None


# what each alternative of _ERROR_LIKE cannot match without (kept beside it: an alternative added there adds its
# literal here, or the prefilter hides its matches)
ERROR_LIKE = _Prefiltered(_ERROR_LIKE, (
    "Traceback (most recent call last)", "ERROR", "NCCL WARN", "Xid", "CUDA error", "cuda runtime error",
    "NCCL error", "Fatal Python error", "terminate called", "NVRM: ", "Error: ", "Exception: ",
    "Exception raised from ", "failure", "UE memory ", "[Hardware Error]", "Machine check events logged",
    "egmentation fault", "(core dumped)", "*** Aborted at ", "*** SIG", "received by PID", "CRITICAL", "panic: ",
    "fatal error: ", "goroutine "), ("F", "[F", "Killed"))
GLOG_ERROR = re.compile(r"^(?:\[rank\d+\]:)?\[?E\d{3,4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+ )?[\w./-]+:\d+\] |"
                        r"^\[E [\w./-]+:\d+\] ")
# an error-level glog/c10 line this close to a classified error of the same process is that error's consequence:
# PyTorch prints the watchdog's and the elastic agent's follow-up lines in the same millisecond burst
# (tests/data/real/logs); 5 s leaves room for a loaded node's log buffering, far under any later, separate failure
# (a store timeout is minutes)
CONSEQUENCE_S = 5.0
CONSEQUENCE_RECORDS = 10
# what NCCL's IB async thread reports without it being an error (net_ib.cc: non-fatal events; lognccl)
_NCCL_INFO_WARN = re.compile(r"NET/IB\s*: (?:\S+:\d+ )?Got async (?:error )?event ?: (?:port active|LID change|"
                             r"P_Key change|SM change|client reregistration|GID table change|send queue drained|"
                             r"path migrated|last WQE reached|SRQ limit reached|communication established)")
_FACTS = frozenset({"step", "loss", "checkpoint_saved", "checkpoint_started", "resumed", "resume_attempt",
                    "resume_failed", "nccl_transport", "error", "vllm_phase", "skipped"})


class UnknownReading:
    """Keeps `self.unknown`: (when, body, raw line) of every error-like record no recogniser classified."""

    unknown: list[tuple[datetime | None, str, str]]  # (when, the line's body, the raw line)
    _known_bodies: set[str]  # bodies of error-like records a recogniser classified (a repeat is as known)
    _records_seen: int  # records read so far (the distance between two records, in a log without times)
    _errors_at: list[tuple[int | None, datetime | None, int]]  # the last classified errors: (rank, when, record)
    _glog_pending: list[tuple[int | None, datetime | None, int, str]]  # error-level glog lines kept as unknown

    def _check_unknown(self, rec: Record, out: list[TrainingEvent], in_traceback: bool) -> None:
        self._records_seen += 1
        index = self._records_seen
        at = rec.at or getattr(self, "_last_at", None)
        if any(e.kind == "error" for e in out):
            self._classified_error(rec.rank, at, index)
        text = rec.raw if rec.nccl is not None else rec.body
        glog = bool(GLOG_ERROR.search(rec.body))
        if glog and not any(e.kind in _FACTS for e in out) and not getattr(self, "_consumed", False):
            tb_open = getattr(self, "_tb", None) is not None and not self._tb.closed  # type: ignore[attr-defined]
            if not (in_traceback or tb_open):
                if not any(_near(rec.rank, at, index, e) for e in self._errors_at):
                    self._glog_pending.append((rec.rank, at, index, rec.raw))
                    self.unknown.append((at, rec.body.strip(), rec.raw))
            return
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

    def _classified_error(self, rank: int | None, at: datetime | None, index: int) -> None:
        """A classified error: error-level glog lines of the same process near it are its consequences (withdrawn)."""
        here = (rank, at, index)
        self._errors_at = [*self._errors_at[-20:], here]
        near = {raw for r, t, i, raw in self._glog_pending if _near(r, t, i, here)}
        if near:
            self._glog_pending = [p for p in self._glog_pending if p[3] not in near]
            self.unknown = [u for u in self.unknown if u[2] not in near]

    def _withdraw_unknown(self, out: list[TrainingEvent]) -> None:
        """A record classified after the fact (an NCCL WARN its `-> N` cascade made an error) is known after all."""
        raws = {e.line for e in out if e.kind == "error" and e.line}
        if raws:
            self.unknown = [u for u in self.unknown if u[2] not in raws]


def _near(rank: int | None, at: datetime | None, index: int, error: tuple[int | None, datetime | None, int]) -> bool:
    """The same process (launcher rank) and, by time where both have one, within CONSEQUENCE_S; else by records."""
    e_rank, e_at, e_index = error
    if rank != e_rank:
        return False
    if at is not None and e_at is not None:
        return abs((at - e_at).total_seconds()) <= CONSEQUENCE_S
    return abs(index - e_index) <= CONSEQUENCE_RECORDS
